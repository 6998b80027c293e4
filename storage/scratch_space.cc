// Scratch space beside a store (storage/scratch_space.h).

#include "storage/scratch_space.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "storage/leveldb_status.h"

namespace eventfold::storage {
namespace {

// A directory's entries, without "." and "..": false when `path` is not a
// directory that can be listed.
bool ListChildren(leveldb::Env* env, const std::string& path, std::vector<std::string>* out) {
  out->clear();
  if (!env->GetChildren(path, out).ok()) return false;
  std::erase_if(*out, [](const std::string& c) { return c == "." || c == ".."; });
  return true;
}

// A rebuild's run file (replay/run_file.h), which builds before the mark
// left in DIR.rebuild after a crash.
bool IsRunFile(std::string_view name) {
  constexpr std::string_view kPrefix = "run-", kSuffix = ".tmp";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

Status NotOurs(const std::string& path) {
  return Status::InvalidArgument(
      path +
      " is in the way: eventfold uses that name for scratch space beside the store (a "
      "rebuild's, a verify's or a check's) and empties it, but it holds files eventfold did "
      "not put there (no " +
      std::string(kScratchMark) +
      " mark); nothing in it was touched: move it elsewhere and run the command again");
}

// Removes what `dir` holds, subdirectories and their files too.
leveldb::Status RemoveContents(leveldb::Env* env, const std::string& dir) {
  std::vector<std::string> children;
  if (!ListChildren(env, dir, &children)) return leveldb::Status::OK();
  for (const std::string& child : children) {
    const std::string path = dir + "/" + child;
    // A file goes at once; what RemoveFile refuses is a directory.
    if (env->RemoveFile(path).ok()) continue;
    leveldb::Status s = RemoveContents(env, path);
    if (s.ok()) s = env->RemoveDir(path);
    if (!s.ok()) return s;
  }
  return leveldb::Status::OK();
}

}  // namespace

ScratchState InspectScratch(leveldb::Env* env, const std::string& path) {
  std::vector<std::string> children;
  if (!ListChildren(env, path, &children)) {
    return env->FileExists(path) ? ScratchState::kForeign : ScratchState::kAbsent;
  }
  if (children.empty()) return ScratchState::kOurs;
  if (std::find(children.begin(), children.end(), kScratchMark) != children.end() ||
      std::all_of(children.begin(), children.end(),
                  [](const std::string& c) { return IsRunFile(c); })) {
    return ScratchState::kOurs;
  }
  return ScratchState::kForeign;
}

Status ClaimScratch(leveldb::Env* env, const std::string& path) {
  leveldb::Status s;
  switch (InspectScratch(env, path)) {
    case ScratchState::kForeign:
      return NotOurs(path);
    case ScratchState::kOurs:
      s = RemoveContents(env, path);
      break;
    case ScratchState::kAbsent:
      s = env->CreateDir(path);
      break;
  }
  if (s.ok()) {
    s = leveldb::WriteStringToFile(
        env, "eventfold's scratch space: removed by eventfold when its work is done\n",
        path + "/" + kScratchMark);
  }
  return FromLevelDb(s, "preparing the scratch directory " + path);
}

Status ReleaseScratch(leveldb::Env* env, const std::string& path) {
  switch (InspectScratch(env, path)) {
    case ScratchState::kAbsent:
      return Status::OK();
    case ScratchState::kForeign:
      return NotOurs(path);
    case ScratchState::kOurs:
      break;
  }
  leveldb::Status s = RemoveContents(env, path);
  if (s.ok()) s = env->RemoveDir(path);
  return FromLevelDb(s, "removing the scratch directory " + path);
}

}  // namespace eventfold::storage
