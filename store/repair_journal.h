// RepairJournal: what a repair found, kept in the store directory as it
// goes (dir/lost/repair-<start time>.ndjson, beside the tables LevelDB's
// repairer archives there), so that neither a repair killed halfway nor an
// operator who did not keep its output loses the list of what to ask the
// sender for again.
//
// Grammar, one JSON object per line:
//   {"repair":"started","at":"<RFC 3339>"}
//   {"damage":{"file":..,"offset":..,"end":..,"after_key":..,"before_key":..,
//              "after_raw":"<hex>","before_raw":"<hex>","message":..}}
//   {"lost":{"kind":"event"|"window"|"changes"|"records","event_id":..,
//            "type":..,"occurred_at":..,"received_from":..,"received_to":..,
//            "first_seq":..,"last_seq":..,"detail":..}}
//   {"rewrote":{"file":..,"size":..}}      a damaged table rewritten with its
//                                          intact entries, `size` bytes now
//   {"end":{"problems_left":..}}             the repair ran to its end
//   {"resumed_by":"repair-<time>.ndjson"}   a later repair took it over
// The damage is synced before the repair changes anything, each rewrite
// before the rewritten table replaces the damaged one, and each loss
// before the write that drops what it names (Sync). (A table rewritten by
// a repair that stopped before LevelDB's repairer wrote a new MANIFEST
// differs in size from the old one's entry: the next repair's file check
// takes it as the rewrite it is, not as a table lost whole.) A journal with neither
// of the last two lines belongs to a repair that stopped: the next repair
// resumes it (Unfinished), taking its damage as its own and reporting its
// losses again. A line cut short by a kill is skipped when read, and the
// "resumed_by" line a later repair appends starts with a newline of its
// own, so it is never joined to such a line.
//
// Thread-compatible.

#ifndef EVENTFOLD_STORE_REPAIR_JOURNAL_H_
#define EVENTFOLD_STORE_REPAIR_JOURNAL_H_

#include <leveldb/env.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "eventfold/repair.h"
#include "eventfold/status.h"

namespace eventfold {

// What the repairs that stopped before their end had found.
struct UnfinishedRepairs {
  std::vector<std::string> journals;  // their file names in dir/lost/, oldest first
  std::vector<FileDamage> damage;
  std::vector<LostData> lost;
  std::map<std::string, uint64_t> rewritten;  // table -> its size rewritten
};

class RepairJournal {
 public:
  // Reads every unfinished journal in `dir`/lost/ (none when there is no
  // lost/). A journal that cannot be read, or a lost/ that cannot be
  // listed, is an error (kIOError): its findings would go unread.
  [[nodiscard]] static Result<UnfinishedRepairs> Unfinished(leveldb::Env* env,
                                                            const std::string& dir);

  // Creates the journal of a repair started at `now_micros` (a name not yet
  // taken) and writes its first line, unsynced.
  [[nodiscard]] static Result<std::unique_ptr<RepairJournal>> Create(leveldb::Env* env,
                                                                     const std::string& dir,
                                                                     int64_t now_micros);
  ~RepairJournal();
  RepairJournal(const RepairJournal&) = delete;
  RepairJournal& operator=(const RepairJournal&) = delete;

  // Appends a line; on disk at the next Sync. A write error is kept and
  // returned by Sync.
  void AddDamage(const FileDamage& d);
  // The table `file` (a name in the store directory) rewritten, `size`
  // bytes: appended, and on disk at the next Sync.
  void AddRewrite(const std::string& file, uint64_t size);
  // Appends `l` and returns true, or returns false when this journal holds
  // the same loss already (found again after a resumed repair's report).
  bool AddLost(const LostData& l);

  // Makes every line appended so far durable, or returns the first error.
  // The first call also makes the journal's name durable: lost/ is synced,
  // and the store directory that holds lost/.
  [[nodiscard]] Status Sync();

  // The last line: the repair ran to its end. Then marks each of
  // `resumed` (names in dir/lost/) as taken over by this one. Synced.
  [[nodiscard]] Status Finish(uint64_t problems_left, const std::vector<std::string>& resumed);

  // The journal's path.
  const std::string& path() const { return path_; }

 private:
  RepairJournal(leveldb::Env* env, std::string dir, std::string name,
                std::unique_ptr<leveldb::WritableFile> file);
  void Append(const std::string& line);

  leveldb::Env* env_;
  std::string lost_dir_;
  std::string name_;
  std::string path_;
  std::unique_ptr<leveldb::WritableFile> file_;
  std::set<std::string> lost_lines_;  // for AddLost's "already holds"
  Status error_;
  bool entry_synced_ = false;  // the journal's name in lost/, and lost/ in the store's
};

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_REPAIR_JOURNAL_H_
