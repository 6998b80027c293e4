#include "cluster/report_log.h"

#include <utility>

namespace eventfold::cluster {

void ReportLog::Report(std::string text) {
  MutexLock lock(&mu_);
  if (text.empty() || seen_.count(text) > 0) return;
  if (seen_.size() == kMaxRemembered) seen_.clear();
  seen_.insert(text);
  Keep(std::move(text));
}

void ReportLog::RoundEnded(bool failed) {
  MutexLock lock(&mu_);
  if (failed) {
    failing_ = true;
    return;
  }
  // A failure that comes back after this is reported again.
  seen_.clear();
  if (failing_) Keep(kFoldingAgain);
  failing_ = false;
}

std::vector<std::string> ReportLog::Take() {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  if (dropped_ > 0) {
    out.push_back("(" + std::to_string(dropped_) + " earlier report(s) dropped: over " +
                  std::to_string(kMaxKept) + " between two reads)");
  }
  for (std::string& text : kept_) out.push_back(std::move(text));
  kept_.clear();
  dropped_ = 0;
  return out;
}

void ReportLog::Keep(std::string text) {
  if (kept_.size() == kMaxKept) {
    kept_.pop_front();
    ++dropped_;
  }
  kept_.push_back(std::move(text));
}

}  // namespace eventfold::cluster
