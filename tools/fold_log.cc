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

void FoldLog::Observe(const FoldWorker& worker) {
  std::vector<int> owned = worker.Owned(), warm = worker.Standbys();
  if (owned != owned_ || warm != standing_by_) {
    owned_ = std::move(owned);
    standing_by_ = std::move(warm);
    Print("owns partitions " + Join(owned_) + "; standby for " + Join(standing_by_));
  }
  // A failure is printed when it is new, or when it comes back after a
  // recovery; a recovery is printed once.
  const bool failing = worker.Failing();
  if (std::string e = worker.LastError(); e != error_ || (failing && !failing_)) {
    error_ = std::move(e);
    if (!error_.empty()) Print(error_);
  }
  if (failing_ && !failing) Print("folding again: the last round had no failure");
  failing_ = failing;
}

}  // namespace eventfold::cli
