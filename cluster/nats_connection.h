// NatsConnection: one nats.c connection and its JetStream context, owned.
//
// The only place nats.c errors become eventfold Statuses (FromNats): network
// trouble, timeouts and "no responders"/no quorum are kUnavailable, so a
// receiver can answer 503; a missing stream, bucket or key is kNotFound.
//
// Thread-safety: nats.c connections and contexts are thread-safe; the
// wrapper adds no state of its own after Open().

#ifndef EVENTFOLD_CLUSTER_NATS_CONNECTION_H_
#define EVENTFOLD_CLUSTER_NATS_CONNECTION_H_

#include <nats/nats.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/status.h"

namespace eventfold::cluster {

// `what` names the operation ("creating stream eventfold"); `js_error` is
// JetStream's own error code when the call reported one.
Status FromNats(natsStatus s, std::string_view what, jsErrCode js_error = jsErrCode{});

class NatsConnection {
 public:
  // Connects to any of `urls`, failing after `timeout_ms`. JetStream
  // requests made through js() wait at most `timeout_ms` too.
  static Result<std::unique_ptr<NatsConnection>> Open(const std::vector<std::string>& urls,
                                                      int64_t timeout_ms);
  ~NatsConnection();
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;

  natsConnection* nc() const { return nc_; }
  jsCtx* js() const { return js_; }
  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  NatsConnection() = default;

  natsOptions* opts_ = nullptr;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  int64_t timeout_ms_ = 0;
};

// A KV bucket handle, owned.
class KvBucket {
 public:
  explicit KvBucket(kvStore* kv) : kv_(kv) {}
  ~KvBucket() { kvStore_Destroy(kv_); }
  KvBucket(const KvBucket&) = delete;
  KvBucket& operator=(const KvBucket&) = delete;
  kvStore* get() const { return kv_; }

 private:
  kvStore* kv_;
};

// One KV entry's value and revision.
struct KvValue {
  std::string value;
  uint64_t revision = 0;
};

// Reads `key`; kNotFound when absent or deleted.
Result<KvValue> KvGet(kvStore* kv, const std::string& key);

// KvGet() as the bucket's stream leader has the key. kvStore_Get asks any
// replica (the buckets allow direct gets), and a replica may not have
// applied the writes the leader just refused an update for: a look that
// must explain a refusal, or decide who holds a key, asks the leader.
// kNotFound when the key has no entry or its last is a delete or a purge.
Result<KvValue> KvGetFromLeader(jsCtx* js, kvStore* kv, const std::string& key);

// Every key in `kv` (deleted and purged ones left out), in key order,
// gathered within `timeout_ms` (kUnavailable past it). Read with direct
// gets, one a stored entry, which any replica of the bucket's stream
// answers: kvStore_Keys creates an ephemeral consumer that nats-server
// 2.9 (Debian 12's) places on a random replica, a dead one too, so with one
// of three nodes down a third of the listings timed out, for as long as the
// node stayed down. A replica may be a little behind the leader: a key
// written just now can be missing from the list.
Result<std::vector<std::string>> KvKeys(jsCtx* js, kvStore* kv, int64_t timeout_ms);

// Creates `key` only if absent: its revision, or kBusy ("exists") when
// another writer created it first.
Result<uint64_t> KvCreate(kvStore* kv, const std::string& key, std::string_view value);

// Rewrites `key` only while it is still at revision `last`: its new
// revision, or kBusy naming what happened to it ("... expired or was
// deleted", "... was rewritten: now <value> at revision <r>") when it is
// not; kUnavailable when JetStream does not answer. What happened to it is
// read from the bucket's stream leader through `js` (a replica may not yet
// have the writes that made the leader refuse the update).
//
// A key that already holds `value` at a revision after `last` counts as
// rewritten, and that revision is returned: an update that timed out on
// the client may still have been applied, and the next one, revision-checked
// against `last`, is refused ("wrong last sequence") although the key says
// what the caller wanted. So `value` must be one only this caller writes
// (a worker's own lease entry, which names it): a value another writer may
// also write would be taken for the caller's. A key the leader shows at a
// revision before `last` is kUnavailable: a newly elected leader that has
// not applied its log yet answers from behind.
Result<uint64_t> KvUpdate(jsCtx* js, kvStore* kv, const std::string& key, std::string_view value,
                          uint64_t last);

// Deletes `key` only while it is still at revision `last` (the one the
// caller last wrote): OK; kBusy when it has moved on (another writer's
// now, or already gone), and then it is left as it is; kUnavailable when
// JetStream does not answer. A look and then kvStore_Delete could delete
// what another writer put there in between, or what a replica behind the
// leader did not show.
[[nodiscard]] Status KvDeleteAt(jsCtx* js, kvStore* kv, const std::string& key, uint64_t last);

// The sequence of the first message on `subject` at or after sequence
// `from` in `stream`, as the stream's leader holds it; 0 when there is none.
// Asked with a JetStream message-get request ("next_by_subj"), which only
// the stream leader answers (a direct get could be answered by a lagging
// replica), waiting at most `timeout_ms`. kUnavailable when no leader
// answers.
Result<uint64_t> NextSeqOnSubject(natsConnection* nc, const std::string& stream,
                                  const std::string& subject, uint64_t from, int64_t timeout_ms);

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_NATS_CONNECTION_H_
