#include "tools/cli_common.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

namespace eventfold::cli {
namespace {

constexpr auto kBusyWait = std::chrono::seconds(3);
constexpr auto kBusyRetry = std::chrono::milliseconds(50);

}  // namespace

void AddDataOption(CLI::App* cmd, std::string* dir) {
  *dir = kDefaultDataDir;
  cmd->add_option("--data", *dir, "store directory")->capture_default_str();
}

std::unique_ptr<Store> OpenStore(const std::string& dir, bool create,
                                 const std::string& profile_file) {
  Options options;
  options.create_if_missing = create;
  if (!profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return nullptr;
    }
    options.profile = std::move(*p);
  }
  if (!create && !std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
    std::cerr << "eventfold: no store at " << dir << " (ingest creates one)\n";
    return nullptr;
  }
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  // `feed --follow` holds the store for a moment at a time: wait it out.
  // A store held for good (a running `serve`) still fails, after kBusyWait.
  for (auto waited = std::chrono::milliseconds(0); store.status().IsBusy() && waited < kBusyWait;
       waited += kBusyRetry) {
    std::this_thread::sleep_for(kBusyRetry);
    store = Store::Open(dir, options);
  }
  if (!store.ok()) {
    std::cerr << "eventfold: " << store.status().ToString() << "\n";
    return nullptr;
  }
  return std::move(*store);
}

}  // namespace eventfold::cli

namespace eventfold::cli {

void ExplainNoProjection(Store* store, const std::string& entity, const std::string& id) {
  const std::shared_ptr<const Profile> snapshot = store->profile();
  const Profile& profile = *snapshot;
  if (!profile.FindEntity(entity)) {
    std::cerr << "eventfold: profile \"" << profile.name() << "\" has no entity \"" << entity
              << "\"\n";
  } else {
    std::cerr << "eventfold: no events for " << entity << "/" << id << "\n";
  }
  // An unrouted event names no entity; one that mentions the id as a JSON
  // string, with a type of this entity ("receipt.issued") or one the
  // profile does not know, is most likely this entity's.
  const std::string quoted = "\"" + id + "\"";
  std::map<std::string, uint64_t> types;
  uint64_t n = 0;
  Status st = store->maintenance().ListUnrouted(nullptr, [&](const UnroutedEvent& e) {
    if (e.body.find(quoted) != std::string::npos &&
        (e.type.starts_with(entity + ".") || !profile.Find(e.type))) {
      ++types[e.type];
      ++n;
    }
    return true;
  });
  if (!st.ok() || n == 0) return;
  std::cerr << "eventfold: but " << n << " stored event" << (n == 1 ? "" : "s") << " naming \""
            << id << "\" " << (n == 1 ? "is" : "are") << " unrouted under profile \""
            << profile.name() << "\" (";
  const char* sep = "";
  for (const auto& [type, count] : types) {
    std::cerr << sep << type << " " << count;
    sep = ", ";
  }
  std::cerr << "): `eventfold unrouted --list` shows them; a replay with a profile that routes "
               "them projects them\n";
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

}  // namespace eventfold::cli
