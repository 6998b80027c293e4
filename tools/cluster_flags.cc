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

CLI::Validator StreamNameCheck() {
  return CLI::Validator(
      [](const std::string& v) {
        Status st = CheckStreamName(v);
        if (st.ok()) return std::string();
        // CLI11 names the option ("--stream: ") already.
        const std::string_view prefix = "stream: ";
        const std::string& m = st.message();
        return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
      },
      "NAME");
}

}  // namespace eventfold::cli
