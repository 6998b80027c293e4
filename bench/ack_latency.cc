// eventfold-ack-latency: acknowledgement latency of the signed HTTP receiver
// at a steady delivery rate, on loopback.
//
// Runs a store (default durability: every 200 is synced), the Receiver and
// the HTTP server in this process, and the simulated ReceiptRoller sender
// pacing signed deliveries at --rate per second over --connections
// keep-alive connections. Latency is measured from each delivery's scheduled
// send time, so a stalled receiver cannot hide (no coordinated omission).
//
//   eventfold-ack-latency [--rate 1000] [--seconds 10] [--connections 16]
//                         [--dir DIR] [--json FILE]

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/json_writer.h"
#include "eventfold/http_server.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "tools/history.h"
#include "tools/sender.h"

int main(int argc, char** argv) {
  using namespace eventfold;
  double rate = 1000;
  double seconds = 10;
  int connections = 16;
  std::string dir;
  std::string json_out;
  CLI::App app{"acknowledgement latency at a steady signed delivery rate"};
  app.add_option("--rate", rate, "deliveries per second")->capture_default_str();
  app.add_option("--seconds", seconds, "how long to send")->capture_default_str();
  app.add_option("--connections", connections, "sender connections")->capture_default_str();
  app.add_option("--dir", dir, "store directory (default: a fresh temporary one)");
  app.add_option("--json", json_out, "also write the results as JSON here");
  CLI11_PARSE(app, argc, argv);

  const bool temp = dir.empty();
  if (temp) {
    dir = (std::filesystem::temp_directory_path() / ("eventfold-ack-" + std::to_string(::getpid())))
              .string();
  }
  std::filesystem::remove_all(dir);
  Result<std::unique_ptr<Store>> store = Store::Open(dir, Options{});
  if (!store.ok()) {
    std::cerr << store.status().ToString() << "\n";
    return 2;
  }
  const std::string secret = "ack-latency-benchmark-secret";
  ReceiverOptions ro;
  ro.secrets = {secret};
  Result<std::unique_ptr<Receiver>> rx = Receiver::Make(store->get(), ro);
  if (!rx.ok()) {
    std::cerr << rx.status().ToString() << "\n";
    return 2;
  }
  HttpServerOptions so;
  so.workers = connections + 4;
  HttpServer server(rx->get(), so);
  if (Status st = server.Start(); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }

  // Enough distinct events for the whole run: receipts issued and refunded.
  const size_t total = static_cast<size_t>(rate * seconds);
  sim::HistoryOptions ho;
  ho.seed = 7;
  ho.receipts = static_cast<int>(total);
  ho.products = 1;
  ho.duplicate_rate = 0;
  ho.malformed = 0;
  ho.conflicts = 0;
  ho.impossible_rate = 0;
  sim::History history = sim::GenerateHistory(ho);
  std::vector<sim::Outgoing> outgoing;
  for (size_t i = 0; i < total && i < history.events.size(); ++i) {
    outgoing.push_back(sim::Outgoing{Delivery{{}, history.events[i]}});
  }

  sim::SenderOptions sender;
  sender.port = server.port();
  sender.secret = secret;
  sender.connections = connections;
  sender.rate_per_second = rate;
  sim::SendReport r = sim::Send(outgoing, sender);
  server.Stop();

  const double p50 = sim::Quantile(r.latencies, 0.50) * 1e3;
  const double p99 = sim::Quantile(r.latencies, 0.99) * 1e3;
  const double p999 = sim::Quantile(r.latencies, 0.999) * 1e3;
  const double achieved = static_cast<double>(r.attempts) / r.seconds;
  std::printf("deliveries %zu at %.0f/s target, %.0f/s achieved, %d connections\n", outgoing.size(),
              rate, achieved, connections);
  std::printf("statuses:");
  for (const auto& [status, n] : r.attempts_by_status)
    std::printf(" %d:%llu", status, static_cast<unsigned long long>(n));
  std::printf("\nack latency ms: p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", p50, p99, p999,
              sim::Quantile(r.latencies, 1.0) * 1e3);
  if (!json_out.empty()) {
    JsonWriter w;
    w.BeginObject()
        .Key("rate_target")
        .Double(rate)
        .Key("rate_achieved")
        .Double(achieved)
        .Key("deliveries")
        .Uint(outgoing.size())
        .Key("delivered")
        .Uint(r.delivered)
        .Key("connections")
        .Int(connections)
        .Key("p50_ms")
        .Double(p50)
        .Key("p99_ms")
        .Double(p99)
        .Key("p999_ms")
        .Double(p999)
        .EndObject();
    std::ofstream(json_out) << w.str() << "\n";
  }
  rx->reset();
  store->reset();
  if (temp) std::filesystem::remove_all(dir);
  return r.delivered == outgoing.size() ? 0 : 1;
}
