#include "tools/fold_log.h"

#include <utility>

#include "core/rfc3339.h"

namespace eventfold::cli {
namespace {

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int k : v) out += (out.empty() ? "" : ",") + std::to_string(k);
  return out.empty() ? "none" : out;
}

}  // namespace

std::string LogTime(int64_t micros) {
  // FormatRfc3339 writes six fraction digits, then "Z": the last three go.
  std::string t = FormatRfc3339(micros);
  t.erase(t.size() - 4, 3);
  return t;
}

void FoldLog::Print(std::string_view text) {
  *out_ << LogTime(clock_->NowMicros()) << " eventfold: " << text << std::endl;
}

void FoldLog::Observe(FoldWorker& worker) {
  std::vector<int> owned = worker.Owned(), warm = worker.Standbys();
  if (owned != owned_ || warm != standing_by_) {
    owned_ = std::move(owned);
    standing_by_ = std::move(warm);
    Print("owns partitions " + Join(owned_) + "; standby for " + Join(standing_by_));
  }
  for (const std::string& report : worker.TakeReports()) Print(report);
}

}  // namespace eventfold::cli
