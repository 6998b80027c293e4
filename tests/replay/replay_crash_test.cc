// Crash during replay: a child process rebuilds a store on a real directory
// and is SIGKILLed at a seeded random moment — before its rebuild starts,
// while it builds the new generation, around the switch, while it drops the
// old generation. After each kill the store must open, serve exactly what it
// served before (the old generation, or the completed new one), verify clean,
// hold no key of any family but the live ones, have no rebuild marker
// left, and rebuild again. With a profile change the store is wholly under
// the old profile or wholly under the new one, never a mix.
//
// EVENTFOLD_CRASH_ITERATIONS sets the kills per test (default 20);
// EVENTFOLD_TEST_SEED replays a run.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/fork_child.h"
#include "tests/common/invoice_profile.h"
#include "tests/common/own_thread_env.h"
#include "tests/common/raw_generations.h"
#include "tests/common/test_seed.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold {
namespace {

using storage_test::TestSeed;
using SteadyClock = std::chrono::steady_clock;

using test_util::kInvoiceProfile;

// A scratch directory for a store on a real file system, removed (with its
// ".verify" sibling) afterwards. A SIGKILL keeps what the process wrote
// (the page cache survives it; only a power cut needs syncs), so a tmpfs
// such as /dev/shm serves as well as a disk and spares the syncs: it is
// used when writable. EVENTFOLD_CRASH_DIR names another parent directory.
class CrashDir {
 public:
  CrashDir() {
    static std::atomic<int> counter{0};
    path_ = (Base() / ("eventfold-crash-" + std::to_string(::getpid()) + "-" +
                       std::to_string(counter.fetch_add(1))))
                .string();
  }
  ~CrashDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::remove_all(path_ + ".verify", ec);
    std::filesystem::remove_all(path_ + ".rebuild", ec);
  }
  CrashDir(const CrashDir&) = delete;
  CrashDir& operator=(const CrashDir&) = delete;
  const std::string& path() const { return path_; }

  static std::filesystem::path Base() {
    if (const char* env = std::getenv("EVENTFOLD_CRASH_DIR"); env && *env) return env;
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) {
      return "/dev/shm";
    }
    return std::filesystem::temp_directory_path();
  }

 private:
  std::string path_;
};

int Iterations() { return static_cast<int>(test_util::EnvCount("EVENTFOLD_CRASH_ITERATIONS", 20)); }

using test_util::OwnThreadEnv;

// How far a child got, as it reported through its pipe.
enum Mark : char {
  kOpened = 'o',
  kProgress = 'p',  // a progress report (the last comes when the build is done)
  kRebuilt = 'r',   // Rebuild returned OK
  kOpenFailed = 'x',
  kRebuildFailed = 'f',
};

void Note(int fd, Mark m) {
  const char c = m;
  [[maybe_unused]] ssize_t n = ::write(fd, &c, 1);
}

// The child: opens the store, rebuilds it (to `target` when set), exits.
// Nothing here touches gtest; it leaves with _exit.
[[noreturn]] void RunChild(const std::string& dir, const std::string& target_json, int fd) {
  {
    OwnThreadEnv env;
    Options o;
    o.env = &env;
    o.create_if_missing = false;
    o.durability = Durability::kBuffered;
    std::optional<Profile> target;
    if (!target_json.empty()) {
      Result<Profile> p = Profile::FromJson(target_json);
      if (!p.ok()) _exit(5);
      target = std::move(*p);
    }
    Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
    if (!store.ok()) {
      Note(fd, kOpenFailed);
      _exit(3);
    }
    Note(fd, kOpened);
    RebuildOptions ro;
    ro.profile = target ? &*target : nullptr;
    ro.threads = 2;
    ro.progress = [fd](const RebuildProgress&) { Note(fd, kProgress); };
    Result<RebuildSummary> r = (*store)->maintenance().Rebuild(ro);
    Note(fd, r.ok() ? kRebuilt : kRebuildFailed);
    _exit(r.ok() ? 0 : 4);
  }
}

struct ChildRun {
  bool killed = false;          // SIGKILLed by us (else it exited by itself)
  int exit_code = -1;           // when it exited
  std::string marks;            // what it reported
  double open_seconds = -1;     // from fork to its store being open (-1: never)
  double rebuild_seconds = -1;  // from then to its end
};

// Forks a child rebuilding `dir` (to the profile `target_json` when not
// empty). Once the child reports its store open, SIGKILLs it after
// `kill_after` seconds unless it ends first; never when kill_after < 0.
ChildRun RunAndMaybeKill(const std::string& dir, const std::string& target_json,
                         double kill_after) {
  ChildRun run;
  const auto start = SteadyClock::now();
  const test_util::ForkedChild child =
      test_util::ForkWithPipe([&](int to_parent) { RunChild(dir, target_json, to_parent); });
  if (child.pid < 0) return run;
  const pid_t pid = child.pid;
  const int from_child = child.from_child;
  ::fcntl(from_child, F_SETFL, ::fcntl(from_child, F_GETFL) | O_NONBLOCK);
  auto drain = [&] {
    char buf[4096];
    for (ssize_t n; (n = ::read(from_child, buf, sizeof(buf))) > 0;) run.marks.append(buf, n);
  };
  std::optional<SteadyClock::time_point> opened;
  int status = 0;
  for (;;) {
    drain();
    if (!opened && run.marks.find(kOpened) != std::string::npos) opened = SteadyClock::now();
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const auto now = SteadyClock::now();
    if (kill_after >= 0 && opened && now >= *opened + std::chrono::duration<double>(kill_after)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    if (now - start > std::chrono::seconds(120)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "the child hung; marks " << run.marks;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const auto end = SteadyClock::now();
  drain();
  ::close(from_child);
  run.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (opened) {
    run.open_seconds = std::chrono::duration<double>(*opened - start).count();
    run.rebuild_seconds = std::chrono::duration<double>(end - *opened).count();
  }
  return run;
}

// When to kill, after the child's store is open: half the time anywhere in
// a rebuild's duration, half the time in its last quarter and a little
// past it (the catch-up, the switch, the drop of the old generation).
double KillDelay(std::mt19937_64& rng, int iteration, double rebuild_seconds) {
  if (iteration % 2 == 0) {
    return std::uniform_real_distribution<double>(0, rebuild_seconds)(rng);
  }
  return std::uniform_real_distribution<double>(0.75 * rebuild_seconds,
                                                1.05 * rebuild_seconds)(rng);
}

std::unique_ptr<Store> MustOpen(const std::string& dir, const Options& o = Options()) {
  Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string ListAll(Store* store) {
  std::string out;
  Status st = store->List("", [&](const Projection& p) {
    out += ProjectionToJson(p);
    out += '\n';
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// What the raw LevelDB of a closed store holds about generations.
struct RawState {
  uint32_t live = 0;                   // m/generation
  uint32_t live_logs = 0;              // m/log_generation
  bool marker = false;                 // m/rebuild present
  std::map<uint32_t, uint64_t> other;  // keys of families not live, by gen
  uint64_t live_keys = 0;
};

RawState ReadRaw(const std::string& dir) {
  RawState out;
  leveldb::Options lo;
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(lo, dir, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return out;
  std::unique_ptr<leveldb::DB> db(raw);
  const storage::Generations live = test_util::RawGenerations(db.get());
  out.live = live.projections;
  out.live_logs = live.logs;
  std::string value;
  out.marker = db->Get(leveldb::ReadOptions(), storage::MetaKey("rebuild"), &value).ok();
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  const std::string family(storage::kGenerationPrefix);
  for (it->Seek(family); it->Valid() && it->key().starts_with(family); it->Next()) {
    const std::optional<storage::GenerationKeyView> g =
        storage::ParseGenerationKey(std::string_view(it->key().data(), it->key().size()));
    if (!g || g->rest.size() < 2) {
      ++out.other[UINT32_MAX];
      continue;
    }
    if (storage::IsLiveFamily(live, g->gen, g->rest.substr(0, 2)))
      ++out.live_keys;
    else
      ++out.other[g->gen];
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

// A ~30k-event store on disk (kBuffered: this is not a durability test of
// ingest). With `invoices`, some events only profile B routes.
void Populate(const std::string& dir, uint64_t seed, bool invoices) {
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 13000;
  ho.products = 2700;
  ho.duplicate_rate = 0.05;
  ho.malformed = 3;
  ho.conflicts = 3;
  ho.target_body_bytes = 250;
  const sim::History h = sim::GenerateHistory(ho);
  Options o;
  o.durability = Durability::kBuffered;
  std::unique_ptr<Store> store = MustOpen(dir, o);
  ASSERT_TRUE(store);
  std::vector<Delivery> deliveries = h.deliveries;
  if (invoices) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 2000; ++i) {
      const std::string n = std::to_string(i);
      deliveries.push_back(Delivery{
          {},
          storage_test::Body(
              "evt_inv_" + n, "invoice.paid",
              FormatTimestamp(1795000000000000 + static_cast<int64_t>(rng() % 86400000000ull)),
              "{\"invoice_id\":\"inv_" + std::to_string(i % 1500) +
                  "\",\"total\":" + std::to_string(rng() % 1000) + "}")});
    }
    sim::Shuffle(&deliveries, seed + 1);
  }
  for (size_t i = 0; i < deliveries.size(); i += 2000) {
    std::vector<Delivery> batch(
        deliveries.begin() + static_cast<ptrdiff_t>(i),
        deliveries.begin() + static_cast<ptrdiff_t>(std::min(deliveries.size(), i + 2000)));
    store->IngestBatch(batch);
  }
  const Counters c = store->counters();
  std::printf("store: %llu events accepted (%llu unrouted)\n",
              static_cast<unsigned long long>(c.accepted),
              static_cast<unsigned long long>(c.unrouted));
  EXPECT_GT(c.accepted, 28000u);
  EXPECT_EQ(c.unrouted, invoices ? 2000u : 0u);
}

// The listing a completed rebuild to `target` gives, computed on a copy.
std::string ListingAfterRebuild(const std::string& dir, const Profile& target) {
  CrashDir copy;
  std::filesystem::copy(dir, copy.path(), std::filesystem::copy_options::recursive);
  std::unique_ptr<Store> store = MustOpen(copy.path());
  if (!store) return "";
  Result<RebuildSummary> r = store->maintenance().Rebuild(&target);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return ListAll(store.get());
}

struct Tally {
  int building = 0;      // killed before the build's last progress report
  int after_build = 0;   // killed after it, before the switch
  int after_switch = 0;  // killed after the switch (dropping the old generation)
  int completed = 0;     // not killed: the rebuild finished
};

struct AfterCrash {
  std::string profile;  // the live profile's name
  uint32_t generation = 0;
};

// After a kill: everything the crash contract promises. `expected` maps a
// profile name to the listing the store must serve under it.
AfterCrash CheckAfterCrash(const std::string& dir,
                           const std::map<std::string, std::string>& expected,
                           uint32_t gen_before) {
  AfterCrash out;
  {
    std::unique_ptr<Store> store = MustOpen(dir);
    if (!store) return out;
    EXPECT_FALSE(std::filesystem::exists(dir + ".rebuild"))
        << "the interrupted rebuild's sort runs are still there after Open";
    const StoreStats stats = store->Stats();
    out.profile = stats.profile_name;
    out.generation = stats.generation;
    auto it = expected.find(out.profile);
    EXPECT_NE(it, expected.end()) << "unexpected profile " << out.profile;
    if (it != expected.end()) {
      EXPECT_TRUE(ListAll(store.get()) == it->second)
          << "the listing after the crash differs from the one under " << out.profile;
    }
    EXPECT_TRUE(stats.generation == gen_before || stats.generation == gen_before + 1)
        << "generation " << stats.generation << " after a rebuild from " << gen_before;
    Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (v.ok()) {
      EXPECT_EQ(v->differences, 0u);
    }
  }
  const RawState raw = ReadRaw(dir);
  EXPECT_EQ(raw.live, out.generation);
  EXPECT_FALSE(raw.marker) << "m/rebuild is still there after Open";
  EXPECT_GT(raw.live_keys, 0u);
  for (const auto& [gen, keys] : raw.other) {
    ADD_FAILURE() << keys << " keys of generation " << gen << " remain beside live generation "
                  << raw.live;
  }
  return out;
}

// A subsequent rebuild (to `profile`) succeeds and lists `listing`; returns
// the generation after it.
uint32_t RebuildAgain(const std::string& dir, const Profile& profile, const std::string& listing) {
  std::unique_ptr<Store> store = MustOpen(dir);
  if (!store) return 0;
  Result<RebuildSummary> r = store->maintenance().Rebuild(&profile);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(store->Stats().profile_name, profile.name());
  EXPECT_TRUE(ListAll(store.get()) == listing) << "the rebuild after the crash lists otherwise";
  return store->Stats().generation;
}

void Record(const ChildRun& run, bool switched, Tally* t) {
  EXPECT_NE(run.marks.find(kOpened), std::string::npos)
      << "killed before its store was open; marks " << run.marks;
  EXPECT_EQ(run.marks.find(kOpenFailed), std::string::npos);
  EXPECT_EQ(run.marks.find(kRebuildFailed), std::string::npos);
  if (!run.killed) {
    EXPECT_EQ(run.exit_code, 0) << "the child failed on its own; marks " << run.marks;
    EXPECT_TRUE(switched) << "a rebuild that returned OK did not switch";
    ++t->completed;
  } else if (switched) {
    ++t->after_switch;
  } else if (run.marks.find(kProgress) != std::string::npos) {
    ++t->after_build;
  } else {
    ++t->building;
  }
}

void PrintTally(const char* name, const Tally& t, const ChildRun& full, double seconds) {
  std::printf(
      "%s: child open %.3f s, rebuild %.3f s; kills while building %d, after the "
      "build %d, after the switch %d; not killed %d; %.1f s in all\n",
      name, full.open_seconds, full.rebuild_seconds, t.building, t.after_build, t.after_switch,
      t.completed, seconds);
}

// Same profile: whatever the kill interrupts, the content is the same.
TEST(ReplayCrash, KilledRebuildLeavesTheStoreConsistent) {
  const uint64_t seed = TestSeed("ReplayCrash.KilledRebuildLeavesTheStoreConsistent", 4242);
  const auto start = SteadyClock::now();
  const int iterations = Iterations();
  const Profile& a = Profile::ReceiptRoller();
  CrashDir dir;
  std::printf("store directory %s\n", dir.path().c_str());
  Populate(dir.path(), seed, /*invoices=*/false);
  if (::testing::Test::HasFatalFailure()) return;
  std::string listing;
  uint32_t gen = 0;
  {
    std::unique_ptr<Store> store = MustOpen(dir.path());
    ASSERT_TRUE(store);
    listing = ListAll(store.get());
    gen = store->Stats().generation;
  }
  const std::map<std::string, std::string> expected = {{a.name(), listing}};

  // Calibrate: one full run, not killed.
  const ChildRun full = RunAndMaybeKill(dir.path(), "", -1);
  ASSERT_FALSE(full.killed);
  ASSERT_EQ(full.exit_code, 0) << full.marks;
  ASSERT_NE(full.marks.find(kRebuilt), std::string::npos);
  ASSERT_GT(full.rebuild_seconds, 0);
  gen = CheckAfterCrash(dir.path(), expected, gen).generation;

  std::mt19937_64 rng(seed);
  Tally tally;
  for (int i = 0; i < iterations; ++i) {
    const double delay = KillDelay(rng, i, full.rebuild_seconds);
    SCOPED_TRACE("iteration " + std::to_string(i) + ", kill " + std::to_string(delay) +
                 " s after open (seed " + std::to_string(seed) + ")");
    const ChildRun run = RunAndMaybeKill(dir.path(), "", delay);
    const AfterCrash after = CheckAfterCrash(dir.path(), expected, gen);
    Record(run, after.generation != gen, &tally);
    if (::testing::Test::HasFailure()) break;
    gen = RebuildAgain(dir.path(), a, listing);
    if (::testing::Test::HasFailure()) break;
  }
  PrintTally("same profile", tally, full,
             std::chrono::duration<double>(SteadyClock::now() - start).count());
  if (iterations >= 10) {
    EXPECT_GT(tally.building + tally.after_build + tally.after_switch, 0)
        << "no kill landed inside a rebuild";
  }
}

// A profile change killed mid-way: the store is wholly under A (the old
// generation, B's events unrouted) or wholly under B (the switch happened).
TEST(ReplayCrash, KilledProfileChangeIsAllOrNothing) {
  const uint64_t seed = TestSeed("ReplayCrash.KilledProfileChangeIsAllOrNothing", 777);
  const auto start = SteadyClock::now();
  const int iterations = std::max(1, Iterations() / 2);
  Result<Profile> b = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const Profile& a = Profile::ReceiptRoller();
  CrashDir dir;
  Populate(dir.path(), seed, /*invoices=*/true);
  if (::testing::Test::HasFatalFailure()) return;
  std::map<std::string, std::string> expected;
  uint32_t gen = 0;
  {
    std::unique_ptr<Store> store = MustOpen(dir.path());
    ASSERT_TRUE(store);
    expected[a.name()] = ListAll(store.get());
    gen = store->Stats().generation;
  }
  expected[b->name()] = ListingAfterRebuild(dir.path(), *b);
  ASSERT_NE(expected[a.name()], expected[b->name()]);
  ASSERT_NE(expected[b->name()].find("\"entity\":\"invoice\""), std::string::npos);
  ASSERT_EQ(expected[a.name()].find("\"entity\":\"invoice\""), std::string::npos);

  const std::string target = b->ToJson();
  const ChildRun full = RunAndMaybeKill(dir.path(), target, -1);
  ASSERT_FALSE(full.killed);
  ASSERT_EQ(full.exit_code, 0) << full.marks;
  ASSERT_GT(full.rebuild_seconds, 0);
  const AfterCrash done = CheckAfterCrash(dir.path(), expected, gen);
  EXPECT_EQ(done.profile, b->name());
  gen = RebuildAgain(dir.path(), a, expected[a.name()]);  // back to A

  std::mt19937_64 rng(seed);
  Tally tally;
  for (int i = 0; i < iterations; ++i) {
    const double delay = KillDelay(rng, i, full.rebuild_seconds);
    SCOPED_TRACE("iteration " + std::to_string(i) + ", kill " + std::to_string(delay) +
                 " s after open (seed " + std::to_string(seed) + ")");
    const ChildRun run = RunAndMaybeKill(dir.path(), target, delay);
    const AfterCrash after = CheckAfterCrash(dir.path(), expected, gen);
    EXPECT_EQ(after.profile == b->name(), after.generation == gen + 1)
        << "the profile and the generation disagree on whether the switch happened";
    Record(run, after.generation != gen, &tally);
    if (::testing::Test::HasFailure()) break;
    // A subsequent rebuild succeeds (back to A).
    gen = RebuildAgain(dir.path(), a, expected[a.name()]);
    if (::testing::Test::HasFailure()) break;
  }
  PrintTally("profile change", tally, full,
             std::chrono::duration<double>(SteadyClock::now() - start).count());
}

}  // namespace
}  // namespace eventfold
