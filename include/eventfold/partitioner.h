// Partitioner: which partition of a cluster holds an entity (cluster mode,
// docs/CLUSTER.md).
//
// An entity's partition is StableHash(entity type, key) mod P, with the
// 64-bit FNV-1a the store already uses for its lock stripes: deterministic
// across processes and builds, so one entity's events stay in one partition
// for the life of the cluster. An event whose type no entity knows
// (unrouted) goes by the hash of its event_id, so its duplicates meet in one
// partition store and are decided there.
//
// Thread-safety: immutable after construction; share freely.

#ifndef EVENTFOLD_PARTITIONER_H_
#define EVENTFOLD_PARTITIONER_H_

#include <string_view>

#include "eventfold/event.h"
#include "eventfold/status.h"

namespace eventfold {

class Partitioner {
 public:
  // Fails with kInvalidArgument unless 1 <= partitions <= 4096.
  static Result<Partitioner> Make(int partitions);

  int partitions() const { return partitions_; }

  // The partition (0..P-1) of `entity`.
  int PartitionOf(const EntityRef& entity) const;

  // The partition of an unrouted event.
  int PartitionOfUnrouted(std::string_view event_id) const;

 private:
  explicit Partitioner(int partitions) : partitions_(partitions) {}
  int partitions_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_PARTITIONER_H_
