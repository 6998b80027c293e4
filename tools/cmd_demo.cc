// eventfold demo [--data DIR] [--seed N] [--receipts N] [--products N]
// [--fresh]
//
// The whole story on one machine: generates a simulated ReceiptRoller
// delivery history (tools/history.h), runs the HTTP receiver on a loopback
// port, and has a simulated sender (tools/sender.h) deliver the history to
// it — signing every attempt, retrying 429s with backoff on a compressed
// clock, resending after lost answers, and slipping in forged and
// stale-signed deliveries — then summarizes what happened, in a few lines.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>

#include "eventfold/http_server.h"
#include "eventfold/receiver.h"
#include "tools/cli_common.h"
#include "tools/history.h"
#include "tools/sender.h"

namespace eventfold::cli {
namespace {

// The secret the simulated sender and the receiver share.
constexpr const char* kDemoSecret = "demo-secret-shared-by-sender-and-receiver";
// Concurrent sender connections.
constexpr int kConnections = 16;

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

// `n` and its noun, singular for one: "1 product", "2 products".
std::string Count(uint64_t n, const char* one, const char* many) {
  return Commas(n) + " " + (n == 1 ? one : many);
}

// --fresh: deletes the store at `dir` (DestroyStore: only its own files,
// and never while a Store, `eventfold serve` say, has it open).
bool RemoveStore(const std::string& dir) {
  if (Status st = DestroyStore(dir, Options{}); !st.ok()) {
    // kBusy deletes nothing; the other refusals say what became of the files.
    std::cerr << "eventfold: --fresh: " << st.message() << (st.IsBusy() ? "; nothing deleted" : "")
              << "\n";
    return false;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec) && !ec) {
    std::cerr << "eventfold: --fresh: deleted the store; kept the other files in " << dir << "\n";
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

  // The receiver, as `eventfold serve` runs it, on a loopback port.
  ReceiverOptions ro;
  ro.secrets = {kDemoSecret};
  Result<std::unique_ptr<Receiver>> receiver = Receiver::Make(store.get(), ro);
  if (!receiver.ok()) {
    std::cerr << "eventfold: " << receiver.status().message() << "\n";
    return kExitError;
  }
  HttpServerOptions so;
  so.workers = kConnections + 4;
  HttpServer server(receiver->get(), so);
  if (Status st = server.Start(); !st.ok()) {
    std::cerr << "eventfold: " << st.message() << "\n";
    return kExitError;
  }

  // Every delivery of the history, signed per attempt; a few more that are
  // forged or signed an hour ago; some acknowledgements "lost" on the way
  // back, so the sender sends those events again.
  std::vector<sim::Outgoing> outgoing;
  std::mt19937_64 rng(a.seed);
  for (const Delivery& d : history.deliveries) {
    outgoing.push_back(sim::Outgoing{d, sim::Tamper::kNone, rng() % 20 == 0});
  }
  const size_t tampered = std::min<size_t>(history.events.size(), 5);
  for (size_t i = 0; i < tampered; ++i) {
    const auto at = outgoing.begin() + static_cast<ptrdiff_t>(rng() % (outgoing.size() + 1));
    outgoing.insert(at, sim::Outgoing{Delivery{{}, history.events[i * 7 % history.events.size()]},
                                      i < 3 ? sim::Tamper::kForged : sim::Tamper::kStale});
  }
  sim::SenderOptions sender;
  sender.port = server.port();
  sender.secret = kDemoSecret;
  sender.connections = kConnections;
  sender.seed = a.seed;
  sender.time_scale = 5e-5;  // the sender's 32 hours of retries in about 6 s
  const Counters before = store->counters();
  const sim::SendReport report = sim::Send(outgoing, sender);
  server.Stop();
  const Counters after = store->counters();
  Tally t;
  t.accepted = after.accepted - before.accepted;
  t.duplicate = after.duplicate - before.duplicate;
  t.conflict = after.conflict - before.conflict;
  t.invalid = after.invalid - before.invalid;
  if (after.storage_error > before.storage_error) {
    std::cerr << "eventfold: the store failed to write; see the sender's 503s\n";
    return kExitError;
  }
  const double seconds = report.seconds;

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
  out << "eventfold demo: a simulated ReceiptRoller sending to the receiver on 127.0.0.1:"
      << server.port() << " (seed " << a.seed << ")\n";
  out << "  sender: " << Count(history.events.size(), "event", "events") << " ("
      << Count(s.receipts, "receipt", "receipts") << ", "
      << Count(s.products, "product", "products") << ", "
      << Count(s.inventory_events, "inventory update", "inventory updates") << ") sent as "
      << Count(history.deliveries.size(), "delivery", "deliveries") << ": "
      << Count(s.retries, "retry", "retries") << ", shuffled, " << Commas(s.late) << " late, "
      << Commas(history.malformed) << " malformed, " << Commas(history.conflicts)
      << " conflicting; plus " << Commas(tampered)
      << " forged or stale-signed: " << Commas(outgoing.size()) << " in all\n";
  out << "  http:   " << Count(report.attempts, "attempt", "attempts") << ":";
  for (const auto& [status, n] : report.attempts_by_status) {
    out << " " << (status == 0 ? std::string("lost") : std::to_string(status)) << " x" << Commas(n);
  }
  out << "; " << Commas(report.retries) << " retried with backoff (" << Commas(report.lost_acks)
      << " after a lost answer); of the " << Commas(outgoing.size()) << ", "
      << Commas(report.delivered) << " delivered (2xx), "
      << Count(report.dead_letters, "dead letter", "dead letters")
      << " (4xx: malformed, conflicting, forged, stale)\n";
  char latency[96];
  std::snprintf(latency, sizeof latency, "p50 %.2f ms, p99 %.2f ms",
                sim::Quantile(report.latencies, 0.5) * 1e3,
                sim::Quantile(report.latencies, 0.99) * 1e3);
  out << "  acks:   " << latency << " (each 200 only after the event is synced to disk)\n";
  const double rate = seconds > 0 ? static_cast<double>(history.deliveries.size()) / seconds : 0;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  out << "  ingest: " << Commas(t.accepted) << " accepted, " << Commas(t.duplicate)
      << " duplicate, " << Commas(t.conflict) << " conflict (409), " << Commas(t.invalid)
      << " invalid (400)";
  if (t.other) out << ", " << Commas(t.other) << " other";
  out << " in " << secs << " s (" << Commas(static_cast<uint64_t>(rate + 0.5))
      << " deliveries/s)\n";
  if (report.attempts_by_status.count(401)) {
    out << "  refused: " << Commas(report.attempts_by_status.at(401))
        << " unsigned or badly signed deliveries (401), kept for: eventfold refused --data "
        << a.dir << "\n";
  }
  if (t.accepted == 0 && t.duplicate > 0) {
    out << "  again:  all " << Commas(t.duplicate)
        << " valid deliveries were already stored: all duplicates, nothing "
           "changed "
           "(ingest is idempotent)\n";
  }
  out << "  store:  " << a.dir << "\n";

  // Entities in profile order; states in the order the transitions reach them.
  out << "  entities:";
  bool first_entity = true;
  const std::shared_ptr<const Profile> profile = store->profile();
  for (const EntityType& type : profile->entities()) {
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
  // An entity in state none has events, none of which could apply: say why
  // there can be more receipts than the sender issued.
  uint64_t receipts_none = 0;
  if (auto it = states.find("receipt"); it != states.end() && it->second.count("none")) {
    receipts_none = it->second.at("none");
  }
  if (receipts_none > 0) {
    out << "  note:   state none: an entity known only from events that could not apply (e.g. "
           "a refund of a receipt never issued); "
        << Commas(entities["receipt"])
        << " receipts = " << Commas(entities["receipt"] - receipts_none)
        << " with an applied event + " << Commas(receipts_none) << " in state none\n";
  }

  out << "  rejected: " << Count(rejected, "event", "events");
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
  auto* cmd = app->add_subcommand("demo",
                                  "ingest a simulated ReceiptRoller delivery "
                                  "history and summarize the result");
  auto a = std::make_shared<DemoArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--seed", a->seed, "seed of the simulated history")->capture_default_str();
  cmd->add_option("--receipts", a->receipts, "receipts the sender issues")
      ->capture_default_str()
      ->check(WithinRange(0, 10000000));
  cmd->add_option("--products", a->products, "products the sender creates")
      ->capture_default_str()
      ->check(WithinRange(0, 10000000));
  cmd->add_flag("--fresh", a->fresh,
                "delete the store at --data first (only its own files; refused while in use)");
  cmd->callback([=] { *action = [=] { return Run(*a); }; });
}

}  // namespace eventfold::cli
