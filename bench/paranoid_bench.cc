// eventfold-paranoid-bench: what Options::paranoid_checks costs at ingest.
//
// Ingests the same simulated ReceiptRoller history into fresh stores with
// paranoid checks on and off, alternating (on, off, on, off, ...) so a busy
// machine's drift hits both alike, and prints each run and the medians. A
// small memtable makes LevelDB flush and compact throughout — compactions are
// where the checks cost (every block they read is checksummed). kBuffered by
// default so the disk's sync latency does not hide the difference.
// See docs/RELIABILITY.md.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "tools/history.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace eventfold;
  CLI::App app{"ingest throughput with and without LevelDB's paranoid checks"};
  int receipts = 4000, rounds = 3;
  bool sync = false;
  std::string dir = (std::filesystem::temp_directory_path() / "eventfold-paranoid-bench").string();
  app.add_option("--receipts", receipts, "receipts in the history")->capture_default_str();
  app.add_option("--rounds", rounds, "runs per setting")->capture_default_str();
  app.add_flag("--sync", sync, "Durability::kSync instead of kBuffered");
  app.add_option("--dir", dir, "scratch store directory (removed)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  sim::HistoryOptions ho;
  ho.receipts = receipts;
  ho.products = receipts / 10;
  const sim::History h = sim::GenerateHistory(ho);
  std::vector<double> rate[2];  // [paranoid] deliveries per second
  for (int round = 0; round < rounds; ++round) {
    for (int paranoid : {1, 0}) {
      std::filesystem::remove_all(dir);
      Options o;
      o.durability = sync ? Durability::kSync : Durability::kBuffered;
      o.paranoid_checks = paranoid != 0;
      o.write_buffer_bytes = 256 << 10;
      Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
      if (!store.ok()) {
        std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
        return 2;
      }
      const auto start = std::chrono::steady_clock::now();
      for (const Delivery& d : h.deliveries) (void)(*store)->Ingest(d);
      (void)(*store)->maintenance().Compact();  // the compactions the ingest left behind, too
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rate[paranoid].push_back(static_cast<double>(h.deliveries.size()) / s);
      std::printf("round %d paranoid=%d: %zu deliveries in %.2f s, %.0f/s\n", round, paranoid,
                  h.deliveries.size(), s, rate[paranoid].back());
    }
  }
  std::filesystem::remove_all(dir);
  const double on = Median(rate[1]), off = Median(rate[0]);
  std::printf("median: paranoid on %.0f/s, off %.0f/s, cost %.1f%%\n", on, off,
              100.0 * (off - on) / off);
  return 0;
}
