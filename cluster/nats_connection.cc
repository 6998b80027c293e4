#include "cluster/nats_connection.h"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/json_writer.h"

namespace eventfold::cluster {

Status FromNats(natsStatus s, std::string_view what, jsErrCode js_error) {
  if (s == NATS_OK) return Status::OK();
  // nats_GetLastError holds the detailed text of the calling thread's last
  // failure (JetStream's error description included).
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  std::string msg = std::string(what) + ": " + natsStatus_GetText(s);
  if (detail != nullptr && *detail != '\0' && last == s) msg += " (" + std::string(detail) + ")";
  if (js_error != 0) msg += " [JetStream error " + std::to_string(js_error) + "]";
  switch (s) {
    case NATS_NOT_FOUND:
      return Status::NotFound(msg);
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
      return Status::InvalidArgument(msg);
    default:
      break;
  }
  if (js_error == JSStreamNotFoundErr || js_error == JSConsumerNotFoundErr ||
      js_error == JSNoMessageFoundErr) {
    return Status::NotFound(msg);
  }
  // Everything else is the cluster not answering as it should (no server,
  // timeout, no quorum, no responders): retryable, a 503 for a receiver.
  return Status::Unavailable(msg);
}

Result<std::unique_ptr<NatsConnection>> NatsConnection::Open(const std::vector<std::string>& urls,
                                                             int64_t timeout_ms) {
  if (urls.empty()) return Status::InvalidArgument("cluster: no NATS URL given");
  std::unique_ptr<NatsConnection> c(new NatsConnection());
  c->timeout_ms_ = timeout_ms;
  std::vector<const char*> servers;
  for (const std::string& u : urls) servers.push_back(u.c_str());
  natsStatus s = natsOptions_Create(&c->opts_);
  if (s == NATS_OK) {
    s = natsOptions_SetServers(c->opts_, servers.data(), static_cast<int>(servers.size()));
  }
  if (s == NATS_OK) s = natsOptions_SetTimeout(c->opts_, timeout_ms);
  // Once connected, keep reconnecting to any node for as long as the process
  // lives: a node restart must not end a receiver or worker.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(c->opts_, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(c->opts_, 250);
  // A node that stops answering without closing its sockets (paused, cut
  // off) is noticed by missed pings: two unanswered pings one second apart
  // drop the connection and the client reconnects to another node, instead
  // of the library's default of two minutes of timeouts.
  if (s == NATS_OK) s = natsOptions_SetPingInterval(c->opts_, 1000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(c->opts_, 2);
  if (s == NATS_OK) s = natsConnection_Connect(&c->nc_, c->opts_);
  if (s != NATS_OK) return FromNats(s, "connecting to " + urls.front());
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = timeout_ms;
  s = natsConnection_JetStream(&c->js_, c->nc_, &jo);
  if (s != NATS_OK) return FromNats(s, "opening JetStream");
  return c;
}

NatsConnection::~NatsConnection() {
  jsCtx_Destroy(js_);
  natsConnection_Destroy(nc_);
  natsOptions_Destroy(opts_);
}

Result<KvValue> KvGet(kvStore* kv, const std::string& key) {
  kvEntry* e = nullptr;
  const natsStatus s = kvStore_Get(&e, kv, key.c_str());
  if (s != NATS_OK) return FromNats(s, "reading key " + key);
  KvValue v;
  v.value.assign(static_cast<const char*>(kvEntry_Value(e)), kvEntry_ValueLen(e));
  v.revision = kvEntry_Revision(e);
  kvEntry_Destroy(e);
  return v;
}

Result<uint64_t> KvCreate(kvStore* kv, const std::string& key, std::string_view value) {
  uint64_t rev = 0;
  const natsStatus s =
      kvStore_Create(&rev, kv, key.c_str(), value.data(), static_cast<int>(value.size()));
  if (s == NATS_OK) return rev;
  const Status failed = FromNats(s, "creating key " + key);
  // kvStore_Create reports "exists" as a generic JetStream error; tell it
  // apart by looking.
  if (KvGet(kv, key).ok()) return Status::Busy("key " + key + " exists");
  return failed;
}

namespace {

// How a JetStream key-value bucket is stored (the nats.c and server
// convention): stream KV_<bucket>, a key's entries on subject
// $KV.<bucket>.<key>, a delete or purge marked by this header.
constexpr char kKvOperationHeader[] = "KV-Operation";
std::string KvStream(kvStore* kv) { return std::string("KV_") + kvStore_Bucket(kv); }
std::string KvSubject(kvStore* kv, const std::string& key) {
  return std::string("$KV.") + kvStore_Bucket(kv) + "." + key;
}
// Whether `m`, a key's entry, is the marker of a delete or a purge.
bool IsKvRemoval(natsMsg* m) {
  const char* op = nullptr;
  return natsMsgHeader_Get(m, kKvOperationHeader, &op) == NATS_OK && op != nullptr;
}

}  // namespace

Result<std::vector<std::string>> KvKeys(jsCtx* js, kvStore* kv, int64_t timeout_ms) {
  const std::string stream = KvStream(kv);
  const std::string prefix = KvSubject(kv, "");
  const std::string filter = prefix + ">";
  const int64_t deadline = nats_Now() + std::max<int64_t>(timeout_ms, 1);
  // key -> whether its latest entry is a removal: the walk goes up the
  // sequence, so a key rewritten during it is met again, and the later
  // entry replaces the earlier.
  std::map<std::string, bool> removed;
  // A request a replica that just died was to answer is lost (the servers
  // route direct gets to any replica until they see it gone): each waits a
  // quarter of the time, and one unanswered is asked again while time is
  // left.
  const int64_t wait = std::max<int64_t>(timeout_ms / 4, 100);
  for (uint64_t seq = 1;;) {
    jsOptions o;
    jsOptions_Init(&o);
    jsDirectGetMsgOptions d;
    jsDirectGetMsgOptions_Init(&d);
    d.Sequence = seq;
    d.NextBySubject = filter.c_str();
    natsMsg* m = nullptr;
    natsStatus s = NATS_TIMEOUT;
    for (int64_t left = deadline - nats_Now(); left > 0; left = deadline - nats_Now()) {
      o.Wait = std::min(left, wait);
      s = js_DirectGetMsg(&m, js, stream.c_str(), &o, &d);
      if (s != NATS_TIMEOUT && s != NATS_NO_RESPONDERS) break;
    }
    if (s == NATS_NOT_FOUND) break;  // no entry at or after `seq`: the end
    if (s != NATS_OK)
      return FromNats(s, "listing the keys of bucket " + std::string(kvStore_Bucket(kv)));
    const uint64_t at = natsMsg_GetSequence(m);
    const std::string_view subject = natsMsg_GetSubject(m) ? natsMsg_GetSubject(m) : "";
    if (subject.starts_with(prefix)) {
      removed[std::string(subject.substr(prefix.size()))] = IsKvRemoval(m);
    }
    natsMsg_Destroy(m);
    if (at < seq) return Status::Unavailable("listing keys: stream " + stream + " went backwards");
    seq = at + 1;
  }
  std::vector<std::string> keys;
  for (const auto& [key, gone] : removed) {
    if (!gone) keys.push_back(key);
  }
  return keys;
}

Result<uint64_t> KvUpdate(jsCtx* js, kvStore* kv, const std::string& key, std::string_view value,
                          uint64_t last) {
  uint64_t rev = 0;
  const natsStatus s =
      kvStore_Update(&rev, kv, key.c_str(), value.data(), static_cast<int>(value.size()), last);
  if (s == NATS_OK) return rev;
  const Status failed = FromNats(s, "rewriting key " + key);
  // A revision that moved on comes back as a generic JetStream error ("wrong
  // last sequence: <r>"); tell it apart by looking.
  Result<KvValue> now = KvGetFromLeader(js, kv, key);
  const std::string since = "key " + key + " at revision " + std::to_string(last);
  if (!now.ok() && now.status().code() == Status::Code::kNotFound) {
    return Status::Busy(since + " expired or was deleted");
  }
  if (now.ok() && now->revision > last && now->value == value) {
    // An earlier update of the caller's (this one, or one before it that
    // timed out on the client) was applied after all: the key holds what
    // this update writes, written after `last`. The update has happened.
    return now->revision;
  }
  if (now.ok() && now->revision < last) {
    // The key as the leader shows it is older than a write the caller was
    // answered for: a leader just elected answers before it has applied
    // the entries in its log (nats-server before 2.11), so it shows an
    // earlier revision for a while and refuses updates against the later
    // one. That says nothing about the key: not answered, asked again.
    return Status::Unavailable(since + ": the stream leader shows it at revision " +
                               std::to_string(now->revision) +
                               ", before that one (a leader that has not applied its log yet)");
  }
  if (now.ok() && now->revision != last) {
    return Status::Busy(since + " was rewritten: now \"" + now->value + "\" at revision " +
                        std::to_string(now->revision));
  }
  return failed;
}

Status KvDeleteAt(jsCtx* js, kvStore* kv, const std::string& key, uint64_t last) {
  // Revision 0 would publish without the check (nats.c leaves the header
  // out), deleting whatever the key holds.
  if (last == 0) return Status::InvalidArgument("deleting key " + key + ": no revision to check");
  // What kvStore_Delete publishes (a "KV-Operation: DEL" marker on the
  // key's subject), with the revision check kvStore_Update makes.
  natsMsg* m = nullptr;
  natsStatus s = natsMsg_Create(&m, KvSubject(kv, key).c_str(), nullptr, nullptr, 0);
  if (s == NATS_OK) s = natsMsgHeader_Set(m, kKvOperationHeader, "DEL");
  jsPubOptions o;
  jsPubOptions_Init(&o);
  o.ExpectLastSubjectSeq = last;
  jsPubAck* ack = nullptr;
  jsErrCode err = jsErrCode{};
  if (s == NATS_OK) s = js_PublishMsg(&ack, js, m, &o, &err);
  jsPubAck_Destroy(ack);
  natsMsg_Destroy(m);
  if (s == NATS_OK) return Status::OK();
  if (err == JSStreamWrongLastSequenceErr) {
    return Status::Busy("key " + key + " is no longer at revision " + std::to_string(last));
  }
  return FromNats(s, "deleting key " + key, err);
}

Result<uint64_t> NextSeqOnSubject(natsConnection* nc, const std::string& stream,
                                  const std::string& subject, uint64_t from, int64_t timeout_ms) {
  const std::string api = "$JS.API.STREAM.MSG.GET." + stream;
  const std::string what = "asking the leader of stream " + stream + " for " + subject;
  std::string request = "{\"seq\":" + std::to_string(from) + ",\"next_by_subj\":";
  AppendJsonString(subject, &request);
  request += "}";
  natsMsg* reply = nullptr;
  const natsStatus s = natsConnection_Request(&reply, nc, api.c_str(), request.data(),
                                              static_cast<int>(request.size()), timeout_ms);
  if (s != NATS_OK) return FromNats(s, what);
  simdjson::padded_string padded(natsMsg_GetData(reply),
                                 static_cast<size_t>(natsMsg_GetDataLength(reply)));
  natsMsg_Destroy(reply);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) {
    return Status::Unavailable(what + ": the answer is not JSON");
  }
  int64_t err_code = 0;
  if (doc["error"]["err_code"].get_int64().get(err_code) == simdjson::SUCCESS) {
    // 10037: no message found, i.e. none at or after `from` on the subject.
    if (err_code == JSNoMessageFoundErr) return uint64_t{0};
    return Status::Unavailable(what + ": JetStream error " + std::to_string(err_code));
  }
  uint64_t seq = 0;
  if (doc["message"]["seq"].get_uint64().get(seq) != simdjson::SUCCESS) {
    return Status::Unavailable(what + ": the answer has no message sequence");
  }
  return seq;
}

Result<KvValue> KvGetFromLeader(jsCtx* js, kvStore* kv, const std::string& key) {
  natsMsg* m = nullptr;
  jsErrCode err = jsErrCode{};
  const natsStatus s =
      js_GetLastMsg(&m, js, KvStream(kv).c_str(), KvSubject(kv, key).c_str(), nullptr, &err);
  if (s != NATS_OK) return FromNats(s, "reading key " + key + " from the stream leader", err);
  const bool removed = IsKvRemoval(m);
  KvValue v;
  v.value.assign(natsMsg_GetData(m), static_cast<size_t>(natsMsg_GetDataLength(m)));
  v.revision = natsMsg_GetSequence(m);
  natsMsg_Destroy(m);
  if (removed) return Status::NotFound("key " + key + " was deleted");
  return v;
}

}  // namespace eventfold::cluster
