// The --cluster URLS and --stream flags every cluster command takes (cluster
// init|status, serve --cluster, fold, refused --cluster), turned into
// ClusterOptions in one place.
//
// Thread-safety: a pure function apart from its message on stderr.

#ifndef EVENTFOLD_TOOLS_CLUSTER_FLAGS_H_
#define EVENTFOLD_TOOLS_CLUSTER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "eventfold/cluster.h"

namespace eventfold::cli {

// ClusterOptions for the comma-separated nats:// `urls` and `stream` (other
// fields at their defaults). nullopt, with the reason printed on stderr,
// when `urls` is not a valid list.
std::optional<ClusterOptions> ClusterFromFlags(const std::string& urls, const std::string& stream);

// --stream's check: the library's rule for a cluster's name
// (CheckStreamName), applied while parsing so that a bad name is a usage
// error (exit 2) before anything connects.
CLI::Validator StreamNameCheck();

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_CLUSTER_FLAGS_H_
