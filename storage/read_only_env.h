// ReadOnlyEnv: the Env of a database opened for reads only, which must
// change nothing on disk.
//
// GuardedDb opens the database this way when the disk fails its reopen, so
// that reads go on while writes stay refused. LevelDB has no read-only
// open: with `reuse_logs` it opens its last write-ahead log and its
// MANIFEST for appending and, when it has only that log to replay, writes
// nothing at the open. But it may write: an older log is replayed into a
// level-0 table at the open, and a compaction (scheduled at the open, or
// asked for) writes tables; each appends its edit to the reused MANIFEST,
// and the files it replaced are removed. When the failure that stopped the
// store tore a MANIFEST append, the MANIFEST ends in a partial record,
// which an open reads as its end. An edit appended behind it is then never
// read: the next open goes back to files that edit had replaced, and finds
// them removed (a test tears a MANIFEST append, then fails a reopen: before
// this Env, all 20 acknowledged events were gone at the next reopen).
//
// So this Env lets LevelDB open the files it reuses, and refuses
// everything that would change one: every append to them, every new file,
// every removal and rename. An open that would have to write fails (reads
// are then refused too, until a reopen works), a compaction fails before
// it writes, and the files stay as the failure left them for the next
// reopen. Reads, locks, the info log and background scheduling pass
// through.
//
// Thread-safe, as the wrapped Env is.

#ifndef EVENTFOLD_STORAGE_READ_ONLY_ENV_H_
#define EVENTFOLD_STORAGE_READ_ONLY_ENV_H_

#include <leveldb/env.h>

#include <memory>
#include <string>

namespace eventfold::storage {

class ReadOnlyEnv final : public leveldb::EnvWrapper {
 public:
  explicit ReadOnlyEnv(leveldb::Env* target) : leveldb::EnvWrapper(target) {}

  leveldb::Status NewWritableFile(const std::string& fname, leveldb::WritableFile**) override {
    return Refused(fname);
  }
  // Opened, so that LevelDB can reuse the file; every append to it fails.
  leveldb::Status NewAppendableFile(const std::string& fname,
                                    leveldb::WritableFile** result) override {
    leveldb::WritableFile* base = nullptr;
    leveldb::Status s = target()->NewAppendableFile(fname, &base);
    if (s.ok()) *result = new NoAppendFile(fname, base);
    return s;
  }
  leveldb::Status RemoveFile(const std::string& fname) override { return Refused(fname); }
  leveldb::Status RenameFile(const std::string& src, const std::string&) override {
    return Refused(src);
  }

 private:
  static leveldb::Status Refused(const std::string& fname) {
    return leveldb::Status::IOError(fname, "opened for reads only after a failed reopen");
  }

  class NoAppendFile final : public leveldb::WritableFile {
   public:
    NoAppendFile(std::string name, leveldb::WritableFile* base)
        : name_(std::move(name)), base_(base) {}
    leveldb::Status Append(const leveldb::Slice&) override { return Refused(name_); }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return leveldb::Status::OK(); }  // nothing to flush
    leveldb::Status Sync() override { return leveldb::Status::OK(); }   // nor to sync

   private:
    std::string name_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_READ_ONLY_ENV_H_
