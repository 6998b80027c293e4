// InitCluster and ReadClusterLayout: the streams and buckets of a cluster
// (include/eventfold/cluster.h) and its recorded layout.

#include <algorithm>
#include <charconv>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/consumer_names.h"
#include "cluster/nats_connection.h"
#include "eventfold/cluster.h"

namespace eventfold {
namespace {

using cluster::FromNats;
using cluster::KvBucket;
using cluster::NatsConnection;

constexpr const char* kLayoutKey = "layout";
constexpr const char* kProfileKey = "profile";

std::string LayoutBucket(const std::string& stream) { return stream + "_layout"; }
std::string LeaseBucket(const std::string& stream) { return stream + "_leases"; }
std::string RefusedStream(const std::string& stream) { return stream + "_refused"; }

// The layout record: one "name=value" per line, written once.
std::string EncodeLayout(const ClusterLayout& l) {
  return "partitions=" + std::to_string(l.partitions) + "\nreplicas=" + std::to_string(l.replicas) +
         "\nprofile_name=" + l.profile_name + "\nprofile_fingerprint=" + l.profile_fingerprint +
         "\n";
}

Result<int> ParseInt(std::string_view name, std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::Corruption("cluster layout: " + std::string(name) + ": \"" + std::string(text) +
                              "\" is not a number");
  }
  return v;
}

Result<ClusterLayout> DecodeLayout(std::string_view text) {
  ClusterLayout l;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "partitions" || name == "replicas") {
      Result<int> n = ParseInt(name, value);
      if (!n.ok()) return n.status();
      (name == "partitions" ? l.partitions : l.replicas) = *n;
    } else if (name == "profile_name") {
      l.profile_name = value;
    } else if (name == "profile_fingerprint") {
      l.profile_fingerprint = value;
    }
  }
  if (l.partitions < 1 || l.profile_fingerprint.empty()) {
    return Status::Corruption("cluster layout: partitions or profile_fingerprint missing");
  }
  return l;
}

// Opens bucket `name`, creating it with `cfg` when absent.
Result<std::unique_ptr<KvBucket>> OpenOrCreateBucket(NatsConnection* c, kvConfig* cfg) {
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, c->js(), cfg->Bucket);
  // Any failure to open: try to create; if JetStream is down, that fails
  // too, with the reason.
  if (s != NATS_OK) s = js_CreateKeyValue(&kv, c->js(), cfg);
  if (s != NATS_OK) return FromNats(s, std::string("opening bucket ") + cfg->Bucket);
  return std::make_unique<KvBucket>(kv);
}

// Adds stream `cfg` unless one of that name exists (whose configuration is
// then left as it is: the recorded layout, not the stream, is authoritative).
Status EnsureStream(NatsConnection* c, jsStreamConfig* cfg) {
  jsStreamInfo* si = nullptr;
  jsErrCode err = jsErrCode{};
  natsStatus s = js_GetStreamInfo(&si, c->js(), cfg->Name, nullptr, &err);
  jsStreamInfo_Destroy(si);
  si = nullptr;
  if (s == NATS_OK) return Status::OK();
  if (s != NATS_NOT_FOUND && err != JSStreamNotFoundErr) {
    return FromNats(s, std::string("looking up stream ") + cfg->Name, err);
  }
  err = jsErrCode{};
  s = js_AddStream(&si, c->js(), cfg, nullptr, &err);
  jsStreamInfo_Destroy(si);
  // Another init may have created it between the two calls.
  if (s != NATS_OK && err == JSStreamNameExistErr) return Status::OK();
  return FromNats(s, std::string("creating stream ") + cfg->Name, err);
}

// Runs `step` until it succeeds, fails with anything but kUnavailable, or
// `settle_timeout_ms` has passed on the clock, waiting 250 ms between tries.
// A node still joining makes placement fail for a moment; a step here is
// idempotent (create-if-absent), so trying again is safe.
Status RetryWhileSettling(const ClusterInitOptions& options, const std::function<Status()>& step) {
  Clock* clock = options.clock != nullptr ? options.clock : SystemClock();
  const int64_t until = clock->NowMicros() + options.settle_timeout_ms * 1000;
  while (true) {
    Status st = step();
    if (st.ok() || st.code() != Status::Code::kUnavailable) return st;
    const int64_t now = clock->NowMicros();
    if (now >= until) {
      // JetStream's words name no cause: say the usual one.
      if (st.message().find("no suitable peers") == std::string::npos) return st;
      return Status::Unavailable(st.message() + " (" + std::to_string(options.replicas) +
                                 " replicas cannot be placed: fewer JetStream nodes than "
                                 "--replicas are up, or they had not all joined within the settle "
                                 "timeout)");
    }
    clock->SleepUntil(std::min(until, now + 250 * 1000));
  }
}

Status CheckInitOptions(const ClusterInitOptions& o) {
  if (o.partitions < 1 || o.partitions > kMaxClusterPartitions) {
    return Status::InvalidArgument("partitions: " + std::to_string(o.partitions) +
                                   " is outside 1.." + std::to_string(kMaxClusterPartitions));
  }
  if (o.replicas < 1 || o.replicas > kMaxClusterReplicas) {
    return Status::InvalidArgument("replicas: " + std::to_string(o.replicas) + " is outside 1.." +
                                   std::to_string(kMaxClusterReplicas) + " (JetStream's limit)");
  }
  if (o.retention_seconds < 1) return Status::InvalidArgument("retention: must be positive");
  if (o.refused_max_messages < 1 || o.refused_max_bytes < 1) {
    return Status::InvalidArgument("refused bounds: must be positive");
  }
  if (o.lease_ttl_ms < kMinLeaseTtlMs) {
    return Status::InvalidArgument("lease TTL: at least " + std::to_string(kMinLeaseTtlMs) + " ms");
  }
  if (o.settle_timeout_ms < 0)
    return Status::InvalidArgument("settle timeout: must not be negative");
  return Status::OK();
}

// Records `profile` and then the layout, each create-if-absent, so that
// concurrent inits agree on one; returns what is recorded.
Result<ClusterLayout> RecordLayout(kvStore* kv, const ClusterInitOptions& options,
                                   const Profile& profile) {
  ClusterLayout wanted;
  wanted.partitions = options.partitions;
  wanted.replicas = options.replicas;
  wanted.profile_name = profile.name();
  wanted.profile_fingerprint = profile.Fingerprint();
  wanted.profile_json = profile.ToJson();

  Result<uint64_t> p = cluster::KvCreate(kv, kProfileKey, wanted.profile_json);
  if (!p.ok() && p.status().code() != Status::Code::kBusy) return p.status();
  Result<uint64_t> l = cluster::KvCreate(kv, kLayoutKey, EncodeLayout(wanted));
  if (l.ok()) {
    wanted.created = true;
    return wanted;
  }
  if (l.status().code() != Status::Code::kBusy) return l.status();
  Result<cluster::KvValue> existing = cluster::KvGet(kv, kLayoutKey);
  if (!existing.ok()) return existing.status();
  Result<ClusterLayout> have = DecodeLayout(existing->value);
  if (!have.ok()) return have.status();
  if (have->partitions != wanted.partitions) {
    return Status::InvalidArgument(
        "partitions: the cluster has " + std::to_string(have->partitions) + ", not " +
        std::to_string(wanted.partitions) +
        "; changing P would move entities between partitions (re-partitioning by replay is not "
        "implemented): keep " +
        std::to_string(have->partitions) + " or initialize a new cluster under another stream");
  }
  if (have->profile_fingerprint != wanted.profile_fingerprint) {
    return Status::InvalidArgument(
        "profile: the cluster folds with profile \"" + have->profile_name + "\" (fingerprint " +
        have->profile_fingerprint + "), not \"" + wanted.profile_name + "\" (" +
        wanted.profile_fingerprint + "); a running cluster's profile cannot change");
  }
  have->profile_json = wanted.profile_json;
  return have;
}

}  // namespace

std::string PartitionSubject(std::string_view stream, int k) {
  return std::string(stream) + ".p." + std::to_string(k);
}

Status CheckStreamName(const std::string& stream) {
  if (stream.empty() || stream.size() > 64) {
    return Status::InvalidArgument("stream: must be 1 to 64 characters");
  }
  for (char c : stream) {
    if (!cluster::IsNameChar(c)) {
      return Status::InvalidArgument("stream: \"" + stream +
                                     "\" may hold only letters, digits, '_' and '-'");
    }
  }
  return Status::OK();
}

Result<std::vector<std::string>> ParseClusterUrls(std::string_view list) {
  std::vector<std::string> urls;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view url = list.substr(0, comma);
    if (url.rfind("nats://", 0) != 0 || url.size() <= 7) {
      return Status::InvalidArgument("--cluster: \"" + std::string(url) +
                                     "\" is not a nats://host:port URL");
    }
    urls.emplace_back(url);
    if (comma == std::string_view::npos) break;
    list = list.substr(comma + 1);
  }
  return urls;
}

Result<ClusterLayout> InitCluster(const ClusterOptions& cluster, const ClusterInitOptions& options,
                                  const Profile& profile) {
  if (Status st = CheckStreamName(cluster.stream); !st.ok()) return st;
  if (Status st = CheckInitOptions(options); !st.ok()) return st;
  Result<std::unique_ptr<NatsConnection>> c =
      NatsConnection::Open(cluster.urls, cluster.timeout_ms);
  if (!c.ok()) return c.status();

  // The layout first: a second init with another P or profile is refused
  // before it creates anything.
  const std::string layout_bucket = LayoutBucket(cluster.stream);
  kvConfig layout_cfg;
  kvConfig_Init(&layout_cfg);
  layout_cfg.Bucket = layout_bucket.c_str();
  layout_cfg.History = 1;
  layout_cfg.Replicas = options.replicas;
  layout_cfg.StorageType = js_FileStorage;
  Result<std::unique_ptr<KvBucket>> layout_kv = Status::Unavailable("not tried");
  if (Status st = RetryWhileSettling(options,
                                     [&] {
                                       layout_kv = OpenOrCreateBucket(c->get(), &layout_cfg);
                                       return layout_kv.status();
                                     });
      !st.ok()) {
    return st;
  }
  Result<ClusterLayout> layout = Status::Unavailable("not tried");
  if (Status st = RetryWhileSettling(options,
                                     [&] {
                                       layout = RecordLayout((*layout_kv)->get(), options, profile);
                                       return layout.status();
                                     });
      !st.ok()) {
    return st;
  }

  // Intake: every partition's subject, kept for the retention period.
  const std::string intake_subject = cluster.stream + ".p.*";
  const char* intake_subjects[] = {intake_subject.c_str()};
  jsStreamConfig intake;
  jsStreamConfig_Init(&intake);
  intake.Name = cluster.stream.c_str();
  intake.Subjects = intake_subjects;
  intake.SubjectsLen = 1;
  intake.Storage = js_FileStorage;
  intake.Replicas = layout->replicas;
  intake.Retention = js_LimitsPolicy;
  intake.Discard = js_DiscardOld;
  intake.MaxAge = options.retention_seconds * 1000000000LL;  // nanoseconds
  if (Status st = RetryWhileSettling(options, [&] { return EnsureStream(c->get(), &intake); });
      !st.ok()) {
    return st;
  }

  // Refused deliveries: bounded, oldest dropped first.
  const std::string refused_name = RefusedStream(cluster.stream);
  const std::string refused_subject = cluster.stream + ".refused";
  const char* refused_subjects[] = {refused_subject.c_str()};
  jsStreamConfig refused;
  jsStreamConfig_Init(&refused);
  refused.Name = refused_name.c_str();
  refused.Subjects = refused_subjects;
  refused.SubjectsLen = 1;
  refused.Storage = js_FileStorage;
  refused.Replicas = layout->replicas;
  refused.Discard = js_DiscardOld;
  refused.MaxMsgs = options.refused_max_messages;
  refused.MaxBytes = options.refused_max_bytes;
  if (Status st = RetryWhileSettling(options, [&] { return EnsureStream(c->get(), &refused); });
      !st.ok()) {
    return st;
  }

  // Leases: one key per partition; the bucket's TTL ends an unrenewed one.
  const std::string lease_bucket = LeaseBucket(cluster.stream);
  kvConfig lease_cfg;
  kvConfig_Init(&lease_cfg);
  lease_cfg.Bucket = lease_bucket.c_str();
  lease_cfg.History = 1;
  lease_cfg.TTL = options.lease_ttl_ms * 1000000;  // nats.c: nanoseconds (the stream MaxAge)
  lease_cfg.Replicas = layout->replicas;
  lease_cfg.StorageType = js_FileStorage;
  if (Status st = RetryWhileSettling(
          options, [&] { return OpenOrCreateBucket(c->get(), &lease_cfg).status(); });
      !st.ok()) {
    return st;
  }
  return layout;
}

Result<ClusterLayout> ReadClusterLayout(const ClusterOptions& cluster) {
  if (Status st = CheckStreamName(cluster.stream); !st.ok()) return st;
  Result<std::unique_ptr<NatsConnection>> c =
      NatsConnection::Open(cluster.urls, cluster.timeout_ms);
  if (!c.ok()) return c.status();
  kvStore* raw = nullptr;
  const std::string bucket = LayoutBucket(cluster.stream);
  natsStatus s = js_KeyValue(&raw, (*c)->js(), bucket.c_str());
  if (s == NATS_NOT_FOUND) {
    return Status::NotFound("cluster " + cluster.stream +
                            ": not initialized (run `eventfold cluster init`)");
  }
  if (s != NATS_OK) return FromNats(s, "opening bucket " + bucket);
  KvBucket kv(raw);
  Result<cluster::KvValue> layout_text = cluster::KvGet(kv.get(), kLayoutKey);
  if (!layout_text.ok()) return layout_text.status();
  Result<ClusterLayout> layout = DecodeLayout(layout_text->value);
  if (!layout.ok()) return layout.status();
  Result<cluster::KvValue> profile = cluster::KvGet(kv.get(), kProfileKey);
  if (!profile.ok()) return profile.status();
  layout->profile_json = std::move(profile->value);
  return layout;
}

}  // namespace eventfold
