#include "eventfold/partitioner.h"

#include <string>

#include "core/stable_hash.h"

namespace eventfold {

Result<Partitioner> Partitioner::Make(int partitions) {
  if (partitions < 1 || partitions > 4096) {
    return Status::InvalidArgument("partitions: " + std::to_string(partitions) +
                                   " is outside 1..4096");
  }
  return Partitioner(partitions);
}

int Partitioner::PartitionOf(const EntityRef& entity) const {
  return static_cast<int>(StableHash(entity.entity, entity.id) %
                          static_cast<uint64_t>(partitions_));
}

int Partitioner::PartitionOfUnrouted(std::string_view event_id) const {
  // A distinct second part keeps an event_id from colliding by design with
  // an entity (type, key) pair.
  return static_cast<int>(StableHash(event_id, "\x01unrouted") %
                          static_cast<uint64_t>(partitions_));
}

}  // namespace eventfold
