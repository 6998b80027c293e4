// Sorted runs: the rebuild's external sort.
//
// The rebuild routes events in arrival order but must write each entity's
// log in key (fold) order: LevelDB then flushes tables that overlap nothing
// and moves them down without rewriting them, where keys written in random
// order cost several rewrites by compaction. A RunBuffer collects records up
// to a memory budget; sorted, it is spilled to a RunFile in the scratch
// directory (or kept, for the last one); a RunMerger yields the records of
// every run in key order.
//
// Run file format: records [fixed32 key size][fixed32 value size][key]
// [value], nothing else: a run lives only during one rebuild, in the
// process that wrote it, so it carries no version or checksum.
// Not thread-safe: one thread per object.

#ifndef EVENTFOLD_REPLAY_RUN_FILE_H_
#define EVENTFOLD_REPLAY_RUN_FILE_H_

#include <leveldb/env.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/status.h"

namespace eventfold {

// A directory of run files, eventfold's scratch space (storage/
// scratch_space.h): created, or emptied when a crash left it, by Reset(),
// and removed with every file in it on destruction. Thread-safe.
class ScratchDir {
 public:
  ScratchDir(leveldb::Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Empties the directory (leftovers of an interrupted rebuild) or creates
  // it; kInvalidArgument, touching nothing, when the path holds something
  // that is not eventfold's scratch space.
  Status Reset();
  // A new file name in the directory.
  std::string NewFileName();
  leveldb::Env* env() const { return env_; }

 private:
  leveldb::Env* env_;
  std::string path_;
  std::atomic<uint64_t> next_{0};
};

// Records in memory, in one arena.
class RunBuffer {
 public:
  // Room for about `bytes` of records without reallocating.
  void Reserve(size_t bytes);
  void Add(std::string_view key, std::string_view value);
  // Sorts the records by key (stable: equal keys keep their order).
  void Sort();
  void Clear();
  size_t size() const { return entries_.size(); }
  size_t bytes() const { return arena_.size() + entries_.size() * sizeof(Entry); }
  std::string_view key(size_t i) const {
    return {arena_.data() + entries_[i].offset, entries_[i].key_size};
  }
  std::string_view value(size_t i) const {
    const Entry& e = entries_[i];
    return {arena_.data() + e.offset + e.key_size, e.value_size};
  }

 private:
  struct Entry {
    size_t offset;
    uint32_t key_size, value_size;
  };
  std::string arena_;
  std::vector<Entry> entries_;
};

// Appends records to a new run file.
class RunWriter {
 public:
  static Result<std::unique_ptr<RunWriter>> Create(leveldb::Env* env, const std::string& name);
  Status Add(std::string_view key, std::string_view value);
  Status Close();
  const std::string& name() const { return name_; }

 private:
  RunWriter(std::unique_ptr<leveldb::WritableFile> file, std::string name)
      : file_(std::move(file)), name_(std::move(name)) {}
  std::unique_ptr<leveldb::WritableFile> file_;
  std::string name_;
};

// Reads one run, record by record.
class RunCursor {
 public:
  virtual ~RunCursor() = default;
  // Moves to the next record (the first, on the first call); false at the
  // end or on an error (see status()).
  virtual bool Next() = 0;
  virtual Status status() const { return Status::OK(); }
  // The current record; valid until the next call to Next().
  std::string_view key() const { return key_; }
  std::string_view value() const { return value_; }

 protected:
  std::string_view key_, value_;
};

// A sorted RunBuffer, read in place.
std::unique_ptr<RunCursor> ReadBuffer(RunBuffer buffer);
// A closed run file, read sequentially.
Result<std::unique_ptr<RunCursor>> ReadRunFile(leveldb::Env* env, const std::string& name);

// The records of several sorted runs, in key order.
class RunMerger {
 public:
  explicit RunMerger(std::vector<std::unique_ptr<RunCursor>> runs);
  bool Next();
  Status status() const;
  std::string_view key() const { return current_->key(); }
  std::string_view value() const { return current_->value(); }

 private:
  std::vector<std::unique_ptr<RunCursor>> runs_;
  std::vector<RunCursor*> heap_;  // runs with a current record, min-heap by key
  RunCursor* current_ = nullptr;  // popped: its record is the merger's
};

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_RUN_FILE_H_
