// The names LevelDB gives the files of a database's directory, told apart
// by name alone (LevelDB's own ParseFileName is not in its public headers).
// Pure functions; thread-safe.

#ifndef EVENTFOLD_CORE_LEVELDB_FILE_NAMES_H_
#define EVENTFOLD_CORE_LEVELDB_FILE_NAMES_H_

#include <string>
#include <string_view>
#include <vector>

namespace eventfold {

// Whether `name` is "<digits><suffix>", as LevelDB numbers its files.
inline bool IsNumberedLevelDbName(std::string_view name, std::string_view prefix,
                                  std::string_view suffix) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  const std::string_view n =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return !n.empty() && n.find_first_not_of("0123456789") == std::string_view::npos;
}

// Whether `name` holds a database's data: a table (<n>.ldb, <n>.sst) or a
// write-ahead log (<n>.log); an "app.log" does not.
inline bool IsLevelDbDataFileName(std::string_view name) {
  return IsNumberedLevelDbName(name, "", ".log") || IsNumberedLevelDbName(name, "", ".ldb") ||
         IsNumberedLevelDbName(name, "", ".sst");
}

// Whether `name` is one LevelDB gives its own files (CURRENT, LOCK,
// MANIFEST-<n>, and the data files above).
inline bool IsLevelDbFileName(std::string_view name) {
  return name == "CURRENT" || name == "LOCK" || IsNumberedLevelDbName(name, "MANIFEST-", "") ||
         IsLevelDbDataFileName(name);
}

// Given a directory's entries: the first of LevelDB's data files among
// them when there is no CURRENT (the file that names the live MANIFEST),
// the mark of a database that lost it; "" otherwise, for a whole database
// or none (a creation cut short before CURRENT leaves no data file).
inline std::string DataFileWithoutCurrent(const std::vector<std::string>& names) {
  std::string data;
  for (const std::string& name : names) {
    if (name == "CURRENT") return "";
    if (data.empty() && IsLevelDbDataFileName(name)) data = name;
  }
  return data;
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_LEVELDB_FILE_NAMES_H_
