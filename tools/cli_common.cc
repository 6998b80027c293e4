#include "tools/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/leveldb_file_names.h"
#include "eventfold/backup.h"
#include "tools/read_views.h"
#include "tools/store_waits.h"

namespace eventfold::cli {

CLI::Validator NotNegative() {
  return CLI::Validator(
      [](const std::string& v) {
        double d = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
        if (ec != std::errc() || end != v.data() + v.size()) return "not a number: " + v;
        return d < 0 ? "must not be negative, got " + v : std::string();
      },
      "NOT NEGATIVE");
}

CLI::Validator WithinRange(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](const std::string& v) {
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc::result_out_of_range && end == v.data() + v.size()) {
          return "out of range: " + v;
        }
        if (ec != std::errc() || end != v.data() + v.size()) return "not a whole number: " + v;
        if (n >= min && n <= max) return std::string();
        if (max == std::numeric_limits<int64_t>::max()) {
          return "must be at least " + std::to_string(min) + ", got " + v;
        }
        return "must be within " + std::to_string(min) + ".." + std::to_string(max) + ", got " + v;
      },
      max == std::numeric_limits<int64_t>::max()
          ? "AT LEAST " + std::to_string(min)
          : std::to_string(min) + ".." + std::to_string(max));
}

void ReadIntegersAsDecimal(CLI::App* app) {
  const CLI::Validator decimal(
      [](std::string& v) {
        const size_t sign = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
        const std::string_view digits = std::string_view(v).substr(sign);
        // Anything else ("1e3", "1.5") CLI11 refused as "Could not convert".
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
          return "must be a decimal integer, got \"" + v + "\"";
        }
        if (digits.size() < 2 || digits[0] != '0') return std::string();
        const size_t first = digits.find_first_not_of('0');
        v = v.substr(0, sign) +
            (first == std::string_view::npos ? "0" : std::string(digits.substr(first)));
        return std::string();
      },
      "");
  for (CLI::Option* option : app->get_options()) {
    const std::string type = option->get_type_name();
    if (type.starts_with("INT") || type.starts_with("UINT")) option->transform(decimal);
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    ReadIntegersAsDecimal(sub);
  }
}

std::string UnknownCommandError(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* group = &app;
  std::string path = "eventfold";
  const auto all = [](const CLI::App*) { return true; };
  for (int i = 1;; ++i) {
    const std::vector<const CLI::App*> commands = group->get_subcommands(all);
    if (commands.empty()) return "";
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    if (i == argc) {
      return group->get_require_subcommand_min() == 0 ? ""
                                                      : path + ": a command is needed: " + names;
    }
    const std::string word = argv[i];
    if (word.starts_with("-")) return "";
    const auto named = std::find_if(commands.begin(), commands.end(),
                                    [&](const CLI::App* c) { return c->check_name(word); });
    if (named == commands.end()) {
      return path + ": unknown command '" + word + "'; the commands are: " + names;
    }
    group = *named;
    path += " " + group->get_name();
  }
}

CLI::Validator ADirectory(const std::string& name) {
  return CLI::Validator(
      [name](const std::string& v) {
        return v.empty() ? name + " wants a directory, got an empty path" : std::string();
      },
      "");
}

void AddDataOption(CLI::App* cmd, std::string* dir) {
  *dir = kDefaultDataDir;
  cmd->add_option("--data", *dir, "store directory")
      ->capture_default_str()
      ->check(ADirectory("--data"));
}

bool HasStore(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path d(dir);
  // A backup or restore that did not finish, too: opening it says so.
  return std::filesystem::exists(d / "CURRENT", ec) ||
         std::filesystem::exists(d / kUnfinishedCopyFile, ec);
}

std::unique_ptr<Store> OpenStore(const std::string& dir, bool create,
                                 const std::string& profile_file, Durability durability,
                                 size_t recent_events) {
  Options options;
  options.create_if_missing = create;
  options.durability = durability;
  options.recent_events = recent_events;
  if (!profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return nullptr;
    }
    options.profile = std::move(*p);
  }
  if (!HasStore(dir)) {
    // A fold worker's directory holds one store per partition and none of
    // its own: saying "no store" there sent users looking for a lost store,
    // and creating one there would hide the partitions from every command.
    if (const std::vector<std::string> parts = PartitionStoreNames(dir); !parts.empty()) {
      std::string names;
      for (const std::string& p : parts) names += (names.empty() ? "" : ", ") + p;
      std::cerr << "eventfold: --data " << dir << ": a fold worker's directory of " << parts.size()
                << " partition store" << (parts.size() == 1 ? "" : "s") << " (" << names
                << "), not one store; name one with --data " << dir << "/p<k>\n";
      return nullptr;
    }
    if (!create) {
      std::cerr << "eventfold: no store at " << dir << " (ingest creates one)\n";
      return nullptr;
    }
  }
  // `feed --follow` holds the store for a moment at a time: wait it out.
  // A store held for good (a running `serve`) still fails, after
  // BusyRetry::max_wait_micros.
  Result<std::unique_ptr<Store>> store = OpenWhenFree(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: " << store.status().ToString() << "\n";
    return nullptr;
  }
  return std::move(*store);
}

std::optional<int> PartitionNumber(std::string_view name) {
  if (name.size() < 2 || name[0] != 'p') return std::nullopt;
  int k = -1;
  const auto [end, err] = std::from_chars(name.data() + 1, name.data() + name.size(), k);
  if (err != std::errc() || end != name.data() + name.size() || k < 0) return std::nullopt;
  return k;
}

std::vector<std::string> PartitionStoreNames(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<int, std::string> by_partition;
  std::error_code ec;
  // Incremented with an error_code: the range-for's ++ would throw.
  for (fs::directory_iterator it(dir, ec), last; !ec && it != last; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<int> partition = PartitionNumber(name);
    std::error_code inner;  // not `ec`, which the loop reads
    if (partition && fs::exists(it->path() / "CURRENT", inner)) {
      by_partition.emplace(*partition, name);
    }
  }
  std::vector<std::string> out;
  for (auto& [k, name] : by_partition) out.push_back(std::move(name));
  return out;
}

std::vector<std::string> PartitionStoreDirs(const std::string& dir, bool behind_too,
                                            std::vector<std::string>* incomplete) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (HasStore(dir)) return {};
  std::map<int, std::string> by_partition;
  // Incremented with an error_code: the range-for's ++ would throw.
  for (fs::directory_iterator it(dir, ec), last; !ec && it != last; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    const std::optional<int> partition = PartitionNumber(name);
    if (!partition) continue;
    const int k = *partition;
    if (!fs::exists(e.path() / "CURRENT", ec)) {
      // Tables or logs without the file that names the live MANIFEST: no
      // store to read, and not nothing (Store::Open refuses it the same way;
      // a creation cut short before CURRENT holds neither).
      std::vector<std::string> names;
      std::error_code inner;  // not `ec`, which the outer loop reads
      for (fs::directory_iterator f(e.path(), inner), end_f; !inner && f != end_f;
           f.increment(inner)) {
        names.push_back(f->path().filename().string());
      }
      if (DataFileWithoutCurrent(names).empty()) continue;
      std::cerr << "eventfold: skipping " << e.path().string()
                << ": not a whole store (no CURRENT file); `eventfold repair --data "
                << e.path().string() << "` salvages what it holds (until then a fold worker "
                << "refuses partition " << k << ")\n";
      if (incomplete) incomplete->push_back(e.path().string());
      continue;
    }
    if (behind_too) {
      by_partition.emplace(k, e.path().string());
      continue;
    }
    if (fs::exists(e.path().string() + ".stale", ec)) {
      std::cerr << "eventfold: skipping " << e.path().string() << ": stale (partition " << k
                << " was not this worker's when it last ran)\n";
      continue;
    }
    if (fs::exists(e.path().string() + ".standby", ec)) {
      std::cerr << "eventfold: skipping " << e.path().string() << ": a standby copy (partition "
                << k << " is owned by another worker)\n";
      continue;
    }
    by_partition.emplace(k, e.path().string());
  }
  std::vector<std::string> out;
  for (auto& [k, path] : by_partition) out.push_back(std::move(path));
  return out;
}

std::string WithPartition(const std::string& partition_dir, const std::string& json_object) {
  // PartitionStoreDirs only returns directories named p<k>.
  const std::string name = std::filesystem::path(partition_dir).filename().string();
  return "{\"partition\":" + name.substr(1) + (json_object.size() > 2 ? "," : "") +
         json_object.substr(1);
}

std::vector<std::unique_ptr<Store>> OpenStoresForRead(const std::string& dir) {
  std::vector<std::string> dirs = PartitionStoreDirs(dir);
  if (dirs.empty()) dirs.push_back(dir);
  std::vector<std::unique_ptr<Store>> stores;
  for (const std::string& d : dirs) {
    std::unique_ptr<Store> store = OpenStore(d, /*create=*/false);
    if (!store) return {};
    stores.push_back(std::move(store));
  }
  return stores;
}

}  // namespace eventfold::cli

namespace eventfold::cli {

void ExplainNoProjection(Store* store, const std::string& entity, const std::string& id) {
  PrintReasonLines(NoProjectionText(*store, entity, id));
}

void PrintJson(const std::string& json, bool pretty) {
  if (!pretty) {
    std::cout << json << "\n";
    return;
  }
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] { out += "\n" + std::string(2 * depth, ' '); };
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    out += c;
    if (in_string) {
      if (c == '\\' && i + 1 < json.size()) {
        out += json[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        // An empty object or array stays on one line.
        if (i + 1 < json.size() && (json[i + 1] == '}' || json[i + 1] == ']')) {
          out += json[++i];
        } else {
          ++depth;
          newline();
        }
        break;
      case '}':
      case ']':
        out.pop_back();
        --depth;
        newline();
        out += c;
        break;
      case ',':
        newline();
        break;
      case ':':
        out += ' ';
        break;
      default:
        break;
    }
  }
  std::cout << out << "\n";
}

ProgressLine::ProgressLine(bool first_at_once)
    : tty_(isatty(STDERR_FILENO)), shown_at_(first_at_once ? -1e9 : 0) {}

void ProgressLine::Show(double seconds, bool final, const std::string& text) {
  if (!tty_ && !final && seconds - shown_at_ < 5) return;
  shown_at_ = seconds;
  std::cerr << (tty_ ? "\r" : "") << text << (tty_ ? "\x1b[K" : "\n") << std::flush;
  open_ = tty_;
}

void ProgressLine::End() {
  if (open_) std::cerr << "\n" << std::flush;
  open_ = false;
}

}  // namespace eventfold::cli
