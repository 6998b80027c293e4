// ReadClusterStatus (include/eventfold/cluster.h): who owns which
// partition, who keeps warm copies, how many messages each holds and how
// many its owner and standbys have folded.

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>
#include <vector>

#include "cluster/consumer_names.h"
#include "cluster/nats_connection.h"
#include "eventfold/cluster.h"

namespace eventfold {

using cluster::FromNats;
using cluster::KvBucket;
using cluster::NatsConnection;

namespace {

constexpr uint64_t kNoConsumer = ~uint64_t{0};

// Pending plus unacknowledged messages of consumer `durable`; kNoConsumer
// when it does not exist.
Result<uint64_t> Backlog(jsCtx* js, const std::string& stream, const std::string& durable) {
  jsConsumerInfo* ci = nullptr;
  jsErrCode err = jsErrCode{};
  const natsStatus s = js_GetConsumerInfo(&ci, js, stream.c_str(), durable.c_str(), nullptr, &err);
  if (s == NATS_NOT_FOUND || err == JSConsumerNotFoundErr) return kNoConsumer;
  if (s != NATS_OK) return FromNats(s, "reading consumer " + durable, err);
  const uint64_t behind = ci->NumPending + static_cast<uint64_t>(ci->NumAckPending);
  jsConsumerInfo_Destroy(ci);
  return behind;
}

// Whether partition k's owner `owner` has said ("f.<k>") that its store
// folded the subject to a sequence past which the stream leader holds no
// message. A consumer led by a replica whose copy of the stream is behind
// reports nothing pending while the stream holds more, or skips messages
// and counts them as delivered (see fold_worker.cc): its "nothing pending"
// alone does not mean the owner has folded everything.
Result<bool> FoldedToEnd(NatsConnection* c, kvStore* leases, const std::string& stream, int k,
                         const std::string& owner) {
  Result<cluster::KvValue> folded = cluster::KvGet(leases, cluster::FoldedKey(k));
  if (!folded.ok()) {
    if (folded.status().code() == Status::Code::kNotFound) return false;
    return folded.status();
  }
  const std::string_view value = folded->value;
  const size_t space = value.rfind(' ');
  if (space == std::string_view::npos || value.substr(0, space) != owner) return false;
  uint64_t seq = 0;
  const auto [end, ec] =
      std::from_chars(value.data() + space + 1, value.data() + value.size(), seq);
  // Not a number: nothing is known to be folded, so not to the end.
  if (ec != std::errc() || end != value.data() + value.size()) return false;
  Result<uint64_t> next = cluster::NextSeqOnSubject(c->nc(), stream, PartitionSubject(stream, k),
                                                    seq + 1, c->timeout_ms());
  if (!next.ok()) return next.status();
  return *next == 0;
}

}  // namespace

Result<ClusterStatus> ReadClusterStatus(const ClusterOptions& options) {
  ClusterStatus status;
  Result<ClusterLayout> layout = ReadClusterLayout(options);
  if (!layout.ok()) return layout.status();
  status.layout = std::move(*layout);
  Result<std::unique_ptr<NatsConnection>> c =
      NatsConnection::Open(options.urls, options.timeout_ms);
  if (!c.ok()) return c.status();
  jsCtx* js = (*c)->js();

  // Message counts per partition subject.
  const std::string filter = options.stream + ".p.*";
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Stream.Info.SubjectsFilter = filter.c_str();
  jsStreamInfo* si = nullptr;
  jsErrCode err = jsErrCode{};
  natsStatus s = js_GetStreamInfo(&si, js, options.stream.c_str(), &jo, &err);
  if (s != NATS_OK) return FromNats(s, "reading stream " + options.stream, err);
  status.partitions.resize(static_cast<size_t>(status.layout.partitions));
  for (int k = 0; k < status.layout.partitions; ++k) status.partitions[k].partition = k;
  if (si->State.Subjects != nullptr) {
    for (int i = 0; i < si->State.Subjects->Count; ++i) {
      const jsStreamStateSubject& sub = si->State.Subjects->List[i];
      const std::string_view name(sub.Subject);
      const std::string prefix = options.stream + ".p.";
      if (!name.starts_with(prefix)) continue;
      int k = -1;
      const std::string_view digits = name.substr(prefix.size());
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
      if (ec != std::errc() || end != digits.data() + digits.size()) continue;
      if (k >= 0 && k < status.layout.partitions) status.partitions[k].messages = sub.Msgs;
    }
  }
  jsStreamInfo_Destroy(si);

  // Leases, then each owner's consumer: what it has not yet folded and
  // acknowledged. No owner, an owner still acquiring, or no consumer yet:
  // nothing is folded for certain, lag = messages.
  const std::string bucket = options.stream + "_leases";
  kvStore* raw = nullptr;
  s = js_KeyValue(&raw, js, bucket.c_str());
  if (s != NATS_OK) return FromNats(s, "opening bucket " + bucket);
  KvBucket leases(raw);
  for (PartitionStatus& p : status.partitions) {
    p.lag = p.messages;
    Result<cluster::KvValue> owner = cluster::KvGet(leases.get(), cluster::LeaseKey(p.partition));
    if (!owner.ok()) continue;
    p.owner = owner->value;
    // A new owner still setting up its consumer has folded nothing yet.
    if (p.owner.starts_with(cluster::kAcquiringPrefix)) {
      p.owner = p.owner.substr(cluster::kAcquiringPrefix.size());
      continue;
    }
    const std::string durable = cluster::OwnerDurable(options.stream, p.partition, p.owner);
    Result<uint64_t> behind = Backlog(js, options.stream, durable);
    if (!behind.ok()) return behind.status();
    if (*behind != kNoConsumer) p.lag = std::min(*behind, p.messages);
    if (p.lag == 0 && p.messages > 0) {
      Result<bool> done = FoldedToEnd(c->get(), leases.get(), options.stream, p.partition, p.owner);
      if (!done.ok()) return done.status();
      if (!*done) p.lag = 1;  // at least: not yet confirmed by the owner
    }
  }
  Result<std::vector<std::string>> keys = cluster::KvKeys(js, leases.get(), options.timeout_ms);
  if (!keys.ok()) return keys.status();
  const std::vector<std::string>& all_keys = *keys;
  for (const std::string& key : all_keys) {
    if (key.starts_with(cluster::kWorkerKeyPrefix)) {
      status.workers.push_back(key.substr(cluster::kWorkerKeyPrefix.size()));
    }
  }

  // Standbys ("s.<k>.<id>") and what each has not folded: the partition's
  // lag is the largest backlog among its owner and standbys.
  for (PartitionStatus& p : status.partitions) {
    const std::string prefix = cluster::StandbyKeyPrefix(p.partition);
    for (const std::string& key : all_keys) {
      if (key.starts_with(prefix)) p.standbys.push_back(key.substr(prefix.size()));
    }
    std::sort(p.standbys.begin(), p.standbys.end());
    for (const std::string& id : p.standbys) {
      const std::string durable = cluster::StandbyDurable(options.stream, p.partition, id);
      Result<uint64_t> behind = Backlog(js, options.stream, durable);
      if (!behind.ok()) return behind.status();
      // Registered, consumer not readable yet: assume nothing folded.
      p.lag = std::max(p.lag, std::min(*behind == kNoConsumer ? p.messages : *behind, p.messages));
    }
    p.acked = p.messages - p.lag;
  }

  // The refused stream's size.
  const std::string refused = options.stream + "_refused";
  si = nullptr;
  if (js_GetStreamInfo(&si, js, refused.c_str(), nullptr, nullptr) == NATS_OK) {
    status.refused = si->State.Msgs;
  }
  jsStreamInfo_Destroy(si);
  return status;
}

}  // namespace eventfold
