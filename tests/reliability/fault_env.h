// FaultEnv: an in-memory leveldb::Env that injects disk faults and power cuts.
//
// Files live in leveldb::NewMemEnv. Every WritableFile tracks how much of it
// was written and how much of that was synced; DropUnsyncedData() truncates
// every file to its last synced length, which is what a power cut leaves
// (data in the OS page cache is gone; metadata operations — create, rename,
// remove — are taken as durable at once, like a journaling file system).
//
// Switchable faults, each counted in faults_injected():
//  - append errors (every Append fails, or only the n-th from now), writing
//    nothing or, with partial writes on, the first half of the data, as a
//    short write followed by an error does;
//  - sync errors (Sync fails; the synced length stays where it was);
//  - close errors (Close fails after closing);
//  - a full disk: after `bytes` more appended bytes, Append writes what still
//    fits and fails with IOError "...: No space left on device", like the
//    posix Env on ENOSPC; creating files still works;
//  - unreadable files: opening a named table for reads fails;
//  - a power cut: PowerCut() (now) or CutPowerAfter(n) (at the n-th append
//    or sync) makes every later mutation fail and change nothing (the
//    machine is off) until Revive(); DropUnsyncedData() then loses what was
//    not synced.
//
// Thread-safe. Header-only, for tests.

#ifndef EVENTFOLD_TESTS_RELIABILITY_FAULT_ENV_H_
#define EVENTFOLD_TESTS_RELIABILITY_FAULT_ENV_H_

#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace eventfold::reliability {

class FaultEnv final : public leveldb::EnvWrapper {
 public:
  FaultEnv() : FaultEnv(leveldb::NewMemEnv(leveldb::Env::Default())) {}
  ~FaultEnv() override = default;

  // --- fault switches -----------------------------------------------------
  void SetAppendError(bool on) {
    Locked([&] { append_error_ = on; });
  }
  // Fails only the n-th Append from now (1: the next one), once.
  void FailNthAppend(int n) {
    Locked([&] { append_countdown_ = n; });
  }
  // A failing Append first writes half of its data.
  void SetPartialWrites(bool on) {
    Locked([&] { partial_writes_ = on; });
  }
  void SetSyncError(bool on) {
    Locked([&] { sync_error_ = on; });
  }
  void SetCloseError(bool on) {
    Locked([&] { close_error_ = on; });
  }
  // Disk full after `bytes` more bytes; nullopt: unlimited.
  void SetSpaceLeft(std::optional<uint64_t> bytes) {
    Locked([&] { space_left_ = bytes; });
  }
  // Only files whose name starts with `prefix` get the switched faults
  // (append, sync, close, full disk); "" (default): every file.
  void SetFaultPrefix(std::string prefix) {
    Locked([&] { fault_prefix_ = std::move(prefix); });
  }
  // Files whose name starts with `prefix` get none of the switched faults;
  // "" (default): none is exempt.
  void SetFaultExemptPrefix(std::string prefix) {
    Locked([&] { exempt_prefix_ = std::move(prefix); });
  }
  // Opening any of `names` for random reads (LevelDB's tables) fails, as
  // for a file on a bad sector; {} (or ClearFaults): every file readable.
  void SetUnreadable(std::set<std::string> names) {
    Locked([&] { unreadable_ = std::move(names); });
  }
  // Every switch off (a power cut stays until Revive).
  void ClearFaults() {
    Locked([&] {
      append_error_ = sync_error_ = close_error_ = partial_writes_ = false;
      append_countdown_ = 0;
      space_left_.reset();
      unreadable_.clear();
    });
  }

  // The machine goes off: every later write, sync, close, create, rename or
  // remove fails without changing anything. Reads still work (the test
  // inspects what is left).
  void PowerCut() {
    Locked([&] { dead_ = true; });
  }
  // The power goes at the n-th Append or Sync from now (1: the next), which
  // fails: cuts land between a log append and its sync as often as not.
  void CutPowerAfter(uint64_t ops) {
    Locked([&] { ops_until_cut_ = ops; });
  }
  void Revive() {
    Locked([&] {
      dead_ = false;
      ops_until_cut_ = 0;
    });
  }
  bool dead() {
    std::lock_guard lock(mu_);
    return dead_;
  }

  // Truncates every file to its last synced length; returns the bytes lost.
  // Call with no file of the env open for writing (the store closed).
  uint64_t DropUnsyncedData() {
    std::lock_guard lock(mu_);
    uint64_t dropped = 0;
    for (auto& [name, f] : files_) {
      if (f.size <= f.synced) continue;
      std::string content;
      if (!ReadAll(name, &content).ok()) continue;
      content.resize(std::min<uint64_t>(f.synced, content.size()));
      leveldb::WritableFile* w = nullptr;
      if (!target()->NewWritableFile(name, &w).ok()) continue;  // memenv truncates
      (void)w->Append(content);
      (void)w->Close();
      delete w;
      dropped += f.size - f.synced;
      f.size = f.synced;
    }
    return dropped;
  }

  uint64_t faults_injected() const { return faults_.load(); }
  // Bytes written but not yet synced, over all files.
  uint64_t UnsyncedBytes() {
    std::lock_guard lock(mu_);
    uint64_t n = 0;
    for (const auto& [name, f] : files_) n += f.size - std::min(f.size, f.synced);
    return n;
  }

  // --- leveldb::Env -------------------------------------------------------
  leveldb::Status NewWritableFile(const std::string& fname,
                                  leveldb::WritableFile** result) override {
    std::lock_guard lock(mu_);
    if (dead_) return Dead(fname);
    leveldb::WritableFile* base = nullptr;
    leveldb::Status s = target()->NewWritableFile(fname, &base);
    if (!s.ok()) return s;
    files_[fname] = FileInfo{};
    *result = new File(this, fname, base);
    return s;
  }

  leveldb::Status NewAppendableFile(const std::string& fname,
                                    leveldb::WritableFile** result) override {
    std::lock_guard lock(mu_);
    if (dead_) return Dead(fname);
    uint64_t size = 0;
    if (!target()->GetFileSize(fname, &size).ok()) size = 0;
    leveldb::WritableFile* base = nullptr;
    leveldb::Status s = target()->NewAppendableFile(fname, &base);
    if (!s.ok()) return s;
    auto [it, added] = files_.try_emplace(fname, FileInfo{size, size});
    it->second.size = size;
    *result = new File(this, fname, base);
    return s;
  }

  leveldb::Status NewRandomAccessFile(const std::string& fname,
                                      leveldb::RandomAccessFile** result) override {
    {
      std::lock_guard lock(mu_);
      if (unreadable_.contains(fname)) {
        ++faults_;
        return leveldb::Status::IOError(fname, "Input/output error (injected read fault)");
      }
    }
    return target()->NewRandomAccessFile(fname, result);
  }

  leveldb::Status RemoveFile(const std::string& fname) override {
    std::lock_guard lock(mu_);
    if (dead_) return Dead(fname);
    files_.erase(fname);
    return target()->RemoveFile(fname);
  }

  leveldb::Status RenameFile(const std::string& src, const std::string& target_name) override {
    std::lock_guard lock(mu_);
    if (dead_) return Dead(src);
    leveldb::Status s = target()->RenameFile(src, target_name);
    if (!s.ok()) return s;
    auto it = files_.find(src);
    if (it != files_.end()) {
      files_[target_name] = it->second;
      files_.erase(src);
    } else {
      files_.erase(target_name);
    }
    return s;
  }

 private:
  struct FileInfo {
    uint64_t size = 0;    // bytes written
    uint64_t synced = 0;  // bytes that survive a power cut
  };

  class File final : public leveldb::WritableFile {
   public:
    File(FaultEnv* env, std::string name, leveldb::WritableFile* base)
        : env_(env), name_(std::move(name)), base_(base) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
      return env_->DoAppend(name_, base_.get(), data);
    }
    leveldb::Status Flush() override {
      if (env_->IsDead()) return Dead(name_);
      return base_->Flush();
    }
    leveldb::Status Sync() override { return env_->DoSync(name_, base_.get()); }
    leveldb::Status Close() override { return env_->DoClose(name_, base_.get()); }

   private:
    FaultEnv* env_;
    std::string name_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };

  explicit FaultEnv(leveldb::Env* mem) : EnvWrapper(mem), mem_(mem) {}

  template <typename F>
  void Locked(F f) {
    std::lock_guard lock(mu_);
    f();
  }

  static leveldb::Status Dead(const std::string& fname) {
    return leveldb::Status::IOError(fname, "Input/output error (power cut)");
  }

  bool IsDead() { return dead(); }

  // Whether the switched faults apply to `name` (mu_ held).
  bool Targeted(const std::string& name) const {
    return name.starts_with(fault_prefix_) &&
           (exempt_prefix_.empty() || !name.starts_with(exempt_prefix_));
  }

  // Counts one Append or Sync towards a scheduled cut (mu_ held).
  bool CutNow() {
    if (ops_until_cut_ == 0 || --ops_until_cut_ > 0) return false;
    dead_ = true;
    return true;
  }

  leveldb::Status ReadAll(const std::string& name, std::string* out) {
    leveldb::SequentialFile* f = nullptr;
    leveldb::Status s = target()->NewSequentialFile(name, &f);
    if (!s.ok()) return s;
    std::unique_ptr<leveldb::SequentialFile> file(f);
    std::vector<char> scratch(1 << 16);
    for (;;) {
      leveldb::Slice chunk;
      s = file->Read(scratch.size(), &chunk, scratch.data());
      if (!s.ok() || chunk.empty()) return s;
      out->append(chunk.data(), chunk.size());
    }
  }

  leveldb::Status DoAppend(const std::string& name, leveldb::WritableFile* base,
                           const leveldb::Slice& data) {
    std::lock_guard lock(mu_);
    if (dead_ || CutNow()) return Dead(name);
    size_t allowed = data.size();
    leveldb::Status error;
    if (!Targeted(name)) {
      // not a file the switched faults are aimed at
    } else if (append_error_ || (append_countdown_ > 0 && --append_countdown_ == 0)) {
      allowed = partial_writes_ ? data.size() / 2 : 0;
      error = leveldb::Status::IOError(name, "Input/output error (injected append fault)");
    } else if (space_left_ && *space_left_ < data.size()) {
      allowed = static_cast<size_t>(*space_left_);
      error = leveldb::Status::IOError(name, "No space left on device");
    }
    if (allowed > 0) {
      leveldb::Status s = base->Append(leveldb::Slice(data.data(), allowed));
      if (!s.ok()) return s;
      files_[name].size += allowed;
      if (space_left_) *space_left_ -= std::min<uint64_t>(*space_left_, allowed);
    }
    if (!error.ok()) ++faults_;
    return error;
  }

  leveldb::Status DoSync(const std::string& name, leveldb::WritableFile* base) {
    std::lock_guard lock(mu_);
    if (dead_ || CutNow()) return Dead(name);
    if (sync_error_ && Targeted(name)) {
      ++faults_;
      return leveldb::Status::IOError(name, "Input/output error (injected sync fault)");
    }
    leveldb::Status s = base->Sync();
    if (s.ok()) {
      FileInfo& f = files_[name];
      f.synced = f.size;
    }
    return s;
  }

  leveldb::Status DoClose(const std::string& name, leveldb::WritableFile* base) {
    std::lock_guard lock(mu_);
    if (dead_) return Dead(name);
    leveldb::Status s = base->Close();
    if (s.ok() && close_error_ && Targeted(name)) {
      ++faults_;
      return leveldb::Status::IOError(name, "Input/output error (injected close fault)");
    }
    return s;
  }

  std::unique_ptr<leveldb::Env> mem_;
  std::mutex mu_;
  std::map<std::string, FileInfo> files_;
  bool append_error_ = false;
  int append_countdown_ = 0;
  bool partial_writes_ = false;
  bool sync_error_ = false;
  bool close_error_ = false;
  bool dead_ = false;
  uint64_t ops_until_cut_ = 0;  // 0: no cut scheduled
  std::optional<uint64_t> space_left_;
  std::set<std::string> unreadable_;
  std::string fault_prefix_;
  std::string exempt_prefix_;
  std::atomic<uint64_t> faults_{0};
};

}  // namespace eventfold::reliability

#endif  // EVENTFOLD_TESTS_RELIABILITY_FAULT_ENV_H_
