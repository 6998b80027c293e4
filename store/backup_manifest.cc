// A backup's manifest (store/backup_manifest.h).

#include "store/backup_manifest.h"

#include <charconv>
#include <memory>
#include <string_view>

#include "storage/leveldb_status.h"

namespace eventfold {
namespace {

constexpr std::string_view kFirstLine = "eventfold backup manifest 1";

std::string PathIn(const std::string& dir) { return dir + "/" + kBackupManifestFile; }

void AppendDigest(std::string_view name, const DbDigest& d, std::string* out) {
  out->append(name)
      .append(" ")
      .append(std::to_string(d.records))
      .append(" ")
      .append(std::to_string(d.bytes))
      .append(" ")
      .append(std::to_string(d.hash))
      .append("\n");
}

// Parses "RECORDS BYTES HASH" (the rest of a line after its name).
bool ParseDigest(std::string_view text, DbDigest* d) {
  uint64_t* fields[] = {&d->records, &d->bytes, &d->hash};
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0) {
      if (text.empty() || text.front() != ' ') return false;
      text.remove_prefix(1);
    }
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *fields[i]);
    if (ec != std::errc() || end == text.data()) return false;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
  }
  return text.empty();
}

}  // namespace

Status WriteBackupManifest(leveldb::Env* env, const std::string& dir,
                           const BackupManifest& manifest) {
  std::string text(kFirstLine);
  text.append("\n");
  AppendDigest("store", manifest.store, &text);
  if (manifest.quarantine) AppendDigest("quarantine", *manifest.quarantine, &text);
  leveldb::WritableFile* raw = nullptr;
  leveldb::Status s = env->NewWritableFile(PathIn(dir), &raw);
  std::unique_ptr<leveldb::WritableFile> file(raw);
  if (s.ok()) s = file->Append(text);
  if (s.ok()) s = file->Sync();
  if (s.ok()) s = file->Close();
  return storage::FromLevelDb(s, "writing the manifest of the backup at " + dir);
}

Result<std::optional<BackupManifest>> ReadBackupManifest(leveldb::Env* env,
                                                         const std::string& dir) {
  const std::string path = PathIn(dir);
  if (!env->FileExists(path)) return std::optional<BackupManifest>();
  std::string text;
  Status st = storage::FromLevelDb(leveldb::ReadFileToString(env, path, &text), "reading " + path);
  if (!st.ok()) return st;
  BackupManifest m;
  bool store_seen = false;
  std::string_view rest = text;
  for (int line_no = 1; !rest.empty(); ++line_no) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    auto refuse = [&](std::string_view why) {
      return Status::Corruption(path + " line " + std::to_string(line_no) + ": " +
                                std::string(why));
    };
    if (eol == std::string_view::npos) return refuse("cut short (no end of line)");
    if (line_no == 1) {
      if (line != kFirstLine) return refuse("not \"" + std::string(kFirstLine) + "\"");
      continue;
    }
    const size_t space = line.find(' ');
    const std::string_view name = line.substr(0, space);
    const std::string_view digest =
        space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    DbDigest d;
    if (!ParseDigest(digest, &d)) return refuse("not \"NAME RECORDS BYTES HASH\"");
    if (name == "store" && !store_seen) {
      m.store = d;
      store_seen = true;
    } else if (name == "quarantine" && !m.quarantine) {
      m.quarantine = d;
    } else {
      return refuse("unexpected \"" + std::string(name) + "\"");
    }
  }
  if (!store_seen) return Status::Corruption(path + ": no \"store\" line");
  return std::optional<BackupManifest>(m);
}

}  // namespace eventfold
