// `eventfold ingest FILE`, measured from outside as a user runs it: the
// built command (durable: each 1000 lines one write, synced before they are
// reported) on a history file the bench writes from its own pool, into
// a new store, `rounds` times (the median is recorded). The time is the
// whole command's (start, create, ingest, close); the CPU is the child's
// user + system time (getrusage). Each round is followed by its baseline in
// the same minute: raw LevelDB writing the same number of events' bytes into
// a new store, 1000 to a synced write from one thread (RawFileRun), since
// this host's speed moves by a quarter within the hour.

#include <sys/resource.h>

#include <algorithm>
#include <cinttypes>
#include <fstream>
#include <vector>

#include "bench/driver/driver.h"

namespace eventfold::benchdrv {
namespace {

double ChildCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The number after "\"key\":" in the command's JSON summary.
std::optional<uint64_t> SummaryField(const std::string& out, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = out.rfind(needle);
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(out.c_str() + at + needle.size(), nullptr, 10);
}

}  // namespace

void RunFileIngestFigure(Context& ctx) {
  const Config& c = ctx.config;
  if (!c.Runs("file")) return;
  Results& res = ctx.results;
  if (c.cli.empty() || !fs::exists(c.cli)) {
    Log("eventfold ingest FILE: skipped: no eventfold command (build eventfold-cli, or --cli)");
    res.notes["file_ingest"] = "skipped: no eventfold command";
    return;
  }
  const uint64_t lines = std::min<uint64_t>(c.file_lines, ctx.pool.bodies.size());
  const fs::path file = c.scratch / "history.ndjson";
  {
    std::ofstream out(file, std::ios::binary);
    for (uint64_t i = 0; i < lines; ++i) {
      const std::string& body = ctx.pool.bodies[i];
      if (body.find('\n') != std::string::npos) Die("history file: a body spans lines");
      out << body << '\n';
    }
    if (!out) Die("cannot write " + file.string());
  }
  // Like the throughput pairs, `rounds` runs, each into a new store; the
  // median is recorded and every round kept, because the machine is noisy.
  const fs::path dir = c.scratch / "run-file-ingest";
  std::error_code ec;
  struct Round {
    double seconds = 0, cpu = 0;
  };
  std::vector<Round> rounds;
  std::vector<double> rates;  // lines a second, in the order run
  std::vector<Throughput> raw_rounds;
  for (int round = 0; round < std::max(1, c.rounds); ++round) {
    fs::remove_all(dir, ec);
    const double cpu0 = ChildCpuSeconds();
    const auto start = SteadyClock::now();
    int code = 0;
    const std::string out = RunCommand(
        "'" + c.cli + "' ingest --data '" + dir.string() + "' '" + file.string() + "'", &code);
    Round r;
    r.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    r.cpu = ChildCpuSeconds() - cpu0;
    const std::optional<uint64_t> accepted = SummaryField(out, "accepted");
    if (code != 0 || !accepted || *accepted != lines) {
      res.notes["file_ingest_errors"] = "exit " + std::to_string(code) + ", accepted " +
                                        (accepted ? std::to_string(*accepted) : "?") + " of " +
                                        std::to_string(lines) + ": " + out;
      Log("eventfold ingest FILE failed: %s", res.notes["file_ingest_errors"].c_str());
      return;
    }
    rates.push_back(static_cast<double>(lines) / r.seconds);
    rounds.push_back(r);
    raw_rounds.push_back(RawFileRun(ctx, lines, 1000));
    if (raw_rounds.back().errors > 0) {
      Die("raw LevelDB baseline of the file figure: a write failed");
    }
  }
  std::sort(rounds.begin(), rounds.end(),
            [](const Round& a, const Round& b) { return a.seconds < b.seconds; });
  const Round& median = rounds[rounds.size() / 2];
  const double n = static_cast<double>(lines);
  res.Set("file_ingest_lps", n / median.seconds);
  res.Set("file_ingest_lines", n);
  res.Set("file_ingest_seconds", median.seconds);
  res.Set("file_ingest_cpu_us_per_line", median.cpu * 1e6 / n);
  res.notes["file_ingest_command"] = "eventfold ingest --data DIR FILE";
  RecordRounds(res, "raw_leveldb_file", std::move(raw_rounds));
  if (rounds.size() > 1) res.notes["file_ingest_lps_rounds"] = JoinRates(rates);
  Log("eventfold ingest FILE: %" PRIu64 " lines in %.2fs: %.0f lines/s, %.1f us CPU/line%s", lines,
      median.seconds, n / median.seconds, median.cpu * 1e6 / n, MedianOf(rates).c_str());
  fs::remove_all(dir, ec);
  fs::remove(file, ec);
}

}  // namespace eventfold::benchdrv
