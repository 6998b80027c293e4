// The filters of stored keys (store/absent_filter.h, store/key_filters.cc):
// a filter never forgets a key and rarely guesses one, and a store that
// skips the reads of dedup entries and projections its filters have never
// seen answers every delivery, and holds every projection, as a store
// without filters, through their growth, a reopen, a rebuild into a new
// generation, a re-fold in place and concurrent ingests.

#include "store/absent_filter.h"

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <leveldb/table.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/store.h"
#include "store/store_impl.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

std::string RandomKey(std::mt19937_64& rng) {
  std::string key = "evt_";
  const size_t n = 4 + rng() % 40;
  for (size_t i = 0; i < n; ++i) key += static_cast<char>('!' + rng() % 90);
  return key;
}

TEST(AbsentFilter, NeverForgetsAKeyAndRarelyGuessesOne) {
  const uint64_t seed = TestSeed("AbsentFilter.NeverForgetsAKeyAndRarelyGuessesOne", 3);
  std::mt19937_64 rng(seed);
  for (size_t capacity : {size_t{1}, size_t{100}, size_t{20000}}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    AbsentFilter filter(capacity);
    std::set<std::string> added;
    while (added.size() < capacity) {
      const std::string key = RandomKey(rng);
      filter.Add(key);
      added.insert(key);
    }
    for (const std::string& key : added) ASSERT_TRUE(filter.MayContain(key)) << key;
    size_t guessed = 0, asked = 0;
    while (asked < 20000) {
      const std::string key = RandomKey(rng);
      if (added.count(key)) continue;
      ++asked;
      guessed += filter.MayContain(key);
    }
    // About 1% at capacity (a one-block filter of one key: far less).
    EXPECT_LE(guessed, asked * 3 / 100) << guessed << " of " << asked;
    // A key whose bits were all set already is not counted.
    EXPECT_LE(filter.added(), added.size());
    EXPECT_GE(filter.added(), added.size() * 97 / 100);
  }
}

TEST(AbsentFilter, ConcurrentAddersSeeTheirOwnKeysAndEveryoneSeesThemAfter) {
  const uint64_t seed =
      TestSeed("AbsentFilter.ConcurrentAddersSeeTheirOwnKeysAndEveryoneSeesThemAfter", 5);
  AbsentFilter filter(8000);
  std::vector<std::vector<std::string>> keys(4);
  std::atomic<int> missing{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < keys.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int i = 0; i < 2000; ++i) {
        keys[t].push_back(RandomKey(rng));
        filter.Add(keys[t].back());
        if (!filter.MayContain(keys[t].back())) ++missing;
        (void)filter.MayContain(RandomKey(rng));  // reads beside the others' adds
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(missing.load(), 0);
  for (const auto& list : keys) {
    for (const std::string& key : list) ASSERT_TRUE(filter.MayContain(key)) << key;
  }
}

constexpr int64_t kT0 = 1795000000000000;  // 2026-11-18

std::unique_ptr<Store> OpenStore(leveldb::Env* env, Clock* clock, size_t filter_bytes) {
  Options o;
  o.env = env;
  o.clock = clock;
  o.durability = Durability::kBuffered;
  o.recent_events = 0;  // every redelivery asks the dedup entry
  o.gc_interval_micros = 0;
  o.key_filter_max_bytes = filter_bytes;
  Result<std::unique_ptr<Store>> s = Store::Open("/mem/store", o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

StoreImpl::KeyFilterSizes AwaitFilters(Store* store) {
  return static_cast<StoreImpl*>(store)->AwaitKeyFiltersForTesting();
}

size_t AwaitFilter(Store* store) { return AwaitFilters(store).dedup; }

// Every projection of `store`, in key order, as text.
std::vector<std::string> Projections(Store* store) {
  std::vector<std::string> out;
  Status st = store->List("receipt", [&](const Projection& p) {
    std::string line = p.id + " " + p.state + " applied " + std::to_string(p.applied) +
                       " rejected " + std::to_string(p.rejected.size());
    for (const Field& f : p.fields) line += " " + f.name + "=" + f.json;
    out.push_back(std::move(line));
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// Seeded deliveries drawn with repetition from a pool of receipts and
// conflicting variants (the same event id, another time).
std::vector<std::string> Deliveries(std::mt19937_64& rng, int pool, int count) {
  std::vector<std::string> bodies;
  for (int k = 0; k < count; ++k) {
    const int i = static_cast<int>(rng() % pool);
    const std::string n = std::to_string(i);
    const std::string at = FormatTimestamp(kT0 + i * 1000000LL + (rng() % 8 == 0 ? 1 : 0));
    bodies.push_back(rng() % 3 == 0 ? storage_test::Refunded("evt_r" + n, "r" + n, at)
                                    : storage_test::Issued("evt_i" + n, "r" + n, at));
  }
  return bodies;
}

std::string Describe(const IngestResult& r) {
  std::string out = std::string(OutcomeName(r.outcome)) + " " + r.event_id;
  if (r.entity) out += " " + r.entity->entity + "/" + r.entity->id;
  return out;
}

// The property, one thread: the same seeded batches into a store with the
// filters (from their smallest size, so they grow, and reopened half way,
// so they are built again from the stored keys; a rebuild into a new
// generation at a third and a re-fold in place at two thirds) and one
// without; every answer and every projection is the same.
TEST(KeyFilterStore, AnswersEveryDeliveryAsAStoreWithoutIt) {
  const uint64_t seed = TestSeed("KeyFilterStore.AnswersEveryDeliveryAsAStoreWithoutIt", 11);
  std::mt19937_64 rng(seed);
  const std::vector<std::string> bodies = Deliveries(rng, 6000, 24000);
  ManualClock clock{kT0};
  auto filtered_env = storage_test::NewMemEnv();
  auto plain_env = storage_test::NewMemEnv();
  std::unique_ptr<Store> filtered = OpenStore(filtered_env.get(), &clock, 64 << 20);
  std::unique_ptr<Store> plain = OpenStore(plain_env.get(), &clock, 0);
  ASSERT_TRUE(filtered && plain);
  // None before the first ingest: a store opened only to read scans nothing.
  EXPECT_EQ(AwaitFilters(filtered.get()).dedup, size_t{0});
  EXPECT_EQ(AwaitFilters(plain.get()).dedup, size_t{0});
  EXPECT_EQ(AwaitFilters(plain.get()).projections, size_t{0});
  size_t at = 0, duplicates = 0, conflicts = 0;
  bool reopened = false, rebuilt = false, refolded = false;
  uint32_t gen_before = 0;
  bool sized_after_reopen = false;
  while (at < bodies.size()) {
    if (!rebuilt && at >= bodies.size() / 3) {
      gen_before = AwaitFilters(filtered.get()).projection_gen;
      for (Store* s : {plain.get(), filtered.get()}) {
        RebuildOptions o;
        o.rederive_logs = true;
        ASSERT_TRUE(s->maintenance().Rebuild(o).ok());
      }
      // The next ingest asks for the new generation's filter; until it is
      // built, every projection is read.
      rebuilt = true;
    }
    if (!refolded && at >= bodies.size() * 2 / 3) {
      // Before the re-fold, which would mend a projection folded wrong.
      ASSERT_EQ(Projections(filtered.get()), Projections(plain.get()));
      for (Store* s : {plain.get(), filtered.get()}) {
        RebuildOptions o;
        o.entity = "receipt";
        ASSERT_TRUE(s->maintenance().Rebuild(o).ok());
      }
      refolded = true;
    }
    if (!reopened && at >= bodies.size() / 2) {
      filtered.reset();
      filtered = OpenStore(filtered_env.get(), &clock, 64 << 20);
      ASSERT_TRUE(filtered);
      reopened = true;
      sized_after_reopen = true;
    }
    std::vector<Delivery> batch;
    for (size_t n = 1 + rng() % 16; n > 0 && at < bodies.size(); --n, ++at) {
      Delivery d;
      d.body = bodies[at];
      batch.push_back(std::move(d));
    }
    const std::vector<IngestResult> want = plain->IngestBatch(batch);
    const std::vector<IngestResult> got = filtered->IngestBatch(batch);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(Describe(got[i]), Describe(want[i])) << "delivery " << at - want.size() + i;
      duplicates += want[i].outcome == Outcome::kDuplicate;
      conflicts += want[i].outcome == Outcome::kConflict;
    }
    if (at == want.size()) {  // the first batch asked for both filters
      EXPECT_EQ(AwaitFilters(filtered.get()).dedup, size_t{4096});
      EXPECT_EQ(AwaitFilters(filtered.get()).projections, size_t{4096});
    }
    if (sized_after_reopen) {  // built anew from the stored keys
      EXPECT_GT(AwaitFilter(filtered.get()), size_t{8192});
      sized_after_reopen = false;
    }
    // Between batches a filter may be rebuilt larger (in the background).
  }
  EXPECT_GT(duplicates, bodies.size() / 3);  // the history exercised the dedup path
  EXPECT_GT(conflicts, size_t{100});
  EXPECT_GT(AwaitFilters(filtered.get()).dedup, size_t{8192});
  EXPECT_GT(AwaitFilters(filtered.get()).projections, size_t{4096});
  EXPECT_NE(AwaitFilters(filtered.get()).projection_gen, gen_before);  // rebuilt for the new one
  const std::vector<std::string> want = Projections(plain.get());
  EXPECT_GT(want.size(), size_t{5000});
  EXPECT_EQ(Projections(filtered.get()), want);
}

// Overwrites bytes in the middle of the data block of the table under
// `dir` that holds `key` (a table of the closed store).
bool DamageBlockHolding(leveldb::Env* env, const std::string& dir, const std::string& key) {
  std::vector<std::string> children;
  if (!env->GetChildren(dir, &children).ok()) return false;
  for (const std::string& name : children) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".ldb") continue;
    const std::string path = dir + "/" + name;
    uint64_t size = 0;
    if (!env->GetFileSize(path, &size).ok()) return false;
    leveldb::RandomAccessFile* raw = nullptr;
    if (!env->NewRandomAccessFile(path, &raw).ok()) return false;
    std::unique_ptr<leveldb::RandomAccessFile> file(raw);
    leveldb::Table* table_raw = nullptr;
    if (!leveldb::Table::Open(leveldb::Options(), file.get(), size, &table_raw).ok()) continue;
    std::unique_ptr<leveldb::Table> table(table_raw);
    std::unique_ptr<leveldb::Iterator> it(table->NewIterator(leveldb::ReadOptions()));
    // Table keys are internal keys: the user key, then 8 bytes.
    it->Seek(key);
    if (!it->Valid() || !it->key().starts_with(key.substr(0, 2))) continue;
    const uint64_t block = table->ApproximateOffsetOf(it->key());
    it.reset();
    table.reset();
    std::string bytes(size, '\0');
    leveldb::Slice read;
    if (!file->Read(0, size, &read, bytes.data()).ok()) return false;
    bytes.assign(read.data(), read.size());
    for (uint64_t i = block + 16; i < block + 400 && i < bytes.size(); ++i) bytes[i] ^= 0x5a;
    file.reset();
    return leveldb::WriteStringToFile(env, bytes, path).ok();
  }
  return false;
}

// A filter whose scan fails (a damaged data block among the dedup entries)
// is not put in place: the store goes on reading every dedup entry, as
// without filters, and answers right. The same steps on an undamaged store
// build the filter, so the damage is what made the difference. (That a
// failed scan is not retried by every later ingest is not observed here.)
TEST(KeyFilterStore, AFailedScanLeavesNoFilterAndAnswersStayRight) {
  for (const bool damaged : {false, true}) {
    SCOPED_TRACE(damaged ? "damaged" : "intact");
    ManualClock clock{kT0};
    auto env = storage_test::NewMemEnv();
    {
      std::unique_ptr<Store> store = OpenStore(env.get(), &clock, 0);
      ASSERT_TRUE(store);
      for (int b = 0; b < 30; ++b) {
        std::vector<Delivery> batch;
        for (int i = 0; i < 100; ++i) {
          char id[16];
          std::snprintf(id, sizeof id, "%04d", b * 100 + i);
          Delivery d;
          d.body = storage_test::Issued(std::string("evt_o") + id, std::string("r") + id,
                                        FormatTimestamp(kT0));
          batch.push_back(std::move(d));
        }
        for (const IngestResult& r : store->IngestBatch(batch)) {
          ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
        }
      }
      ASSERT_TRUE(store->maintenance().Compact().ok());  // every key in a table
    }
    if (damaged) {
      ASSERT_TRUE(DamageBlockHolding(env.get(), "/mem/store", "d/evt_o1500"));
    }
    std::unique_ptr<Store> store = OpenStore(env.get(), &clock, 64 << 20);
    ASSERT_TRUE(store);
    // New events (sorting before the damaged block), their redeliveries and
    // redeliveries of old events from the start of the range: every answer
    // as a store without filters gives it.
    const auto ingest = [&](const std::string& event_id, const std::string& rid) {
      Delivery d;
      d.body = storage_test::Issued(event_id, rid, FormatTimestamp(kT0));
      return store->Ingest(d).outcome;
    };
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 50; ++i) {
        const std::string n = std::to_string(round * 50 + i);
        EXPECT_EQ(ingest("evt_a" + n, "a" + n), Outcome::kAccepted) << n;
        EXPECT_EQ(ingest("evt_a" + n, "a" + n), Outcome::kDuplicate) << n;
        char old[16];
        std::snprintf(old, sizeof old, "%04d", i);
        EXPECT_EQ(ingest(std::string("evt_o") + old, std::string("r") + old), Outcome::kDuplicate)
            << old;
      }
      const StoreImpl::KeyFilterSizes sizes = AwaitFilters(store.get());
      if (damaged) {
        EXPECT_EQ(sizes.dedup, size_t{0}) << "a filter from a failed scan";
      } else {
        EXPECT_GE(sizes.dedup, size_t{4096});
      }
    }
  }
}

// Concurrent ingests of the same deliveries in different orders, while the
// filter is built and grown: each event is accepted exactly once.
// Stats report the filters' memory: none before the first ingest or with
// the filters off, then exactly the bytes of the filters built, larger as
// they are rebuilt larger.
TEST(KeyFilterStore, StatsReportTheFiltersMemory) {
  const uint64_t seed = TestSeed("KeyFilterStore.StatsReportTheFiltersMemory", 3);
  std::mt19937_64 rng(seed);
  const std::vector<std::string> bodies = Deliveries(rng, 12000, 12000);
  ManualClock clock{kT0};
  auto filtered_env = storage_test::NewMemEnv();
  auto plain_env = storage_test::NewMemEnv();
  std::unique_ptr<Store> filtered = OpenStore(filtered_env.get(), &clock, 64 << 20);
  std::unique_ptr<Store> plain = OpenStore(plain_env.get(), &clock, 0);
  ASSERT_TRUE(filtered && plain);
  EXPECT_EQ(filtered->Stats().key_filter_bytes, 0u);
  uint64_t before = 0;
  for (size_t at = 0; at < bodies.size(); at += 1000) {
    std::vector<Delivery> batch;
    for (size_t i = at; i < std::min(bodies.size(), at + 1000); ++i) {
      batch.push_back(Delivery{{}, bodies[i]});
    }
    (void)filtered->IngestBatch(batch);
    (void)plain->IngestBatch(batch);
    const StoreImpl::KeyFilterSizes sizes = AwaitFilters(filtered.get());
    ASSERT_GT(sizes.dedup, 0u);
    ASSERT_GT(sizes.projections, 0u);
    const uint64_t want =
        AbsentFilter(sizes.dedup).bytes() + AbsentFilter(sizes.projections).bytes();
    EXPECT_EQ(filtered->Stats().key_filter_bytes, want) << "after " << at + 1000;
    EXPECT_GE(want, before);
    before = want;
    EXPECT_EQ(plain->Stats().key_filter_bytes, 0u);
  }
  EXPECT_GT(before, AbsentFilter(4096).bytes() * 2) << "the filters never grew";
}

TEST(KeyFilterStore, ConcurrentIngestsAcceptEachEventOnceWhileTheFilterGrows) {
  const uint64_t seed =
      TestSeed("KeyFilterStore.ConcurrentIngestsAcceptEachEventOnceWhileTheFilterGrows", 13);
  ManualClock clock{kT0};
  auto env = storage_test::NewMemEnv();
  std::unique_ptr<Store> store = OpenStore(env.get(), &clock, 64 << 20);
  ASSERT_TRUE(store);
  std::vector<std::string> ids;
  std::vector<std::string> bodies;
  for (int i = 0; i < 12000; ++i) {
    const std::string n = std::to_string(i);
    ids.push_back("evt_i" + n);
    bodies.push_back(storage_test::Issued(ids.back(), "r" + n, FormatTimestamp(kT0 + i)));
  }
  std::atomic<size_t> accepted{0}, duplicate{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      std::vector<size_t> order(bodies.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t at = 0; at < order.size();) {
        std::vector<Delivery> batch;
        for (size_t n = 1 + rng() % 8; n > 0 && at < order.size(); --n, ++at) {
          Delivery d;
          d.body = bodies[order[at]];
          batch.push_back(std::move(d));
        }
        for (const IngestResult& r : store->IngestBatch(batch)) {
          if (r.outcome == Outcome::kAccepted) {
            ++accepted;
          } else if (r.outcome == Outcome::kDuplicate) {
            ++duplicate;
          } else {
            ++other;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(accepted.load(), bodies.size());
  EXPECT_EQ(duplicate.load(), bodies.size() * 3);
  EXPECT_EQ(other.load(), size_t{0});
  EXPECT_GT(AwaitFilter(store.get()), size_t{8192});  // it grew on the way
}

}  // namespace
}  // namespace eventfold::storage
