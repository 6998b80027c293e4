#include "tools/cluster_flags.h"

#include <iostream>

namespace eventfold::cli {

std::optional<ClusterOptions> ClusterFromFlags(const std::string& urls, const std::string& stream) {
  Result<std::vector<std::string>> parsed = ParseClusterUrls(urls);
  if (!parsed.ok()) {
    std::cerr << "eventfold: " << parsed.status().message() << "\n";
    return std::nullopt;
  }
  ClusterOptions cluster;
  cluster.urls = std::move(*parsed);
  cluster.stream = stream;
  return cluster;
}

}  // namespace eventfold::cli
