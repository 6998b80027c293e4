// eventfold cluster init --cluster URLS [--partitions P] [--replicas R]
//                        [--profile F] [--stream S] ...
//   creates a cluster's streams and buckets (docs/CLUSTER.md), idempotently,
//   and prints its recorded layout as one JSON object.
// eventfold cluster status --cluster URLS [--stream S]
//   prints partitions, owners, messages, acked and lag as one JSON object.

#include <iostream>
#include <limits>
#include <optional>

#include "core/json_writer.h"
#include "eventfold/cluster.h"
#include "tools/cli_common.h"
#include "tools/cluster_flags.h"

namespace eventfold::cli {
namespace {

struct InitArgs {
  std::string urls, stream = "eventfold", profile_file;
  ClusterInitOptions options;
  int64_t retention_days = 35;
  int64_t timeout_ms = 5000;
};

int Init(const InitArgs& a) {
  std::optional<ClusterOptions> cluster = ClusterFromFlags(a.urls, a.stream);
  if (!cluster) return kExitError;
  cluster->timeout_ms = a.timeout_ms;
  Profile profile = Profile::ReceiptRoller();
  if (!a.profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(a.profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return kExitError;
    }
    profile = std::move(*p);
  }
  ClusterInitOptions options = a.options;
  options.retention_seconds = a.retention_days * 24 * 3600;
  Result<ClusterLayout> layout = InitCluster(*cluster, options, profile);
  if (!layout.ok()) {
    std::cerr << "eventfold: cluster init: " << layout.status().message() << "\n";
    // A refused change of P or profile is the caller's input refused;
    // anything else (unreachable, no quorum) is an error.
    return layout.status().code() == Status::Code::kInvalidArgument ? kExitRefused : kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("stream")
      .String(cluster->stream)
      .Key("created")
      .Bool(layout->created)
      .Key("partitions")
      .Int(layout->partitions)
      .Key("replicas")
      .Int(layout->replicas)
      .Key("profile")
      .String(layout->profile_name)
      .Key("profile_fingerprint")
      .String(layout->profile_fingerprint)
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

struct StatusArgs {
  std::string urls, stream = "eventfold";
  int64_t timeout_ms = 5000;
};

int PrintStatus(const StatusArgs& a) {
  std::optional<ClusterOptions> cluster = ClusterFromFlags(a.urls, a.stream);
  if (!cluster) return kExitError;
  cluster->timeout_ms = a.timeout_ms;
  Result<ClusterStatus> st = ReadClusterStatus(*cluster);
  if (!st.ok()) {
    std::cerr << "eventfold: cluster status: " << st.status().message() << "\n";
    return kExitError;
  }
  JsonWriter w;
  w.BeginObject().Key("stream").String(cluster->stream).Key("partitions").BeginArray();
  for (const PartitionStatus& p : st->partitions) {
    w.BeginObject().Key("partition").Int(p.partition).Key("owner").String(p.owner);
    w.Key("standbys").BeginArray();
    for (const std::string& s : p.standbys) w.String(s);
    w.EndArray()
        .Key("messages")
        .Uint(p.messages)
        .Key("acked")
        .Uint(p.acked)
        .Key("lag")
        .Uint(p.lag)
        .EndObject();
  }
  w.EndArray().Key("workers").BeginArray();
  for (const std::string& id : st->workers) w.String(id);
  w.EndArray()
      .Key("refused")
      .Uint(st->refused)
      .Key("replicas")
      .Int(st->layout.replicas)
      .Key("profile")
      .String(st->layout.profile_name)
      .Key("profile_fingerprint")
      .String(st->layout.profile_fingerprint)
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

}  // namespace

void AddClusterCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("cluster", "set up and inspect a NATS JetStream cluster");
  cmd->require_subcommand(1);
  auto* init = cmd->add_subcommand(
      "init", "create the intake and refused streams and the lease bucket (idempotent)");
  auto a = std::make_shared<InitArgs>();
  init->add_option("--cluster", a->urls, "comma-separated nats:// URLs")->required();
  // Every value is checked while parsing, so that a bad one is a usage
  // error (exit 2) before anything connects; exit 1 stays the cluster's
  // refusal of a change of P or profile (docs/CLUSTER.md).
  init->add_option("--stream", a->stream, "intake stream name")
      ->check(StreamNameCheck())
      ->capture_default_str();
  init->add_option("--partitions", a->options.partitions, "partitions P (fixed once created)")
      ->check(WithinRange(1, kMaxClusterPartitions))
      ->capture_default_str();
  init->add_option("--replicas", a->options.replicas, "JetStream replicas R")
      ->check(WithinRange(1, kMaxClusterReplicas))
      ->capture_default_str();
  init->add_option("--profile", a->profile_file, "profile file (default: built-in ReceiptRoller)");
  // At most as many days as JetStream's max age, 64-bit nanoseconds, holds
  // (106751): a longer one would overflow into a negative age.
  init->add_option("--retention-days", a->retention_days, "intake retention, days")
      ->check(WithinRange(1, std::numeric_limits<int64_t>::max() / (24 * 3600 * 1'000'000'000LL)))
      ->capture_default_str();
  init->add_option("--lease-ttl-ms", a->options.lease_ttl_ms, "partition lease TTL")
      ->check(WithinRange(kMinLeaseTtlMs, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  init->add_option("--timeout-ms", a->timeout_ms, "connect and request deadline")
      ->capture_default_str();
  init->callback([=] { *action = [=] { return Init(*a); }; });

  auto* status = cmd->add_subcommand(
      "status", "print partitions, owners, messages, acked and lag as one JSON object");
  auto b = std::make_shared<StatusArgs>();
  status->add_option("--cluster", b->urls, "comma-separated nats:// URLs")->required();
  status->add_option("--stream", b->stream, "intake stream name")
      ->check(StreamNameCheck())
      ->capture_default_str();
  status->add_option("--timeout-ms", b->timeout_ms, "connect and request deadline")
      ->capture_default_str();
  status->callback([=] { *action = [=] { return PrintStatus(*b); }; });
}

}  // namespace eventfold::cli
