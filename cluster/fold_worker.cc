// FoldWorker (include/eventfold/cluster.h): partition leases in the lease
// bucket, one Store per owned partition, a durable pull consumer feeding it.
//
// Leases: key "p.<k>" holds the owner's id ("acquiring:<id>" while it sets
// up the partition's consumer); "w.<id>" says a worker is alive, and names
// the process ("<id> <nonce> <host> <pid>"): a lease, a consumer and a
// standby key name only the id, so two processes started with one id
// would each take the other's for its own. A worker starts only when no
// live process holds w.<id> (ClaimId), and one that finds w.<id> rewritten
// by another process stops folding (Halt).
// Both expire with the bucket's TTL unless rewritten, so a dead worker's
// partitions free themselves; renewals are kvStore_Update with the last
// revision, so a worker that lost a lease (it expired and another created
// it) finds out on its next renewal and stops folding that partition.
//
// Consumers: the new owner of partition k deletes every owner consumer of
// k ("<stream>_p<k>_<id>", cluster/consumer_names.h) and creates its own to
// start right after the last sequence its own store has folded
// (DIR/p<k>.seq), or at the start of the stream when it has no store: the
// consumer's acknowledgements then always describe the current owner's
// store, and `lag` is what that store has not folded yet. The name carries
// the worker id so that a worker whose lease expired before it noticed
// fetches only from its own, deleted or orphaned, consumer and can never
// acknowledge (and so hide) a message of the new owner's.
//
// Gaps: a consumer is not trusted to deliver every message of its subject.
// nats-server 2.9 can elect as consumer leader a replica whose copy of the
// stream is behind (the consumer's and the stream's raft groups elect
// separately, so a node resumed after a pause leads consumers while its
// stream is still catching up). Such a consumer delivers only what that
// copy holds and reports nothing pending, for as long as it lives, or
// skips what it cannot load and goes on with later messages. So before a
// fetched message advances the .seq, the worker asks the stream leader for
// the first message on the subject after the .seq (one request per batch,
// and one more where the batch itself may hide a gap: at a redelivery or a
// jump in the consumer's delivery sequence); any message the consumer
// skipped is read from the stream leader and folded first, in stream order.
// When the consumer has nothing, the same question, at most once per lease
// period, finds a tail it does not deliver: that tail is folded from the
// stream leader and the consumer replaced (see TailCheck). At the end of
// the subject, a consumer that has waited a whole period for the
// acknowledgement of a delivery the worker never received is replaced too
// (see OwedAcks).
//
// Standbys: key "s.<k>.<id>" (same TTL) says worker <id> keeps a warm copy
// of partition k in its DIR/p<k>, fed by its own durable consumer
// "<stream>_s<k>_<id>" exactly as an owner's store is (DIR/p<k>.seq, acks
// after the batch), but with no lease and no subscriptions. When it takes
// the partition over it closes the copy, deletes that consumer and opens
// the store as owner: the owner's consumer then starts after the copy's
// .seq, so the takeover folds only what the copy had not.
//
// Subscriptions (FoldWorkerOptions::subscriptions) run on each owned
// partition's store: started when the store opens, before its consumer
// exists, and stopped (checkpoints saved) before the store closes.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/consumer_names.h"
#include "cluster/marker_file.h"
#include "cluster/nats_connection.h"
#include "cluster/report_log.h"
#include "cluster/wire.h"
#include "core/start_thread.h"
#include "core/thread_annotations.h"
#include "eventfold/cluster.h"
#include "eventfold/store.h"
#include "eventfold/subscription.h"

namespace eventfold {
namespace {

using cluster::FromNats;
using cluster::KvBucket;
using cluster::NatsConnection;

namespace fs = std::filesystem;

std::string HostName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return host[0] ? host : "worker";
}

std::string DefaultWorkerId() {
  std::string id = HostName() + "-" + std::to_string(::getpid());
  for (char& c : id) {
    if (!cluster::IsNameChar(c)) c = '_';
  }
  return id;
}

struct Partition {
  uint64_t lease_rev = 0;
  std::unique_ptr<Store> store;
  natsSubscription* sub = nullptr;
  uint64_t folded_seq = 0;  // last intake sequence folded into `store`
  // A fetched batch not folded yet because the stream leader could not be
  // asked about gaps before it: folded (and acknowledged) on a later try
  // instead of fetched again. Destroyed with `sub`.
  natsMsgList held{};
  std::string durable;  // its consumer's name
  // The furthest stream sequence the consumer has delivered, and for
  // TailCheck, when to ask next and what the stream leader named last.
  uint64_t delivered_seq = 0;
  int64_t next_tail_check = 0;  // clock micros
  uint64_t tail_seen = 0;
  // The .seq at the last TailCheck that found nothing after it on the
  // stream leader (the subject folded to its end), for the "f.<k>" key.
  bool at_end = false;
  uint64_t end_seq = 0;
  int64_t next_end_check = 0;  // clock micros; see ConfirmEnd
  // For OwedAcks: the consumer's ack floor + 1 when, at the last
  // TailCheck that found the end, it waited for an acknowledgement (0: it
  // did not).
  uint64_t owed_seen = 0;
  // After `store`: destroyed (stopped) first, as they read it.
  std::vector<std::unique_ptr<Subscription>> subs;
};

// The Delivery an intake message carries (cluster/wire.h).
Delivery DeliveryOf(natsMsg* m) {
  Delivery d;
  for (const char* name : cluster::kForwardedHeaders) {
    const char* v = nullptr;
    if (natsMsgHeader_Get(m, name, &v) == NATS_OK && v) d.headers.emplace_back(name, v);
  }
  d.body.assign(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)));
  const char* at = nullptr;
  if (natsMsgHeader_Get(m, cluster::kReceivedAtHeader, &at) == NATS_OK && at) {
    d.received_at = cluster::ParseReceivedAt(at);
  }
  return d;
}

// Destroys the batch `list` holds, if any, and empties it.
void DropBatch(natsMsgList* list) {
  if (list->Count > 0) natsMsgList_Destroy(list);
  *list = natsMsgList{};
}

class FoldWorkerImpl final : public FoldWorker {
 public:
  FoldWorkerImpl(const ClusterOptions& cluster, const FoldWorkerOptions& options,
                 ClusterLayout layout, Profile profile, std::unique_ptr<NatsConnection> conn,
                 std::unique_ptr<KvBucket> leases, int64_t renew_ms)
      : cluster_(cluster),
        options_(options),
        layout_(std::move(layout)),
        profile_(std::move(profile)),
        conn_(std::move(conn)),
        leases_(std::move(leases)),
        clock_(options.clock ? options.clock : SystemClock()),
        renew_ms_(renew_ms),
        // A pull whose first message is over its max_bytes is refused, so
        // never below the largest message the servers take (with headers).
        fetch_max_bytes_(std::max<int64_t>(options.fetch_max_bytes,
                                           2 * natsConnection_GetMaxPayload(conn_->nc()))),
        standbys_(options.standbys) {
    if (options_.worker_id.empty()) options_.worker_id = DefaultWorkerId();
    // The nonce tells apart two processes of one id on one host (a pid
    // reused in another container, say); host and pid are for the operator.
    std::random_device random;
    const uint64_t nonce = (uint64_t{random()} << 32) ^ random();
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(nonce));
    announcement_ =
        options_.worker_id + " " + hex + " " + HostName() + " " + std::to_string(::getpid());
  }

  // Makes "w.<id>" this process's before the worker starts: created, or
  // taken over from a dead process. kBusy when a live process holds it: it
  // rewrites the key every lease round, so a key whose revision moves while
  // it is watched for three rounds (the TTL, when the period is derived
  // from it) is a live worker's. A key that does not move is one a killed
  // worker could not delete (a stopped worker deletes its own); the
  // bucket's TTL removes it within that time, or it is taken over then.
  [[nodiscard]] Status ClaimId() {
    const std::string key = WorkerKey();
    const auto in_use = [&](const std::string& holder) {
      return Status::Busy("--worker-id " + options_.worker_id +
                          ": a running worker uses this id (it announces itself as \"" + holder +
                          "\"); give each worker its own id, or stop that one first");
    };
    for (int attempt = 0; attempt < 3; ++attempt) {
      Result<uint64_t> created = cluster::KvCreate(leases_->get(), key, announcement_);
      if (created.ok()) {
        worker_rev_ = *created;
        return Status::OK();
      }
      if (created.status().code() != Status::Code::kBusy) {
        return created.status().WithContext("announcing worker " + options_.worker_id);
      }
      Result<cluster::KvValue> seen = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
      if (!seen.ok() && seen.status().IsNotFound()) continue;  // deleted meanwhile
      if (!seen.ok()) return seen.status();
      if (seen->value == announcement_) {
        // Our own create, unanswered but applied.
        worker_rev_ = seen->revision;
        return Status::OK();
      }
      const int64_t until = clock_->NowMicros() + renew_ms_ * 3000;
      bool gone = false;
      while (clock_->NowMicros() < until) {
        clock_->SleepUntil(std::min(until, clock_->NowMicros() + 250 * 1000));
        Result<cluster::KvValue> now = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
        if (!now.ok() && now.status().IsNotFound()) {
          gone = true;  // its worker stopped, or the TTL removed it
          break;
        }
        if (!now.ok()) return now.status();
        if (now->revision != seen->revision) return in_use(now->value);
      }
      if (gone) continue;
      Result<uint64_t> taken =
          cluster::KvUpdate(conn_->js(), leases_->get(), key, announcement_, seen->revision);
      if (taken.ok()) {
        worker_rev_ = *taken;
        return Status::OK();
      }
      if (taken.status().code() != Status::Code::kBusy) return taken.status();
      // Rewritten at the last moment (alive after all), or removed by the
      // TTL just now (created on the next attempt).
      Result<cluster::KvValue> now = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
      if (now.ok()) return in_use(now->value);
    }
    return Status::Busy("--worker-id " + options_.worker_id +
                        ": its key was removed and written again three times while this worker "
                        "started; is another worker starting with this id?");
  }

  ~FoldWorkerImpl() override { Stop(); }

  // Starts the worker's thread: OK, or kUnavailable when the system refuses
  // it (Stop() then only withdraws the worker's key).
  [[nodiscard]] Status StartRunning() {
    return StartThread(&thread_, "the fold worker", [this] { Run(); });
  }

  std::vector<int> Owned() const override {
    MutexLock lock(&mu_);
    return owned_;
  }

  std::vector<int> Standbys() const override {
    MutexLock lock(&mu_);
    return standing_by_;
  }

  uint64_t Folded() const override { return folded_.load(); }

  uint64_t SubscriptionBacklog() const override { return backlog_.load(); }

  std::string LastError() const override {
    MutexLock lock(&mu_);
    return last_error_;
  }

  bool Failing() const override { return failing_.load(); }

  bool Halted() const override { return halted_.load(); }

  // Start() could not claim the id: the destructor's Stop() leaves w.<id>
  // (another process's) alone.
  void Abandon() { halted_.store(true); }

  std::vector<std::string> TakeReports() override { return reports_.Take(); }

  void Stop() override {
    {
      MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // A halted worker let go of everything, and its names are another's.
    if (halted_.load()) return;
    while (!parts_.empty()) Release(parts_.begin()->first);
    // A copy nobody keeps warm any more falls behind: stale.
    while (!standby_.empty()) CloseStandby(standby_.begin()->first, /*stale=*/true);
    // Only while the key is still this process's (the revision it last
    // wrote, or its announcement at a later one: a rewrite that timed out
    // but was applied).
    const std::string key = WorkerKey();
    if (!cluster::KvDeleteAt(conn_->js(), leases_->get(), key, worker_rev_).ok()) {
      Result<cluster::KvValue> now = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
      if (now.ok() && now->value == announcement_) {
        (void)cluster::KvDeleteAt(conn_->js(), leases_->get(), key, now->revision);
      }
    }
    Publish();
  }

 private:
  std::string WorkerKey() const { return cluster::WorkerKey(options_.worker_id); }
  std::string StoreDir(int k) const {
    return (fs::path(options_.data_dir) / ("p" + std::to_string(k))).string();
  }
  std::string SeqPath(int k) const { return StoreDir(k) + ".seq"; }
  // Whether DIR/p<k> holds a store (its CURRENT file).
  bool HasStore(int k) const {
    std::error_code ec;
    return fs::exists(fs::path(StoreDir(k)) / "CURRENT", ec);
  }
  // Present while DIR/p<k> is a copy another worker has moved past: the
  // partition was lost or given away, not just stopped with this worker.
  // `eventfold list|show|log|check --data DIR` skip such stores.
  std::string StalePath(int k) const { return StoreDir(k) + ".stale"; }
  // Present while DIR/p<k> is this worker's standby copy: nearly current,
  // but not the partition's answer either; the read commands skip it too.
  std::string StandbyPath(int k) const { return StoreDir(k) + ".standby"; }
  std::string StandbyKey(int k) const { return cluster::StandbyKey(k, options_.worker_id); }
  std::string StandbyDurable(int k) const {
    return cluster::StandbyDurable(cluster_.stream, k, options_.worker_id);
  }

  // Synced: after a power cut, a copy that was marked must not read as
  // current. (A removed mark that comes back only makes a copy read as
  // stale, and the worker marks every copy again when it starts.)
  void MarkStale(int k) {
    const std::string text = "partition " + std::to_string(k) +
                             " is not this worker's; another copy is ahead of this one\n";
    if (Status st = cluster::ReplaceFile(StalePath(k), text, /*sync=*/true); !st.ok()) {
      Fail(st.WithContext("marking partition " + std::to_string(k) + "'s copy stale"));
    }
  }

  // The copies this worker left when it last ran (stopped or died) are
  // current only as of their last batch, and another worker may have folded
  // past them since: each is marked stale until this worker owns the
  // partition or keeps it warm again (Acquire and OpenStandby remove the
  // mark). A standby's mark from then goes too: it is no standby now.
  void MarkLeftCopiesStale() {
    for (int k = 0; k < layout_.partitions; ++k) {
      if (!HasStore(k)) continue;
      MarkStale(k);
      std::error_code ec;
      fs::remove(StandbyPath(k), ec);
    }
  }
  std::string Durable(int k) const {
    return cluster::OwnerDurable(cluster_.stream, k, options_.worker_id);
  }

  // Deletes the owner consumers of partition k that other workers left
  // (a previous owner's, or one that has lost its lease without noticing).
  // Only tidiness: the names already keep them apart. Best effort.
  void DeleteOtherOwnerConsumers(int k) {
    jsConsumerNamesList* names = nullptr;
    jsErrCode err = jsErrCode{};
    if (js_ConsumerNames(&names, conn_->js(), cluster_.stream.c_str(), nullptr, &err) != NATS_OK) {
      return;
    }
    const std::string prefix = cluster::OwnerDurablePrefix(cluster_.stream, k);
    const std::string mine = Durable(k);
    for (int i = 0; i < names->Count; ++i) {
      const std::string_view name(names->List[i]);
      if (!name.starts_with(prefix) || name == mine) continue;
      err = jsErrCode{};
      (void)js_DeleteConsumer(conn_->js(), cluster_.stream.c_str(), names->List[i], nullptr, &err);
    }
    jsConsumerNamesList_Destroy(names);
  }

  void Fail(const Status& st) { Note(st.ToString()); }
  // What LastError() says next: a failure, or what the worker did about a
  // problem it worked around.
  void Note(std::string text) {
    reports_.Report(text);
    MutexLock lock(&mu_);
    last_error_ = std::move(text);
  }

  // Failing() and TakeReports() after a round.
  void EndRound(bool failed) {
    failing_.store(failed);
    reports_.RoundEnded(failed);
  }

  // Recomputes SubscriptionBacklog() over the owned partitions.
  void NoteBacklog() {
    uint64_t backlog = 0;
    for (auto& [k, p] : parts_) {
      const uint64_t last = p.store->feed().LastSeq();
      for (auto& sub : p.subs) {
        const uint64_t checkpoint = sub->Stats().checkpoint;
        if (last > checkpoint) backlog += last - checkpoint;
      }
    }
    backlog_.store(backlog);
  }

  // Makes Owned() reflect parts_.
  void Publish() {
    MutexLock lock(&mu_);
    owned_.clear();
    for (const auto& [k, p] : parts_) owned_.push_back(k);
    standing_by_.clear();
    for (const auto& [k, p] : standby_) standing_by_.push_back(k);
  }

  // How long after a failed lease round the next one starts, ms: half a
  // second, or the renewal period when that is shorter.
  int64_t RetryLeasesMs() const { return std::min<int64_t>(renew_ms_, 500); }

  // Waits `micros` on the worker's Clock, or until Stop, or until
  // `next_lease` (the next lease round is not put off by a pause).
  void Pause(int64_t micros, int64_t next_lease = std::numeric_limits<int64_t>::max()) {
    const int64_t until = std::min(clock_->NowMicros() + micros, next_lease);
    MutexLock lock(&mu_);
    while (!stop_.load() && clock_->NowMicros() < until)
      clock_->WaitUntil(lock.native(), cv_, until);
  }

  void Run() {
    MarkLeftCopiesStale();
    int64_t next_lease = 0;
    bool leases_failed = false;  // the last lease round's
    while (!stop_.load()) {
      const int64_t now = clock_->NowMicros();
      if (now >= next_lease) {
        leases_failed = !Leases();
        // A round JetStream did not answer is tried again soon, not a whole
        // period later: any renewal before the TTL keeps a lease, and the
        // outage may be a stream-leader election of the lease bucket (4-9 s
        // in nats-server 2.9) against a TTL of 10 s. The retry starts after
        // the failed round, which may have waited out its timeouts.
        next_lease =
            leases_failed ? clock_->NowMicros() + RetryLeasesMs() * 1000 : now + renew_ms_ * 1000;
        if (halted_.load()) {
          EndRound(true);
          return;
        }
      }
      if (parts_.empty() && standby_.empty()) {
        EndRound(leases_failed);
        Pause(std::max<int64_t>(renew_ms_ / 4, 10) * 1000, next_lease);
        continue;
      }
      bool failed = false;
      for (auto& [k, p] : parts_) {
        if (stop_.load()) break;
        failed |= !FoldSome(k, &p, /*owned=*/true);
      }
      for (auto& [k, p] : standby_) {
        if (stop_.load()) break;
        failed |= !FoldSome(k, &p, /*owned=*/false);
      }
      NoteBacklog();
      EndRound(failed || leases_failed);
      if (failed) {
        // JetStream unreachable or a store failing: do not spin.
        Pause(200 * 1000, next_lease);
      }
    }
  }

  // Rewrites "w.<id>" at the revision this worker last wrote. False when
  // JetStream does not answer (a failure of the round), or when another
  // process has rewritten the key: it was started with this worker's id,
  // and this one halts. A key that expired or was deleted (JetStream
  // unreachable past the TTL) is created anew.
  bool Announce() {
    const std::string key = WorkerKey();
    Result<uint64_t> r =
        cluster::KvUpdate(conn_->js(), leases_->get(), key, announcement_, worker_rev_);
    if (!r.ok() && r.status().code() == Status::Code::kBusy) {
      Result<cluster::KvValue> now = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
      if (!now.ok() && now.status().IsNotFound()) {
        r = cluster::KvCreate(leases_->get(), key, announcement_);
        if (!r.ok() && r.status().code() == Status::Code::kBusy) {
          now = cluster::KvGetFromLeader(conn_->js(), leases_->get(), key);
        }
      }
      if (!r.ok() && now.ok() && now->value == announcement_) {
        // This process's own words (the nonce is no other's): a create or
        // an update of ours that went unanswered was applied after all
        // (seen while the bucket's stream changed leader). Ours; the next
        // round rewrites it at this revision.
        r = now->revision;
      } else if (!r.ok() && now.ok()) {
        Halt(now->value);
        return false;
      }
      if (!r.ok() && !now.ok() && !now.status().IsNotFound()) r = now.status();
    }
    if (!r.ok()) {
      Fail(r.status().WithContext("announcing worker " + options_.worker_id));
      return false;
    }
    worker_rev_ = *r;
    return true;
  }

  // Another process announced itself under this worker's id (`holder`):
  // both would take each other's leases, consumers and standby keys for
  // their own, and fold every partition twice. This one stops: its stores
  // close (marked stale: nobody keeps them current now), and everything
  // the two share by name (leases, consumers, w.<id>, standby keys) is
  // left as it is, to the other.
  void Halt(const std::string& holder) {
    Fail(Status::Busy("--worker-id " + options_.worker_id +
                      ": another process announced itself under this id (\"" + holder +
                      "\"; this one is \"" + announcement_ +
                      "\"); this worker stops folding and leaves the id's partitions to it: give "
                      "each worker its own id"));
    for (auto& [k, part] : parts_) {
      DropFeed(&part);
      MarkStale(k);
    }
    parts_.clear();
    for (auto& [k, part] : standby_) {
      DropFeed(&part);
      std::error_code ec;
      fs::remove(StandbyPath(k), ec);
      MarkStale(k);
    }
    standby_.clear();
    NoteBacklog();
    halted_.store(true);
    stop_.store(true);
    Publish();
  }

  // Lets go of a partition's feed in this process: its held batch, its
  // subscription (not its consumer) and its subscriptions' handlers; the
  // store closes when `part` goes.
  static void DropFeed(Partition* part) {
    DropBatch(&part->held);
    natsSubscription_Destroy(part->sub);
    part->sub = nullptr;
    // Handlers finish and checkpoints are saved while the store is open.
    for (auto& sub : part->subs) sub->Stop();
    part->subs.clear();
  }

  // The number of live workers, from their "w.<id>" keys; at least 1.
  static int LiveWorkers(const std::vector<std::string>& keys) {
    const auto live = std::count_if(keys.begin(), keys.end(), [](const std::string& k) {
      return k.starts_with(cluster::kWorkerKeyPrefix);
    });
    return std::max(static_cast<int>(live), 1);
  }

  // One lease round: say we are alive, renew what we own, give back what is
  // over our share, take free partitions up to it. False when JetStream did
  // not answer the announcement, a renewal or the listing of the keys.
  bool Leases() {
    // Renewals and the announcement happen at the start of a round only, so
    // a round stops taking partitions and warm copies once it has run a
    // renewal period (having taken one at least); the next round starts at
    // once and takes the rest. Each takeover costs several JetStream
    // requests: one worker taking 32 partitions in one round took 18 s,
    // past the TTL of the first ones it took, and of its own w.<id>.
    const int64_t take_until = clock_->NowMicros() + renew_ms_ * 1000;
    if (!Announce()) return false;  // JetStream is unreachable (renewing would fail too), or halted
    const int p = layout_.partitions;
    // Within a third of the TTL, so that the renewals below stay in time.
    const Result<std::vector<std::string>> keys =
        cluster::KvKeys(conn_->js(), leases_->get(), renew_ms_);

    std::vector<int> lost;
    bool unanswered = false;  // a renewal JetStream did not answer
    for (auto& [k, part] : parts_) {
      const std::string& id = options_.worker_id;
      Result<uint64_t> renewed =
          cluster::KvUpdate(conn_->js(), leases_->get(), cluster::LeaseKey(k), id, part.lease_rev);
      if (renewed.ok()) {
        part.lease_rev = *renewed;
      } else if (renewed.status().code() != Status::Code::kBusy) {
        // No answer (a timeout) says nothing about the lease, and the
        // renewal may even have been applied: kept, as when the
        // announcement above goes unanswered and nothing is renewed. The
        // next round renews it against the same revision and finds out
        // (KvUpdate takes a renewal applied after all as done); meanwhile
        // the worker folds from its own consumer only (see Fencing in
        // docs/CLUSTER.md). The renewals after it would most likely wait
        // out their timeouts too, one after the other: they are left to
        // the next round as well.
        Fail(renewed.status().WithContext("partition " + std::to_string(k) +
                                          ": renewing its lease (tried again next round)"));
        unanswered = true;
        break;
      } else {
        // Expired, or another worker's now. That is a cluster doing its
        // job (this worker stalled or lost JetStream past the TTL, and
        // another took over), not an error of this worker's: noted
        // plainly, without a status code. Nor does it make the round a
        // failure (Failing()): the partition is given up at once and
        // nothing is retried, and a failure would have `eventfold fold`
        // say "folding again" a round later when nothing had stopped. What
        // made the lease lapse, if anything did (JetStream not answering),
        // is a failure of its own.
        Note("partition " + std::to_string(k) +
             " given up: renewing its lease: " + renewed.status().message());
        lost.push_back(k);
        continue;
      }
      if (part.at_end) WriteFoldedEnd(k, part);
    }
    for (int k : lost) {
      Close(k);
      MarkStale(k);
    }
    if (unanswered || !keys.ok()) {
      // JetStream is not answering, or without the live workers the share
      // is unknown: this round renews only, and takes, gives back and
      // keeps warm nothing new.
      if (!keys.ok()) Fail(keys.status());
      Publish();
      return false;
    }
    const int live = LiveWorkers(*keys);
    const size_t share = static_cast<size_t>((p + live - 1) / live);
    while (parts_.size() > share) {
      const int k = std::prev(parts_.end())->first;
      Release(k);
      MarkStale(k);
    }

    // Partitions this worker keeps warm first (their takeover is nearly
    // free), then the rest from a worker-specific offset so that workers
    // starting together do not all race for partition 0 first.
    std::vector<int> order;
    for (const auto& [k, part] : standby_) order.push_back(k);
    const int offset = static_cast<int>(std::hash<std::string>{}(options_.worker_id) % p);
    for (int i = 0; i < p; ++i) {
      if (!standby_.count((offset + i) % p)) order.push_back((offset + i) % p);
    }
    bool took_one = false;
    for (int k : order) {
      if (parts_.size() >= share) break;
      if (parts_.count(k)) continue;
      if (took_one && clock_->NowMicros() >= take_until) break;
      took_one = true;
      // Taken as "acquiring:<id>" until the consumer is recreated, so that
      // `cluster status` does not read the previous owner's consumer as ours.
      const std::string acquiring = std::string(cluster::kAcquiringPrefix) + options_.worker_id;
      Result<uint64_t> created = cluster::KvCreate(leases_->get(), cluster::LeaseKey(k), acquiring);
      if (!created.ok() && created.status().code() == Status::Code::kBusy) {
        // Ours from before a restart of this same worker id: adopt it.
        Result<cluster::KvValue> held = cluster::KvGet(leases_->get(), cluster::LeaseKey(k));
        if (held.ok() && (held->value == options_.worker_id || held->value == acquiring)) {
          created = held->revision;
        }
      }
      if (!created.ok()) continue;
      // The warm copy becomes the owner's store: its consumer goes, the
      // owner's starts after its .seq.
      if (standby_.count(k)) CloseStandby(k, /*stale=*/false);
      uint64_t lease_rev = *created;
      bool lease_lost = false;  // an update said the entry is no longer ours
      Status st = Acquire(k, &lease_rev, &lease_lost);
      if (st.ok()) {
        // Ready: the lease now names us plainly (revision-checked).
        const std::string& id = options_.worker_id;
        Result<uint64_t> taken =
            cluster::KvUpdate(conn_->js(), leases_->get(), cluster::LeaseKey(k), id, lease_rev);
        if (taken.ok()) {
          parts_[k].lease_rev = *taken;
        } else {
          lease_lost = taken.status().code() == Status::Code::kBusy;
          st = taken.status().WithContext("taking the lease of partition " + std::to_string(k));
          Close(k);  // and marked stale below
        }
      }
      if (!st.ok()) {
        // A lease lost on the way (it expired during the set-up and another
        // worker took it) is a note, as a lost renewal is above; JetStream
        // not answering or a store that cannot open is a failure.
        if (lease_lost) {
          Note(st.message());
        } else {
          Fail(st);
        }
        // Not ours, nor kept warm (a warm copy was closed for the takeover).
        if (HasStore(k)) MarkStale(k);
        // Given back only while it is still the entry we wrote: one that
        // expired during a slow set-up may be another worker's by now (if
        // not, it expires by itself).
        (void)cluster::KvDeleteAt(conn_->js(), leases_->get(), cluster::LeaseKey(k), lease_rev);
      }
    }
    Standbys(live, *keys, take_until, took_one);
    Publish();
    return true;
  }

  // Keeps this worker's standbys at its share: with n = min(standbys, live
  // workers - 1) copies wanted per partition, it keeps warm at most
  // ceil(P * n / live) partitions it does not own, each with fewer than n
  // other standbys. When a race put more than n on one partition, the
  // standbys whose ids sort last give theirs up.
  // Opens warm copies until `open_until` on the worker's Clock, and one at
  // least unless `took_one` (the round already took a partition).
  void Standbys(int live, const std::vector<std::string>& keys, int64_t open_until, bool took_one) {
    const int n = std::min(standbys_, live - 1);
    std::map<int, std::vector<std::string>> others;  // partition -> other standbys, sorted
    for (const std::string& key : keys) {
      if (!key.starts_with(cluster::kStandbyKeyPrefix)) continue;
      const size_t from = cluster::kStandbyKeyPrefix.size();
      const size_t dot = key.find('.', from);
      if (dot == std::string::npos) continue;
      int k = -1;
      const auto [end, ec] = std::from_chars(key.data() + from, key.data() + dot, k);
      if (ec != std::errc() || end != key.data() + dot) continue;
      const std::string id = key.substr(dot + 1);
      if (k >= 0 && id != options_.worker_id) others[k].push_back(id);
    }
    for (auto& [k, ids] : others) std::sort(ids.begin(), ids.end());

    std::vector<int> drop;
    for (const auto& [k, part] : standby_) {
      const std::vector<std::string>& ids = others[k];
      const auto before = std::lower_bound(ids.begin(), ids.end(), options_.worker_id);
      if (n <= 0 || parts_.count(k) || before - ids.begin() >= n) drop.push_back(k);
    }
    for (int k : drop) CloseStandby(k, /*stale=*/true);
    for (const auto& [k, part] : standby_) {
      uint64_t rev = 0;
      const natsStatus s = kvStore_PutString(&rev, leases_->get(), StandbyKey(k).c_str(),
                                             options_.worker_id.c_str());
      if (s != NATS_OK) Fail(FromNats(s, "renewing the standby of partition " + std::to_string(k)));
    }
    if (n <= 0) return;

    const int p = layout_.partitions;
    const size_t share = static_cast<size_t>((p * n + live - 1) / live);
    std::vector<std::pair<size_t, int>> candidates;  // (other standbys, partition)
    for (int k = 0; k < p; ++k) {
      if (parts_.count(k) || standby_.count(k)) continue;
      const size_t have = others[k].size();
      if (have < static_cast<size_t>(n)) candidates.emplace_back(have, k);
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [have, k] : candidates) {
      if (standby_.size() >= share) break;
      if (took_one && clock_->NowMicros() >= open_until) break;
      took_one = true;
      if (Status st = OpenStandby(k); !st.ok()) Fail(st);
    }
  }

  // Opens DIR/p<k> as a warm copy fed by this worker's standby consumer,
  // then registers it.
  Status OpenStandby(int k) {
    Partition part;
    if (Status st = OpenFed(k, StandbyDurable(k), &part); !st.ok()) return st;
    // Synced, as MarkStale's.
    if (Status st = cluster::ReplaceFile(
            StandbyPath(k),
            "a standby copy of partition " + std::to_string(k) + ", owned by another worker\n",
            /*sync=*/true);
        !st.ok()) {
      standby_.emplace(k, std::move(part));
      CloseStandby(k, /*stale=*/true);
      return st.WithContext("marking partition " + std::to_string(k) + "'s copy a standby");
    }
    std::error_code ec;
    fs::remove(StalePath(k), ec);  // kept warm again: it catches up from its .seq
    uint64_t rev = 0;
    const natsStatus s =
        kvStore_PutString(&rev, leases_->get(), StandbyKey(k).c_str(), options_.worker_id.c_str());
    standby_.emplace(k, std::move(part));
    if (s != NATS_OK) {
      CloseStandby(k, /*stale=*/true);
      return FromNats(s, "registering the standby of partition " + std::to_string(k));
    }
    return Status::OK();
  }

  // Stops keeping partition k warm: its consumer and registration go; the
  // copy stays on disk, marked stale unless it becomes the owner's store.
  void CloseStandby(int k, bool stale) {
    auto it = standby_.find(k);
    if (it == standby_.end()) return;
    DropFeed(&it->second);
    standby_.erase(it);
    jsErrCode err = jsErrCode{};
    (void)js_DeleteConsumer(conn_->js(), cluster_.stream.c_str(), StandbyDurable(k).c_str(),
                            nullptr, &err);
    (void)kvStore_Delete(leases_->get(), StandbyKey(k).c_str());
    std::error_code ec;
    fs::remove(StandbyPath(k), ec);
    if (stale) MarkStale(k);
  }

  // DIR/p<k>.seq: "<intake> <stored>\n", the last intake sequence folded
  // into the store, and the store's last_seq (StoreStats) once it was
  // stored. Files written before `stored` was recorded hold "<intake>\n"
  // (stored: 0, nothing to compare).
  struct SeqFile {
    uint64_t intake = 0;
    uint64_t stored = 0;
  };

  // The store's .seq; {0, 0} (fold the partition from the start of the
  // stream, which the store's dedup makes harmless, only slower) when the
  // file is absent or does not hold exactly one or two decimal numbers: a
  // torn write cannot make such a file (WriteSeq renames), so that is
  // damage, and guessing past it could skip messages.
  SeqFile ReadSeq(int k) const {
    std::ifstream in(SeqPath(k));
    std::string text;
    std::getline(in, text);
    const char* const last = text.data() + text.size();
    SeqFile f;
    std::from_chars_result r = std::from_chars(text.data(), last, f.intake);
    if (r.ec == std::errc() && r.ptr != last && *r.ptr == ' ') {
      r = std::from_chars(r.ptr + 1, last, f.stored);
    }
    if (r.ec != std::errc() || r.ptr != last) return SeqFile{};
    return f;
  }

  // Replaces DIR/p<k>.seq; a torn write leaves the old file (rename). Not
  // synced (it is rewritten after every batch): what a power cut can leave
  // is an older .seq, from which the partition is folded again and the
  // store's dedup takes nothing twice, never one ahead of the store, whose
  // batch was synced before.
  Status WriteSeq(int k, const SeqFile& f) const {
    return cluster::ReplaceFile(SeqPath(k),
                                std::to_string(f.intake) + " " + std::to_string(f.stored) + "\n",
                                /*sync=*/false);
  }

  // Opens partition k's store DIR/p<k> into `part` and (re)creates the
  // durable pull consumer `durable` to start right after the store's .seq,
  // or at the start of the stream when there is no store. `before_consumer`,
  // when given, runs between the two and can stop the set-up.
  Status OpenFed(int k, const std::string& durable, Partition* part,
                 const std::function<Status()>& before_consumer = nullptr) {
    // No store: replay the whole subject (a .seq without its store is void).
    const SeqFile seq = HasStore(k) ? ReadSeq(k) : SeqFile{};
    part->folded_seq = seq.intake;
    Options so;
    so.create_if_missing = true;
    so.profile = profile_;
    // A worker may fold every partition: together they remember as many
    // recent bodies as one store's default.
    so.recent_events = Options().recent_events / std::max(1, layout_.partitions);
    Result<std::unique_ptr<Store>> store = Store::Open(StoreDir(k), so);
    if (!store.ok()) {
      Status st = store.status().WithContext("partition " + std::to_string(k));
      if (!st.IsCorruption()) return st;
      return Status::Corruption(
          st.message() + "; stop the worker and run `eventfold repair --data " + StoreDir(k) + "`");
    }
    part->store = std::move(*store);
    const uint64_t holds = part->store->Stats().last_seq;
    if (seq.stored > holds) {
      // Writes the store acknowledged are gone (a damaged disk: a cut log,
      // a lost table), and the .seq would resume past them: the partition
      // is folded again from the start of the stream, whose copies the
      // store's dedup takes only where it lost them. Recorded first, so
      // that a restart during that fold does not resume past them either.
      part->folded_seq = 0;
      if (Status st = WriteSeq(k, SeqFile{0, holds}); !st.ok()) return st;
      Fail(Status::Corruption(
          "partition " + std::to_string(k) + ": the store at " + StoreDir(k) +
          " holds arrivals up to seq " + std::to_string(holds) + " but had stored up to seq " +
          std::to_string(seq.stored) + " when it folded intake sequence " +
          std::to_string(seq.intake) +
          ": acknowledged writes were lost (a damaged disk?); folding the partition again from "
          "the start of the stream"));
    }
    if (before_consumer) {
      if (Status st = before_consumer(); !st.ok()) return st;
    }

    part->durable = durable;
    return Subscribe(k, part);
  }

  // (Re)creates partition k's consumer part->durable to start right after
  // part->folded_seq (at the start of the stream when 0) and pulls from it.
  Status Subscribe(int k, Partition* part) {
    const std::string& durable = part->durable;
    const std::string subject = PartitionSubject(cluster_.stream, k);
    part->delivered_seq = part->folded_seq;
    part->owed_seen = 0;
    jsErrCode err = jsErrCode{};
    (void)js_DeleteConsumer(conn_->js(), cluster_.stream.c_str(), durable.c_str(), nullptr, &err);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable.c_str();
    cc.FilterSubject = subject.c_str();
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = int64_t{30} * 1000000000;  // ns; a batch's fold and sync fit easily
    cc.MaxAckPending = std::max(options_.fetch_batch * 4, 1024);
    if (part->folded_seq > 0) {
      cc.DeliverPolicy = js_DeliverByStartSequence;
      cc.OptStartSeq = part->folded_seq + 1;
    } else {
      cc.DeliverPolicy = js_DeliverAll;
    }
    jsConsumerInfo* ci = nullptr;
    err = jsErrCode{};
    natsStatus s = js_AddConsumer(&ci, conn_->js(), cluster_.stream.c_str(), &cc, nullptr, &err);
    jsConsumerInfo_Destroy(ci);
    if (s != NATS_OK) return FromNats(s, "creating consumer " + durable, err);
    jsSubOptions sub_opts;
    jsSubOptions_Init(&sub_opts);
    sub_opts.Stream = cluster_.stream.c_str();
    sub_opts.Consumer = durable.c_str();
    err = jsErrCode{};
    s = js_PullSubscribe(&part->sub, conn_->js(), subject.c_str(), durable.c_str(), nullptr,
                         &sub_opts, &err);
    if (s != NATS_OK) return FromNats(s, "subscribing to " + subject, err);
    return Status::OK();
  }

  // Rewrites partition k's "acquiring:<id>" lease at `*lease_rev`
  // (revision-checked) so that it does not expire while a slow set-up
  // (consumer deletions and creation, each up to the request timeout) is
  // still going on; kBusy, with *lost set, when it is no longer ours.
  Status RenewAcquiring(int k, uint64_t* lease_rev, bool* lost) {
    const std::string acquiring = std::string(cluster::kAcquiringPrefix) + options_.worker_id;
    Result<uint64_t> renewed =
        cluster::KvUpdate(conn_->js(), leases_->get(), cluster::LeaseKey(k), acquiring, *lease_rev);
    if (!renewed.ok()) {
      *lost = renewed.status().code() == Status::Code::kBusy;
      return renewed.status().WithContext("renewing the lease of partition " + std::to_string(k) +
                                          " while taking it");
    }
    *lease_rev = *renewed;
    return Status::OK();
  }

  // Sets partition k up as ours; `*lease_rev` is the revision of our
  // "acquiring" lease, updated as it is renewed on the way. *lease_lost
  // says whether a failure is that lease lost (kBusy from the store, which
  // another process holds, is not).
  Status Acquire(int k, uint64_t* lease_rev, bool* lease_lost) {
    Partition part;
    DeleteOtherOwnerConsumers(k);
    if (Status st = RenewAcquiring(k, lease_rev, lease_lost); !st.ok()) return st;
    Status st =
        OpenFed(k, Durable(k), &part, [&] { return RenewAcquiring(k, lease_rev, lease_lost); });
    if (!st.ok()) return st;
    part.lease_rev = *lease_rev;
    std::error_code ec;
    fs::remove(StalePath(k), ec);  // ours again: it catches up from its .seq
    fs::remove(StandbyPath(k), ec);
    for (const PartitionSubscription& ps : options_.subscriptions) {
      SubscriptionOptions o = ps.options;
      if (o.clock == nullptr) o.clock = clock_;
      auto handler = ps.handler;
      Result<std::unique_ptr<Subscription>> sub = Subscription::Start(
          part.store.get(), std::move(o), [handler, k](const Change& c) { return handler(k, c); });
      if (!sub.ok()) {
        natsSubscription_Destroy(part.sub);
        return sub.status().WithContext("partition " + std::to_string(k) + ": subscription " +
                                        ps.options.name);
      }
      part.subs.push_back(std::move(*sub));
    }
    parts_.emplace(k, std::move(part));
    return Status::OK();
  }

  // Stops folding partition k (its store stays on disk, behind: it is
  // resumed from its .seq if this worker owns k again).
  void Close(int k) {
    auto it = parts_.find(k);
    if (it == parts_.end()) return;
    DropFeed(&it->second);
    parts_.erase(it);
    // Our consumer goes with the partition (taking k again starts a new one
    // from DIR/p<k>.seq); when JetStream does not answer, the next owner
    // deletes it.
    jsErrCode err = jsErrCode{};
    (void)js_DeleteConsumer(conn_->js(), cluster_.stream.c_str(), Durable(k).c_str(), nullptr,
                            &err);
    NoteBacklog();
  }

  // Close, then give the lease back so another worker takes it at once;
  // only while it still is ours (the revision we last wrote): a lease that
  // expired and was taken by another worker stays theirs.
  void Release(int k) {
    auto it = parts_.find(k);
    if (it == parts_.end()) return;
    const uint64_t rev = it->second.lease_rev;
    Close(k);
    // Not given back (a lease that moved on, JetStream not answering), it
    // expires by itself within the TTL.
    (void)cluster::KvDeleteAt(conn_->js(), leases_->get(), cluster::LeaseKey(k), rev);
  }

  // Folds `batch` into partition k's store with one IngestBatch; when it
  // is stored, the .seq becomes `through` (if that is further). False on a
  // storage failure (nothing folded for certain).
  bool Fold(int k, Partition* part, const std::vector<Delivery>& batch, uint64_t through,
            bool owned) {
    if (batch.empty()) return true;
    std::vector<IngestResult> results = part->store->IngestBatch(batch);
    const auto refused = std::find_if(results.begin(), results.end(), [](const IngestResult& r) {
      return r.outcome == Outcome::kStorageError || r.outcome == Outcome::kOverloaded;
    });
    if (refused != results.end()) {
      Fail(Status::Unavailable("partition " + std::to_string(k) + ": the store at " + StoreDir(k) +
                               " refused a batch (" + refused->message +
                               "); JetStream redelivers it"));
      return false;
    }
    if (through > part->folded_seq) {
      if (Status st = WriteSeq(k, SeqFile{through, part->store->Stats().last_seq}); !st.ok()) {
        Fail(st.WithContext("partition " + std::to_string(k) +
                            ": the batch is stored, but its .seq is behind (a restart folds "
                            "from there again, which the store takes as duplicates)"));
      }
      part->folded_seq = through;
    }
    if (owned) folded_.fetch_add(batch.size());
    return true;
  }

  // Reads from the stream leader the messages on partition k's subject
  // after the .seq and before sequence `until`, which the consumer skipped,
  // and folds them (in stream order, at most a fetch batch per
  // IngestBatch). With `limit` > 0 it stops after that many. False when
  // the stream leader did not answer or the store failed; what was folded
  // stays folded.
  bool FoldSkipped(int k, Partition* part, uint64_t until, size_t limit, bool owned) {
    const std::string subject = PartitionSubject(cluster_.stream, k);
    std::vector<Delivery> batch;
    uint64_t batch_bytes = 0;  // its bodies
    uint64_t through = part->folded_seq, first = 0, count = 0;
    bool ok = true;
    while (true) {
      Result<uint64_t> next = cluster::NextSeqOnSubject(conn_->nc(), cluster_.stream, subject,
                                                        through + 1, conn_->timeout_ms());
      if (!next.ok()) {
        Fail(next.status());
        ok = false;
        break;
      }
      if (*next == 0 || *next >= until || (limit > 0 && count >= limit) || stop_.load()) break;
      natsMsg* m = nullptr;
      jsErrCode err = jsErrCode{};
      const natsStatus s =
          js_GetMsg(&m, conn_->js(), cluster_.stream.c_str(), *next, nullptr, &err);
      if (s != NATS_OK) {
        Status st = FromNats(s, "reading message " + std::to_string(*next), err);
        if (st.code() != Status::Code::kNotFound) {
          Fail(st);
          ok = false;
          break;
        }
        // Removed (its age) since the answer above: nothing to fold.
      } else {
        batch.push_back(DeliveryOf(m));
        batch_bytes += batch.back().body.size();
        natsMsg_Destroy(m);
        if (first == 0) first = *next;
        ++count;
      }
      through = *next;
      if (batch.size() >= static_cast<size_t>(options_.fetch_batch) ||
          batch_bytes >= static_cast<uint64_t>(fetch_max_bytes_)) {
        if (!Fold(k, part, batch, through, owned)) return false;
        batch.clear();
        batch_bytes = 0;
      }
    }
    if (!batch.empty() && !Fold(k, part, batch, through, owned)) return false;
    if (count > 0) {
      Note("partition " + std::to_string(k) + ": the consumer skipped " + std::to_string(count) +
           " message(s) from sequence " + std::to_string(first) +
           " that the stream holds; folded them from the stream leader");
    }
    return ok;
  }

  // When the consumer had nothing: at most once per lease period, asks the
  // stream leader for the first message on the subject after the .seq. A
  // message seen for the first time may just have been published: the
  // consumer gets a period to deliver it. One it already named at the
  // previous check and the consumer has still not delivered was skipped or
  // is held back: up to a batch of the tail is folded from the stream
  // leader and the consumer is recreated after the new .seq. So a stuck
  // consumer costs one replacement per two periods, never a stream of
  // naks or redeliveries.
  bool TailCheck(int k, Partition* part, bool owned) {
    const int64_t now = clock_->NowMicros();
    if (now < part->next_tail_check) return ConfirmEnd(k, part, owned, now);
    part->next_tail_check = now + renew_ms_ * 1000;
    const uint64_t seen = std::exchange(part->tail_seen, 0);
    if (seen > part->delivered_seq) {
      // The consumer has not delivered for a whole period what the stream
      // leader named: it is stuck (its leader's copy of the stream behind)
      // or skipped it. Fold the tail from the stream leader and replace
      // the consumer, whose new leader may well be a current replica.
      if (!FoldSkipped(k, part, ~uint64_t{0}, static_cast<size_t>(options_.fetch_batch), owned)) {
        return false;
      }
      return Resubscribe(k, part);
    }
    Result<uint64_t> next = FirstUnfolded(k, *part);
    if (!next.ok()) return false;
    part->tail_seen = *next;
    if (*next != 0) return true;
    RecordEnd(k, part, owned);
    return OwedAcks(k, part);
  }

  // At the end of the subject, with no message in hand (TailCheck): a
  // consumer still waiting for an acknowledgement waits for one of a
  // delivery the worker never received. nats-server 2.9 can lose a
  // redelivery (after a nak) that it takes off its queue for a pull request
  // that has just expired: the message stays unacknowledged and is not sent
  // again, while the worker has folded it from the stream leader as one the
  // consumer skipped. `cluster status` counts it as lag for as long as the
  // consumer lives. So when the same oldest unacknowledged message is still
  // waiting at the next such check, a lease period later, the consumer is
  // replaced to start after the .seq, which is past every message it owes.
  bool OwedAcks(int k, Partition* part) {
    jsConsumerInfo* ci = nullptr;
    jsErrCode err = jsErrCode{};
    const natsStatus s = js_GetConsumerInfo(&ci, conn_->js(), cluster_.stream.c_str(),
                                            part->durable.c_str(), nullptr, &err);
    if (s != NATS_OK) {
      Fail(FromNats(s, "reading consumer " + part->durable, err));
      return false;
    }
    const uint64_t waiting = ci->NumAckPending > 0 ? ci->AckFloor.Stream + 1 : 0;
    jsConsumerInfo_Destroy(ci);
    const uint64_t seen = std::exchange(part->owed_seen, waiting);
    if (waiting == 0 || waiting != seen) return true;
    return Resubscribe(k, part);
  }

  // Replaces partition k's consumer with one that starts after the .seq.
  bool Resubscribe(int k, Partition* part) {
    natsSubscription_Destroy(part->sub);
    part->sub = nullptr;
    if (Status st = Subscribe(k, part); !st.ok()) {
      Fail(st);
      return false;
    }
    return true;
  }

  // Between TailChecks: an owner whose store has folded past the end it
  // last recorded asks the stream leader at once (at most every 100 ms)
  // whether the subject holds more, and records the new end when it does
  // not. `cluster status` reports lag 0 only up to that record, so waiting
  // for the next TailCheck would keep a settled partition at lag 1 for up
  // to a lease period. A message found here is left to TailCheck.
  bool ConfirmEnd(int k, Partition* part, bool owned, int64_t now) {
    if (!owned || AtKnownEnd(*part)) return true;
    if (now < part->next_end_check) return true;
    part->next_end_check = now + 100 * 1000;
    Result<uint64_t> next = FirstUnfolded(k, *part);
    if (!next.ok()) return false;
    if (*next == 0) RecordEnd(k, part, owned);
    return true;
  }

  // The stream leader last said nothing follows what the store has folded.
  static bool AtKnownEnd(const Partition& part) {
    return part.at_end && part.end_seq == part.folded_seq;
  }

  // The first stream sequence on partition k's subject after the .seq, as
  // the stream leader answers (0: none); a failure is also Fail()ed.
  Result<uint64_t> FirstUnfolded(int k, const Partition& part) {
    Result<uint64_t> next = cluster::NextSeqOnSubject(conn_->nc(), cluster_.stream,
                                                      PartitionSubject(cluster_.stream, k),
                                                      part.folded_seq + 1, conn_->timeout_ms());
    if (!next.ok()) Fail(next.status());
    return next;
  }

  // The stream leader holds nothing on partition k's subject after the
  // .seq: an owner records it in "f.<k>" now (the lease round rewrites it).
  void RecordEnd(int k, Partition* part, bool owned) {
    const bool moved = !AtKnownEnd(*part);
    part->at_end = true;
    part->end_seq = part->folded_seq;
    if (owned && moved) WriteFoldedEnd(k, *part);
  }

  // Writes "f.<k>" = "<id> <end_seq>": how far this store has folded for
  // certain. `cluster status` trusts a consumer's "nothing pending" only up
  // to here.
  void WriteFoldedEnd(int k, const Partition& part) {
    const std::string folded = options_.worker_id + " " + std::to_string(part.end_seq);
    uint64_t rev = 0;
    const natsStatus s =
        kvStore_PutString(&rev, leases_->get(), cluster::FoldedKey(k).c_str(), folded.c_str());
    if (s != NATS_OK) Fail(FromNats(s, "recording partition " + std::to_string(k)));
  }

  // natsSubscription_Fetch bounded in bytes as well: up to fetch_batch
  // messages or fetch_max_bytes_, whichever comes first. Like that call, it
  // first asks for what is there without waiting, and waits up to
  // `wait_ms` only when nothing is. NATS_TIMEOUT when nothing came.
  natsStatus Fetch(natsSubscription* sub, int64_t wait_ms, natsMsgList* list) {
    auto request = [&](bool no_wait) {
      jsFetchRequest req;
      jsFetchRequest_Init(&req);
      req.Batch = options_.fetch_batch;
      req.MaxBytes = fetch_max_bytes_;
      req.Expires = wait_ms * 1000 * 1000;  // ns
      req.NoWait = no_wait;
      return natsSubscription_FetchRequest(list, sub, &req);
    };
    if (options_.fetch_batch > 1) {
      const natsStatus s = request(/*no_wait=*/true);
      if (s != NATS_NOT_FOUND) return s;  // NOT_FOUND: nothing there now
    }
    return request(/*no_wait=*/false);
  }

  // Fetches one batch of partition k (or takes the one held from a previous
  // try), folds it with what the consumer skipped before and within it
  // (see Gaps above), and acknowledges it after that; on a storage failure
  // nothing is acked and JetStream redelivers. False on a failure.
  bool FoldSome(int k, Partition* part, bool owned) {
    if (part->sub == nullptr) {
      // Its replacement failed (TailCheck): try again.
      if (Status st = Subscribe(k, part); !st.ok()) {
        Fail(st);
        return false;
      }
    }
    natsMsgList list = part->held;
    part->held = natsMsgList{};
    if (list.Count == 0) {
      const int64_t wait = std::max<int64_t>(
          options_.fetch_wait_ms / static_cast<int64_t>(parts_.size() + standby_.size()), 10);
      natsStatus s = Fetch(part->sub, wait, &list);
      if (s == NATS_TIMEOUT) return TailCheck(k, part, owned);  // nothing new
      if (s != NATS_OK) {
        Fail(FromNats(s, "fetching partition " + std::to_string(k)));
        return false;
      }
    }
    // In stream order: redeliveries can come before newer messages.
    struct Fetched {
      uint64_t stream_seq = 0;
      uint64_t delivery_seq = 0;  // the consumer's
      bool redelivered = false;
      natsMsg* msg = nullptr;
    };
    std::vector<Fetched> fetched;
    for (int i = 0; i < list.Count; ++i) {
      Fetched f;
      f.msg = list.Msgs[i];
      jsMsgMetaData* meta = nullptr;
      if (natsMsg_GetMetaData(&meta, f.msg) == NATS_OK) {
        f.stream_seq = meta->Sequence.Stream;
        f.delivery_seq = meta->Sequence.Consumer;
        f.redelivered = meta->NumDelivered > 1;
      }
      jsMsgMetaData_Destroy(meta);
      part->delivered_seq = std::max(part->delivered_seq, f.stream_seq);
      fetched.push_back(f);
    }
    std::stable_sort(fetched.begin(), fetched.end(), [](const Fetched& a, const Fetched& b) {
      return a.stream_seq < b.stream_seq;
    });
    // Messages at or before the .seq are folded already (redelivered after
    // a lost acknowledgement): duplicates, folded again for their acks.
    std::vector<Delivery> batch;
    size_t i = 0;
    for (; i < fetched.size() && fetched[i].stream_seq <= part->folded_seq; ++i) {
      batch.push_back(DeliveryOf(fetched[i].msg));
    }
    const Fetched* prev = nullptr;
    for (; i < fetched.size(); ++i) {
      const Fetched& f = fetched[i];
      // A gap can hide before the batch and wherever the consumer's
      // deliveries are not one run of first deliveries: ask there.
      const bool ask = prev == nullptr || f.redelivered || prev->redelivered ||
                       f.delivery_seq != prev->delivery_seq + 1;
      if (ask) {
        const uint64_t through = prev != nullptr ? prev->stream_seq : part->folded_seq;
        if (!Fold(k, part, batch, through, owned)) break;
        batch.clear();
        if (!FoldSkipped(k, part, f.stream_seq, 0, owned)) {
          // The stream leader did not answer: keep the batch (unacked)
          // and ask again on the next round rather than fold past a gap.
          part->held = list;
          return false;
        }
      }
      batch.push_back(DeliveryOf(f.msg));
      prev = &f;
    }
    bool stored = i == fetched.size();
    if (stored) {
      stored = Fold(k, part, batch, prev != nullptr ? prev->stream_seq : part->folded_seq, owned);
    }
    for (int j = 0; j < list.Count; ++j) {
      if (stored) {
        (void)natsMsg_Ack(list.Msgs[j], nullptr);
      } else {
        (void)natsMsg_Nak(list.Msgs[j], nullptr);
      }
    }
    natsMsgList_Destroy(&list);
    return stored;
  }

  const ClusterOptions cluster_;
  FoldWorkerOptions options_;
  const ClusterLayout layout_;
  const Profile profile_;
  std::unique_ptr<NatsConnection> conn_;
  std::unique_ptr<KvBucket> leases_;
  Clock* clock_;
  const int64_t renew_ms_;
  const int64_t fetch_max_bytes_;  // options_.fetch_max_bytes, raised as above

  const int standbys_;
  std::map<int, Partition> parts_;    // owned; the worker thread's (and Stop's after the join)
  std::map<int, Partition> standby_;  // kept warm; likewise
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> folded_{0};
  std::atomic<uint64_t> backlog_{0};
  std::atomic<bool> failing_{false};  // Failing()
  std::atomic<bool> halted_{false};   // Halted(); set by the worker thread
  std::string announcement_;          // this process's value of w.<id>
  uint64_t worker_rev_ = 0;           // w.<id>'s revision this worker last wrote
  mutable Mutex mu_;
  std::condition_variable cv_;  // Stop, for Pause
  bool stopped_ GUARDED_BY(mu_) = false;
  std::vector<int> owned_ GUARDED_BY(mu_);
  std::vector<int> standing_by_ GUARDED_BY(mu_);
  std::string last_error_ GUARDED_BY(mu_);
  cluster::ReportLog reports_;  // TakeReports()
  std::thread thread_;
};

// What a worker needs from the cluster before it starts.
struct WorkerSetup {
  ClusterLayout layout;
  Profile profile;
  std::unique_ptr<NatsConnection> conn;
  std::unique_ptr<KvBucket> leases;
  int64_t renew_ms = 0;
};

// Reads the layout and profile, connects and opens the lease bucket.
Result<WorkerSetup> ConnectWorker(const ClusterOptions& cluster, const FoldWorkerOptions& options) {
  Result<ClusterLayout> layout = ReadClusterLayout(cluster);
  if (!layout.ok()) return layout.status();
  Result<Profile> profile = Profile::FromJson(layout->profile_json);
  if (!profile.ok()) return profile.status().WithContext("the cluster's recorded profile");
  Result<std::unique_ptr<NatsConnection>> conn =
      NatsConnection::Open(cluster.urls, cluster.timeout_ms);
  if (!conn.ok()) return conn.status();
  const std::string bucket = cluster.stream + "_leases";
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, (*conn)->js(), bucket.c_str());
  if (s != NATS_OK) return FromNats(s, "opening bucket " + bucket);
  auto leases = std::make_unique<KvBucket>(kv);

  int64_t renew_ms = options.renew_every_ms;
  if (renew_ms <= 0) {
    // A third of the TTL: two renewals may fail before the lease is lost.
    jsStreamInfo* si = nullptr;
    const std::string kv_stream = "KV_" + bucket;
    jsErrCode err = jsErrCode{};
    s = js_GetStreamInfo(&si, (*conn)->js(), kv_stream.c_str(), nullptr, &err);
    // Not a guess when it does not answer: a period longer than the TTL
    // would lose every lease.
    if (s != NATS_OK) return FromNats(s, "reading stream " + kv_stream, err);
    const int64_t ttl_ms = si->Config->MaxAge > 0 ? si->Config->MaxAge / 1000000 : 10000;
    jsStreamInfo_Destroy(si);
    renew_ms = std::max<int64_t>(ttl_ms / 3, 100);
  }
  return WorkerSetup{std::move(*layout), std::move(*profile), std::move(*conn), std::move(leases),
                     renew_ms};
}

// `dir` and those of its parents that do not exist yet, innermost first:
// what create_directories(dir) is about to make.
std::vector<std::string> MissingDirs(const std::string& dir) {
  std::vector<std::string> missing;
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "DIR/" as "DIR"
  std::error_code ec;
  // symlink_status: a dangling link is there, not this call's to remove.
  while (!p.empty() && p != p.root_path() &&
         fs::symlink_status(p, ec).type() == fs::file_type::not_found) {
    missing.push_back(p.string());
    p = p.parent_path();
  }
  return missing;
}

// Removes the directories a failed Start made (MissingDirs, innermost
// first), as long as they are empty. rmdir(2) removes only an empty
// directory, so nothing written meanwhile, and no directory that was there
// before, is ever removed. Dismissed once the worker runs.
class MadeDirs {
 public:
  explicit MadeDirs(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}
  ~MadeDirs() {
    for (const std::string& d : dirs_) {
      if (::rmdir(d.c_str()) != 0) return;  // not empty (or gone): its parents are kept
    }
  }
  void Keep() { dirs_.clear(); }

 private:
  std::vector<std::string> dirs_;
};

}  // namespace

Result<std::unique_ptr<FoldWorker>> FoldWorker::Start(const ClusterOptions& cluster,
                                                      const FoldWorkerOptions& options) {
  if (options.data_dir.empty()) return Status::InvalidArgument("--data: a directory is needed");
  if (options.fetch_batch < 1) return Status::InvalidArgument("fetch batch: must be positive");
  if (options.fetch_max_bytes < 1) {
    return Status::InvalidArgument("fetch max bytes: must be positive");
  }
  // The id names JetStream consumers and lease keys.
  for (char c : options.worker_id) {
    if (!cluster::IsNameChar(c)) {
      return Status::InvalidArgument("--worker-id: \"" + options.worker_id +
                                     "\" may hold only letters, digits, '-' and '_'");
    }
  }
  if (options.worker_id.size() > 64) {
    return Status::InvalidArgument("--worker-id: at most 64 characters");
  }
  for (const PartitionSubscription& ps : options.subscriptions) {
    if (ps.options.name.empty() || !ps.handler) {
      return Status::InvalidArgument("subscriptions: each needs a name and a handler");
    }
  }
  // A start that fails (no such stream, no cluster) leaves no empty
  // directory behind for the operator to wonder about.
  MadeDirs made(MissingDirs(options.data_dir));
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) return Status::IOError("--data " + options.data_dir + ": " + ec.message());
  // JetStream may not answer for a moment (a node restarting, a leader
  // election): every step below is a read, so trying again is safe.
  Clock* clock = options.clock != nullptr ? options.clock : SystemClock();
  const int64_t until = clock->NowMicros() + options.start_timeout_ms * 1000;
  Result<WorkerSetup> setup = Status::Unavailable("not tried");
  while (true) {
    setup = ConnectWorker(cluster, options);
    if (setup.ok() || setup.status().code() != Status::Code::kUnavailable) break;
    const int64_t now = clock->NowMicros();
    if (now >= until) break;
    clock->SleepUntil(std::min(until, now + 250 * 1000));
  }
  if (!setup.ok()) return setup.status();
  auto worker = std::make_unique<FoldWorkerImpl>(cluster, options, std::move(setup->layout),
                                                 std::move(setup->profile), std::move(setup->conn),
                                                 std::move(setup->leases), setup->renew_ms);
  if (Status st = worker->ClaimId(); !st.ok()) {
    worker->Abandon();
    return st;
  }
  if (Status st = worker->StartRunning(); !st.ok()) return st;
  made.Keep();
  return std::unique_ptr<FoldWorker>(std::move(worker));
}

}  // namespace eventfold
