// eventfold demo [--data DIR] [--seed N] [--receipts N] [--products N] [--fresh]
//
// Generates a simulated ReceiptRoller delivery history (tools/history.h),
// ingests it into the store the way a receiver would, and summarizes what
// the store made of it, in a few readable lines.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "tools/cli_common.h"
#include "tools/history.h"

namespace eventfold::cli {
namespace {

// Deliveries per IngestBatch: one atomic write and one sync each.
constexpr size_t kBatch = 500;

struct DemoArgs {
  std::string dir;
  uint64_t seed = 42;
  int receipts = 200;
  int products = 50;
  bool fresh = false;
};

// 1234567 -> "1,234,567"
std::string Commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// Removes `dir` for --fresh, but only when it is an eventfold store (or
// absent): never a directory that merely happens to be named like one.
bool RemoveStore(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return true;
  if (!fs::is_directory(st) || !fs::is_regular_file(fs::path(dir) / "CURRENT", ec)) {
    std::cerr << "eventfold: --fresh: " << dir
              << " is not an eventfold store (no CURRENT file); refusing to delete it\n";
    return false;
  }
  fs::remove_all(dir, ec);
  if (ec) {
    std::cerr << "eventfold: --fresh: cannot remove " << dir << ": " << ec.message() << "\n";
    return false;
  }
  return true;
}

// "impossible transition refunded -> issued" -> "impossible transition".
std::string ReasonKind(const std::string& reason) {
  for (const char* kind : {"impossible transition", "stale version"}) {
    if (reason.rfind(kind, 0) == 0) return kind;
  }
  return reason;
}

struct Tally {
  uint64_t accepted = 0, duplicate = 0, conflict = 0, invalid = 0, other = 0;
};

struct Example {
  std::string entity, id, reason;
  int score = -1;  // higher is a better illustration
};

int Run(const DemoArgs& a) {
  sim::HistoryOptions ho;
  ho.seed = a.seed;
  ho.receipts = a.receipts;
  ho.products = a.products;
  const sim::History history = sim::GenerateHistory(ho);

  if (a.fresh && !RemoveStore(a.dir)) return kExitError;
  std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/true);
  if (!store) return kExitError;

  // Ingest in arrival order, a batch at a time, as a receiver would.
  Tally t;
  const auto start = std::chrono::steady_clock::now();
  for (size_t begin = 0; begin < history.deliveries.size(); begin += kBatch) {
    const size_t end = std::min(history.deliveries.size(), begin + kBatch);
    const std::vector<Delivery> batch(history.deliveries.begin() + static_cast<ptrdiff_t>(begin),
                                      history.deliveries.begin() + static_cast<ptrdiff_t>(end));
    for (const IngestResult& r : store->IngestBatch(batch)) {
      switch (r.outcome) {
        case Outcome::kAccepted: ++t.accepted; break;
        case Outcome::kDuplicate: ++t.duplicate; break;
        case Outcome::kConflict: ++t.conflict; break;
        case Outcome::kInvalid: ++t.invalid; break;
        case Outcome::kStorageError:
          std::cerr << "eventfold: " << r.message << "\n";
          return kExitError;
        default: ++t.other; break;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // What the store made of it: projections by state, rejections by reason.
  std::map<std::string, std::map<std::string, uint64_t>> states;
  std::map<std::string, uint64_t> entities;
  std::map<std::string, uint64_t> reasons;
  uint64_t rejected = 0;
  Example example;
  Status st = store->List("", [&](const Projection& p) {
    ++entities[p.entity];
    ++states[p.entity][p.state];
    for (const Rejection& r : p.rejected) {
      ++rejected;
      ++reasons[ReasonKind(r.reason)];
      // Prefer the classic: a receipt issued again after its refund.
      const int score = (p.entity == "receipt" ? 2 : 0) +
                        (r.reason.find("refunded -> issued") != std::string::npos ? 4 : 0) +
                        (r.reason.rfind("impossible", 0) == 0 ? 1 : 0);
      if (score > example.score) example = Example{p.entity, p.id, r.reason, score};
    }
    if (example.entity.empty() && p.entity == "receipt") {
      example = Example{p.entity, p.id, "", -1};
    }
    return true;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }

  const sim::HistoryStats& s = history.stats;
  std::ostringstream out;
  out << "eventfold demo: a ReceiptRoller delivery history (seed " << a.seed << ")\n";
  out << "  sender: " << Commas(history.events.size()) << " events (" << Commas(s.receipts)
      << " receipts, " << Commas(s.products) << " products, " << Commas(s.inventory_events)
      << " inventory updates) sent as " << Commas(history.deliveries.size())
      << " deliveries: " << Commas(s.retries) << " retries, shuffled, " << s.late << " late, "
      << history.malformed << " malformed, " << history.conflicts << " conflicting\n";
  const double rate = seconds > 0 ? static_cast<double>(history.deliveries.size()) / seconds : 0;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  out << "  ingest: " << Commas(t.accepted) << " accepted, " << Commas(t.duplicate)
      << " duplicate, " << Commas(t.conflict) << " conflict (409), " << Commas(t.invalid)
      << " invalid (400)";
  if (t.other) out << ", " << Commas(t.other) << " other";
  out << " in " << secs << " s (" << Commas(static_cast<uint64_t>(rate + 0.5))
      << " deliveries/s, each batch synced)\n";
  if (t.accepted == 0 && t.duplicate > 0) {
    out << "  again:  all " << Commas(t.duplicate)
        << " valid deliveries were already stored: all duplicates, nothing changed "
           "(ingest is idempotent)\n";
  }
  out << "  store:  " << a.dir << "\n";

  // Entities in profile order; states in the order the transitions reach them.
  out << "  entities:";
  bool first_entity = true;
  for (const EntityType& type : store->profile().entities()) {
    auto it = states.find(type.name);
    if (it == states.end()) continue;
    std::vector<std::string> order;
    for (const Transition& tr : type.transitions) {
      if (std::find(order.begin(), order.end(), tr.to) == order.end()) order.push_back(tr.to);
    }
    for (const auto& [state, n] : it->second) {
      if (std::find(order.begin(), order.end(), state) == order.end()) order.push_back(state);
    }
    out << (first_entity ? " " : " \u00b7 ") << type.name << " " << Commas(entities[type.name])
        << " (";
    bool first_state = true;
    for (const std::string& state : order) {
      auto n = it->second.find(state);
      if (n == it->second.end()) continue;
      out << (first_state ? "" : ", ") << state << " " << Commas(n->second);
      first_state = false;
    }
    out << ")";
    first_entity = false;
  }
  if (first_entity) out << " none";
  out << "\n";

  out << "  rejected: " << Commas(rejected) << " events";
  if (rejected > 0) {
    out << " (";
    bool first = true;
    for (const auto& [kind, n] : reasons) {
      out << (first ? "" : ", ") << kind << " " << Commas(n);
      first = false;
    }
    out << "), e.g. " << example.entity << " " << example.id << ": " << example.reason;
  }
  out << "\n";
  if (!example.entity.empty()) {
    out << "  try:  eventfold show --data " << a.dir << " " << example.entity << " " << example.id
        << "\n";
    out << "        eventfold log --data " << a.dir << " " << example.entity << " " << example.id
        << "\n";
  }
  std::cout << out.str() << std::flush;
  return kExitOk;
}

}  // namespace

void AddDemoCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "demo", "ingest a simulated ReceiptRoller delivery history and summarize the result");
  auto a = std::make_shared<DemoArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--seed", a->seed, "seed of the simulated history")->capture_default_str();
  cmd->add_option("--receipts", a->receipts, "receipts the sender issues")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--products", a->products, "products the sender creates")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--fresh", a->fresh, "delete the store at --data first (only if it is one)");
  cmd->callback([=] { *action = [=] { return Run(*a); }; });
}

}  // namespace eventfold::cli
