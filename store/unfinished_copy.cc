// The mark of an unfinished backup or restore (store/unfinished_copy.h).

#include "store/unfinished_copy.h"

#include <memory>

#include "storage/dir_sync.h"
#include "storage/leveldb_status.h"

namespace eventfold {
namespace {

std::string MarkPath(const std::string& dir) { return dir + "/" + kUnfinishedCopyFile; }

}  // namespace

Status MarkUnfinishedCopy(leveldb::Env* env, const std::string& dir, const std::string& what) {
  const std::string path = MarkPath(dir);
  leveldb::WritableFile* raw = nullptr;
  leveldb::Status s = env->NewWritableFile(path, &raw);
  std::unique_ptr<leveldb::WritableFile> file(raw);
  if (s.ok()) s = file->Append(what + "\n");
  if (s.ok()) s = file->Sync();
  if (s.ok()) s = file->Close();
  Status st = storage::FromLevelDb(s, "marking " + dir + " as a copy under way");
  // Its name too: a power cut must not keep the copy's files and lose it.
  if (st.ok()) st = storage::SyncDir(env, dir);
  return st;
}

Status ClearUnfinishedCopy(leveldb::Env* env, const std::string& dir) {
  Status st = storage::FromLevelDb(env->RemoveFile(MarkPath(dir)),
                                   "clearing the mark of the copy in " + dir);
  if (st.ok()) st = storage::SyncDir(env, dir);
  return st;
}

bool HoldsUnfinishedCopy(leveldb::Env* env, const std::string& dir) {
  return env->FileExists(MarkPath(dir));
}

std::string UnfinishedCopyOf(leveldb::Env* env, const std::string& dir) {
  if (!HoldsUnfinishedCopy(env, dir)) return "";
  std::string what = "a backup or a restore";  // e.g. killed before its first line
  leveldb::SequentialFile* raw = nullptr;
  if (env->NewSequentialFile(MarkPath(dir), &raw).ok()) {
    std::unique_ptr<leveldb::SequentialFile> file(raw);
    char buf[4096];
    leveldb::Slice got;
    if (file->Read(sizeof(buf), &got, buf).ok() && !got.empty()) {
      const std::string_view line(got.data(), got.size());
      if (const size_t eol = line.find('\n'); eol != std::string_view::npos && eol > 0) {
        what.assign(line.substr(0, eol));
      }
    }
  }
  return what;
}

Status RefuseUnfinishedCopy(leveldb::Env* env, const std::string& dir) {
  const std::string what = UnfinishedCopyOf(env, dir);
  if (what.empty()) return Status::OK();
  return Status::Corruption(dir + " holds " + what +
                            " that did not finish (it was stopped before its copy was whole "
                            "and verified): it is not a whole store. Remove " +
                            dir + " and run it again");
}

}  // namespace eventfold
