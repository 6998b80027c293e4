// Cluster mode: eventfold on a NATS JetStream cluster (docs/CLUSTER.md).
//
// JetStream holds the replicated, partitioned log; eventfold implements no
// consensus or replication of its own. A cluster named `stream` consists of:
//   - the intake stream `<stream>`, subjects `<stream>.p.<k>` for the
//     partitions k = 0..P-1 (file storage, R replicas, age-limited retention
//     long enough to rebuild a partition store by replay);
//   - the refused stream `<stream>_refused` (subject `<stream>.refused`),
//     bounded in messages and bytes, oldest dropped first;
//   - the lease bucket `<stream>_leases` (KV with a TTL) that assigns
//     partitions to fold workers;
//   - the layout bucket `<stream>_layout` (KV, no TTL) recording P, R and the
//     profile, written once with create-if-absent so every receiver and
//     worker routes and folds with the same ones.
//
// This header and its functions live in the separate `eventfold_cluster`
// library (link eventfold::cluster); the plain library does not need NATS.
//
// Thread-safety: the free functions share no state, and those that only
// ask the cluster (InitCluster, ReadClusterStatus, ...) open and close a
// connection of their own. A sink (OpenClusterSink) and a FoldWorker each
// keep one connection for their lifetime, used from their threads; see
// each for which of its methods may be called concurrently.
// Failures: kInvalidArgument for a bad URL list or stream name, kUnavailable
// when NATS or JetStream cannot be reached or does not answer, kNotFound
// when the cluster is not initialized, kIOError for a local directory.

#ifndef EVENTFOLD_CLUSTER_H_
#define EVENTFOLD_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/clock.h"
#include "eventfold/ingest_sink.h"
#include "eventfold/profile.h"
#include "eventfold/quarantine.h"
#include "eventfold/status.h"
#include "eventfold/subscription.h"

namespace eventfold {

// How to reach a cluster.
struct ClusterOptions {
  // NATS server URLs ("nats://127.0.0.1:4222"); any reachable one will do.
  std::vector<std::string> urls;

  // Name of the intake stream and prefix of everything else the cluster
  // owns; letters, digits, '_' and '-' only.
  std::string stream = "eventfold";

  // Deadline for connecting and for each JetStream request, milliseconds.
  int64_t timeout_ms = 5000;
};

// What `eventfold cluster init` creates.
struct ClusterInitOptions {
  // Number of partitions P; fixed for the life of the cluster.
  int partitions = 8;

  // JetStream replicas R of every stream and bucket (1, 3 or 5 in practice).
  int replicas = 3;

  // Intake retention: a partition store can be rebuilt by replay from events
  // at most this old. Default: 35 days.
  int64_t retention_seconds = 35 * 24 * 3600;

  // Bounds of the refused stream; past them the oldest refusals go.
  int64_t refused_max_messages = 100000;
  int64_t refused_max_bytes = 256 << 20;

  // Lease time-to-live (the lease bucket's TTL): a worker that stops renewing
  // loses its partitions after this long.
  int64_t lease_ttl_ms = 10000;

  // A cluster that has just started answers requests before every node has
  // joined JetStream's meta group; until then placing R replicas fails
  // ("no suitable peers for placement") or the system is "temporarily
  // unavailable". Init retries such kUnavailable answers every 250 ms for
  // at most this long before it reports one. Milliseconds; 0: no retry.
  int64_t settle_timeout_ms = 30000;

  // Source of time for those retries; nullptr: SystemClock().
  Clock* clock = nullptr;
};

// A cluster's recorded layout.
struct ClusterLayout {
  int partitions = 0;
  int replicas = 0;
  std::string profile_name;
  std::string profile_fingerprint;  // Profile::Fingerprint()
  std::string profile_json;         // Profile::ToJson(): what receivers and workers use
  bool created = false;             // InitCluster created the layout just now
};

// Splits a comma-separated URL list ("--cluster" options); fails naming the
// option and the bad entry when one is not a nats:// URL.
Result<std::vector<std::string>> ParseClusterUrls(std::string_view list);

// OK when `stream` can name a cluster (ClusterOptions::stream: 1 to 64
// letters, digits, '_' and '-'); kInvalidArgument saying what is wrong
// otherwise. The functions here check it themselves; a tool checks it too
// so that a bad name is refused before anything connects.
Status CheckStreamName(const std::string& stream);

// The bounds InitCluster holds ClusterInitOptions to, for a tool to check
// its arguments against before connecting.
inline constexpr int kMaxClusterPartitions = 4096;
inline constexpr int kMaxClusterReplicas = 5;  // JetStream's limit
inline constexpr int64_t kMinLeaseTtlMs = 1000;

// Creates the streams and buckets idempotently and records `options`'s P and
// R and `profile`. On an existing cluster, succeeds when P and the profile's
// fingerprint match what is recorded (created = false) and fails with
// kInvalidArgument naming both values otherwise: changing P or the profile
// would move entities between partitions, which needs a re-partition by
// replay that eventfold does not do. kUnavailable when JetStream cannot be
// reached within the timeout, or still cannot place a stream or bucket (no
// quorum, too few peers) after options.settle_timeout_ms.
Result<ClusterLayout> InitCluster(const ClusterOptions& cluster, const ClusterInitOptions& options,
                                  const Profile& profile);

// Reads the recorded layout; kNotFound when the cluster was never
// initialized, kUnavailable when JetStream cannot be reached.
Result<ClusterLayout> ReadClusterLayout(const ClusterOptions& cluster);

// What a receiver's cluster sink does.
struct ClusterSinkOptions {
  // How long to wait for JetStream's publish acknowledgement before the
  // delivery is answered 503 (the sender retries). Milliseconds.
  int64_t publish_timeout_ms = 2000;

  // Source of received_at; nullptr: SystemClock().
  Clock* clock = nullptr;
};

// A sink for Receiver::Make(IngestSink*, ...) that decodes and validates as
// a Store does (400 for the same bodies, refusals to the refused stream),
// routes each delivery to its partition (eventfold/partitioner.h) under the
// cluster's recorded profile and publishes it verbatim; its Ingest answers
// kAccepted only after JetStream acknowledged the publish, kStorageError
// (503) otherwise. Duplicates and conflicts are decided later, by the
// partition's fold worker: the sender sees 200 for both (docs/CLUSTER.md).
// Fails when the cluster is unreachable (kUnavailable) or not initialized
// (kNotFound). The sink is safe to use from any number of threads.
Result<std::unique_ptr<IngestSink>> OpenClusterSink(const ClusterOptions& cluster,
                                                    const ClusterSinkOptions& options);

// A subscription (eventfold/subscription.h) that a fold worker runs on the
// store of each partition it owns. Each partition store has its own change
// feed (its own seq numbers) and keeps this subscription's checkpoint and
// dead letters; docs/CLUSTER.md says what a handler sees across a failover
// (at least once; a new owner without a store re-delivers the partition's
// changes from the start of its replay).
struct PartitionSubscription {
  // As for Subscription::Start; `options.clock` nullptr: the worker's clock.
  SubscriptionOptions options;

  // Handles one change of partition `partition`'s store. Runs on the
  // subscription's threads, never twice at once for one entity; must be
  // thread-safe and idempotent.
  std::function<Status(int partition, const Change& change)> handler;
};

// What a fold worker does (`eventfold fold`).
struct FoldWorkerOptions {
  // Directory of the partition stores: DIR/p<k> is partition k's Store,
  // DIR/p<k>.seq the last intake stream sequence folded into it.
  std::string data_dir;

  // This worker's name in the lease bucket; letters, digits, '-', '_'.
  // Empty: "<hostname>-<pid>".
  std::string worker_id;

  // Messages fetched (and ingested with one IngestBatch, one sync) at once.
  int fetch_batch = 256;

  // Bytes fetched at once, at most: a fetch ends at fetch_batch messages or
  // at this many bytes, whichever comes first, so a batch of large bodies
  // is not fetch_batch times the largest message (256 MiB at the servers'
  // default max_payload of 1 MiB), held by the worker and written as one
  // LevelDB write. Raised to twice the servers' max_payload when below it:
  // JetStream refuses a fetch whose first message is larger than its
  // max_bytes.
  int64_t fetch_max_bytes = 8 << 20;

  // Longest wait of one fetch when a partition has nothing new, ms.
  int64_t fetch_wait_ms = 200;

  // Lease renewal period, ms; 0: a third of the cluster's lease TTL.
  int64_t renew_every_ms = 0;

  // How long Start keeps trying, 250 ms apart, while JetStream does not
  // answer (a node restarting or paused, a leader election), ms; 0: fail
  // at the first timeout.
  int64_t start_timeout_ms = 30000;

  // Source of time for lease scheduling, Start's retries and the worker's
  // pauses (nothing owned; JetStream unreachable); nullptr: SystemClock().
  Clock* clock = nullptr;

  // Warm copies wanted per partition (Kafka Streams' standby replicas):
  // each worker keeps up to its share of partitions it does not own folded
  // in DIR/p<k> from a consumer of its own, so that taking one over folds
  // only what the copy had not. Effective: min(standbys, live workers - 1),
  // so 1 by default once there are 2 workers; 0: none. Every worker of a
  // cluster should use the same value.
  int standbys = 1;

  // Started on each partition store when the worker takes the partition
  // (before it folds anything into it) and stopped, checkpoints saved,
  // before the store closes (lease lost or given back, Stop()). Default:
  // none.
  std::vector<PartitionSubscription> subscriptions;
};

// A fold worker: owns partitions by lease in the lease bucket (create if
// absent, renewed with a revision check; an unrenewed lease expires with
// the bucket's TTL and another worker takes the partition), keeps one
// embedded Store per owned partition and feeds it from a durable pull
// consumer on the partition's subject: each fetched batch goes through one
// IngestBatch and is acknowledged to JetStream only after it. A worker that
// takes a partition resumes from its own DIR/p<k>.seq, or replays the
// partition's subject from the start when it has no store for it; the
// store's exact dedup makes any redelivery harmless. Workers share the
// partitions evenly: each takes at most ceil(P / live workers).
// Subscriptions given in the options run on each owned partition store,
// from when the worker takes the partition until it loses or gives it back.
//
// Thread-safety: Owned() and Stop() may be called from any thread.
class FoldWorker {
 public:
  // Reads the cluster's layout and starts the worker's thread. Fails when
  // the cluster is unreachable (kUnavailable, after retrying for
  // start_timeout_ms) or not initialized (kNotFound), data_dir is unusable
  // (kIOError), the system refuses the thread (kUnavailable), or a running
  // worker holds options.worker_id (kBusy; a key left by a killed worker
  // is waited out, for at most the lease TTL). A failed start removes the
  // directories it made for data_dir while they are still empty.
  static Result<std::unique_ptr<FoldWorker>> Start(const ClusterOptions& cluster,
                                                   const FoldWorkerOptions& options);

  // Stops (as Stop()) and releases the stores.
  virtual ~FoldWorker() = default;

  // The partitions this worker owns now, ascending.
  virtual std::vector<int> Owned() const = 0;

  // The partitions this worker keeps warm copies of now (standby), ascending.
  virtual std::vector<int> Standbys() const = 0;

  // Messages folded and acknowledged since Start().
  virtual uint64_t Folded() const = 0;

  // Stops fetching, closes the partition stores and deletes this worker's
  // leases so others take over at once. Idempotent.
  virtual void Stop() = 0;

  // The worker's last error (empty when none): fetch, store or lease
  // trouble it keeps retrying, or a problem it worked around (messages a
  // consumer skipped, a store that lost writes and is folded again), or a
  // note of a lease it lost (without a status code). Kept after the
  // trouble is over: Failing() says whether it is.
  virtual std::string LastError() const = 0;

  // Whether the worker's last round failed: a store refused a batch (a full
  // disk), JetStream did not answer a fetch, a read or the lease round.
  // False again after a round without a failure (with nothing owned, after
  // a lease round that JetStream answered). A lease that expired or that
  // another worker holds now is no failure: the partition is given up at
  // once, and nothing is retried.
  virtual bool Failing() const = 0;

  // Whether the worker stopped itself: another process announced itself
  // under its worker id (two processes given one --worker-id would take
  // each other's leases and consumers for their own). It then owns and
  // keeps warm nothing, leaves what the id names to that process, and
  // LastError() says so; Stop() only waits for its thread. Start() refuses
  // an id a running worker holds (kBusy).
  virtual bool Halted() const = 0;

  // What the worker has reported since the last call, oldest first, for a
  // log (`eventfold fold` prints them): each failure when it is new, or
  // when it comes back after a round without a failure (a failure that
  // goes on is reported once); each note (a problem worked around, a lease
  // lost); and "folding again: the last round had no failure" after a
  // failing round. Every one, where LastError() keeps only the latest. At
  // most 100 wait between two calls; past that the oldest are dropped, and
  // the first returned says how many.
  virtual std::vector<std::string> TakeReports() = 0;

  // Changes of the owned partition stores that the subscriptions have not
  // finished yet (feed's last seq minus checkpoint, summed over owned
  // partitions and subscriptions), as of the worker's last fold round; 0
  // without subscriptions.
  virtual uint64_t SubscriptionBacklog() const = 0;
};

// One partition in ReadClusterStatus().
struct PartitionStatus {
  int partition = 0;
  std::string owner;                  // the lease holder's worker id; empty: none
  std::vector<std::string> standbys;  // worker ids keeping warm copies, sorted
  uint64_t messages = 0;              // messages in the partition's subject
  uint64_t acked = 0;                 // messages - lag
  // Not yet folded and acknowledged by the owner or by a standby: the
  // largest of their backlogs (messages when there is no owner yet). At
  // least 1 while the owner has not recorded that its store folded the
  // subject to the end the stream leader holds (docs/CLUSTER.md).
  uint64_t lag = 0;
};

struct ClusterStatus {
  ClusterLayout layout;
  std::vector<PartitionStatus> partitions;  // by partition
  std::vector<std::string> workers;         // live worker ids
  uint64_t refused = 0;                     // messages in the refused stream
};

// Reads leases, standby registrations, the intake stream's per-subject
// counts and each partition's consumers (the owner's and each standby's). A
// partition without an owner, or whose owner's consumer does not exist yet,
// has acked 0 and lag = messages. kUnavailable when JetStream
// cannot be reached, kNotFound when the cluster was never initialized.
Result<ClusterStatus> ReadClusterStatus(const ClusterOptions& cluster);

// Calls `fn` for each delivery in the cluster's refused stream (what
// receivers refused with 400, 401 or 413), oldest first, until it returns
// false; each RefusedDelivery's seq is its sequence in that stream. The
// stream is bounded: the oldest are dropped first. kUnavailable when
// JetStream cannot be reached, kNotFound when the cluster was never
// initialized, kInvalidArgument naming the message when one is unreadable.
Status ListClusterRefused(const ClusterOptions& cluster,
                          const std::function<bool(const RefusedDelivery&)>& fn);

// Subject of partition `k`: "<stream>.p.<k>".
std::string PartitionSubject(std::string_view stream, int k);

}  // namespace eventfold

#endif  // EVENTFOLD_CLUSTER_H_
