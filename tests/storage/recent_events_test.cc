// The duplicate fast path's memory of recent bodies (store/recent_events.h):
// the table itself (what it finds, what replaces what, what Clear and a late
// Add do), and a store that remembers answering every delivery exactly as a
// store that remembers nothing, across compaction, tombstone expiry and a
// profile switch that routes stored events anew.

#include "store/recent_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/decode.h"
#include "core/rfc3339.h"
#include "eventfold/maintenance.h"
#include "eventfold/store.h"
#include "tests/common/invoice_profile.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::Body;
using storage_test::TestSeed;

// In these tests a body's event id is "e" and the body.
std::string EventIdOf(const std::string& body) { return "e" + body; }

void Remember(RecentEvents& recent, const std::string& body, const std::optional<EntityRef>& entity,
              uint64_t epoch) {
  recent.Add(recent.KeyOf(body), EventIdOf(body), entity, epoch);
}

std::optional<EntityRef> Found(const RecentEvents& recent, const std::string& body,
                               const std::string& event_id) {
  std::optional<EntityRef> entity = EntityRef{"unset", "unset"};
  if (!recent.Find(recent.KeyOf(body), event_id, &entity)) return EntityRef{"missing", ""};
  return entity;
}

std::optional<EntityRef> Found(const RecentEvents& recent, const std::string& body) {
  return Found(recent, body, EventIdOf(body));
}

TEST(RecentEvents, FindsWhatWasAddedUntilCleared) {
  RecentEvents recent(1024);
  const EntityRef r1{"receipt", "r1"};
  Remember(recent, "a", r1, recent.epoch());
  Remember(recent, "b", std::nullopt, recent.epoch());
  EXPECT_EQ(Found(recent, "a"), std::optional<EntityRef>(r1));
  EXPECT_EQ(Found(recent, "b"), std::nullopt) << "an unrouted body is remembered as unrouted";
  EXPECT_EQ(Found(recent, "c"), (EntityRef{"missing", ""}));
  // The same bytes are found only under the event id they were added with:
  // a colliding key never answers for another event.
  EXPECT_EQ(Found(recent, "a", "eb"), (EntityRef{"missing", ""}));
  EXPECT_EQ(Found(recent, "a", "e"), (EntityRef{"missing", ""}));
  EXPECT_EQ(Found(recent, "a", "ea "), (EntityRef{"missing", ""}));

  const uint64_t before = recent.epoch();
  recent.Clear();
  EXPECT_NE(recent.epoch(), before);
  EXPECT_EQ(Found(recent, "a"), (EntityRef{"missing", ""}));
  // An Add that read the epoch before the Clear (its commit raced a
  // compaction) is dropped; one after is kept.
  Remember(recent, "a", r1, before);
  EXPECT_EQ(Found(recent, "a"), (EntityRef{"missing", ""}));
  Remember(recent, "a", r1, recent.epoch());
  EXPECT_EQ(Found(recent, "a"), std::optional<EntityRef>(r1));
}

TEST(RecentEvents, HoldsAtMostItsCapacityAndNoneAtZero) {
  RecentEvents none(0);
  Remember(none, "a", EntityRef{"receipt", "r1"}, none.epoch());
  EXPECT_EQ(Found(none, "a"), (EntityRef{"missing", ""}));

  // 256 slots (one set of 4 per stripe) for 1,000 bodies: a newer body
  // takes an older one's slot, and what is found is always what was added
  // for that body.
  RecentEvents small(256);
  for (int i = 0; i < 1000; ++i) {
    Remember(small, std::to_string(i), EntityRef{"receipt", std::to_string(i)}, small.epoch());
  }
  int found = 0;
  for (int i = 0; i < 1000; ++i) {
    std::optional<EntityRef> e = Found(small, std::to_string(i));
    if (e == std::optional<EntityRef>(EntityRef{"missing", ""})) continue;
    ++found;
    EXPECT_EQ(e, std::optional<EntityRef>(EntityRef{"receipt", std::to_string(i)}));
  }
  EXPECT_GT(found, 0);
  EXPECT_LE(found, 256);
  // A set keeps its four newest bodies: the last four added are found.
  for (int i = 996; i < 1000; ++i) {
    EXPECT_EQ(Found(small, std::to_string(i)),
              std::optional<EntityRef>(EntityRef{"receipt", std::to_string(i)}));
  }
}

// A table filled to 60% of its capacity with distinct bodies finds nearly
// all of them: a body has two sets to go to, so bodies evict each other only
// when both of a body's sets are full, which at this load is rare. (With one
// set a body, sets of four overflow and about 6% are lost.) The keys depend
// on the table's random secret; the bound holds for any of them with room
// to spare.
TEST(RecentEvents, KeepsNearlyEveryBodyWhileItHasRoom) {
  constexpr int kCapacity = 1 << 16;
  RecentEvents recent(kCapacity);
  const int n = kCapacity * 6 / 10;
  auto remember_all = [&] {
    for (int i = 0; i < n; ++i) {
      Remember(recent, "body " + std::to_string(i), EntityRef{"receipt", std::to_string(i)},
               recent.epoch());
    }
  };
  auto count_found = [&] {
    int found = 0;
    for (int i = 0; i < n; ++i) {
      const std::optional<EntityRef> e = Found(recent, "body " + std::to_string(i));
      if (e == std::optional<EntityRef>(EntityRef{"receipt", std::to_string(i)})) ++found;
    }
    return found;
  };
  remember_all();
  const int found = count_found();
  std::printf("found %d of %d bodies in a table of %d\n", found, n, kCapacity);
  EXPECT_GE(found, n - n / 200) << "more than 0.5% evicted while the table had room";
  // Adding the same bodies again refreshes them in place: nothing found is
  // lost and nothing is held twice.
  remember_all();
  EXPECT_GE(count_found(), found);
}

// Entity types are kept by index, up to 256 names: a body of a 257th type
// is not remembered (its redelivery reads the database), the others are.
TEST(RecentEvents, RemembersUpTo256EntityTypes) {
  RecentEvents recent(1 << 16);
  for (int i = 0; i < 300; ++i) {
    const std::string n = std::to_string(i);
    Remember(recent, n, EntityRef{"type" + n, "id" + n}, recent.epoch());
  }
  for (int i = 0; i < 300; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(Found(recent, n), i < 256 ? std::optional<EntityRef>(EntityRef{"type" + n, "id" + n})
                                        : std::optional<EntityRef>(EntityRef{"missing", ""}))
        << i;
  }
}

// The event id and the entity id are kept inline, 64 bytes together: a body
// whose ids are longer is not remembered (its redelivery reads the
// database); one at the limit is, and gives its ids back whole.
TEST(RecentEvents, RemembersIdsUpTo64BytesTogether) {
  RecentEvents recent(1024);
  const std::string event_id(40, 'e');
  const EntityRef fits{"receipt", std::string(24, 'r')};
  const EntityRef too_long{"receipt", std::string(25, 'r')};
  recent.Add(recent.KeyOf("fits"), event_id, fits, recent.epoch());
  recent.Add(recent.KeyOf("too long"), event_id, too_long, recent.epoch());
  EXPECT_EQ(Found(recent, "fits", event_id), std::optional<EntityRef>(fits));
  EXPECT_EQ(Found(recent, "too long", event_id), (EntityRef{"missing", ""}));
  const std::string long_id(kMaxEventIdBytes, 'x');  // unrouted: the event id alone
  recent.Add(recent.KeyOf("long id"), long_id, std::nullopt, recent.epoch());
  EXPECT_EQ(Found(recent, "long id", long_id), (EntityRef{"missing", ""}));
}

// Each table draws its own secret: the same bytes get other keys in
// another table (so nobody can precompute a collision for a store).
TEST(RecentEvents, EachTableKeysBodiesUnderItsOwnSecret) {
  RecentEvents one(256), two(256);
  int same = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string body = "body " + std::to_string(i);
    const RecentEvents::Key a = one.KeyOf(body), b = two.KeyOf(body);
    EXPECT_EQ(a.low, one.KeyOf(body).low) << "a table's key of a body is stable";
    EXPECT_EQ(a.high, one.KeyOf(body).high);
    if (a.low == b.low && a.high == b.high) ++same;
  }
  EXPECT_EQ(same, 0);
}

// Many threads adding, finding and clearing at once (for TSan): whatever is
// found is what was added for that digest.
TEST(RecentEvents, ConcurrentUseFindsOnlyWhatWasAdded) {
  RecentEvents recent(4096);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const int n = (i * 7 + t) % 3000;
        const std::string body = std::to_string(n);
        // Types are added to the table's list of names concurrently too.
        const EntityRef ref{"type" + std::to_string(n % 40), "id" + body};
        if (i % 3 == 0) {
          Remember(recent, body, ref, recent.epoch());
        } else if (i % 997 == 0) {
          recent.Clear();
        } else {
          std::optional<EntityRef> e;
          if (recent.Find(recent.KeyOf(body), EventIdOf(body), &e) &&
              e != std::optional<EntityRef>(ref)) {
            ++wrong;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

constexpr int64_t kT0 = 1795000000000000;  // 2026-11-18
constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kDay = 24 * 3600 * kSecond;

// One store over its own in-memory files and clock.
struct TestStore {
  TestStore(size_t recent_events, const Profile& profile) : env(storage_test::NewMemEnv()) {
    Options o;
    o.env = env.get();
    o.clock = &clock;
    o.durability = Durability::kBuffered;
    o.snapshot_interval = 2;
    o.recent_events = recent_events;
    o.profile = profile;
    o.gc_interval_micros = 0;
    Result<std::unique_ptr<Store>> s = Store::Open("/mem/store", o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store = std::move(*s);
  }
  std::unique_ptr<leveldb::Env> env;
  ManualClock clock{kT0};
  std::unique_ptr<Store> store;
};

std::string Describe(const IngestResult& r) {
  std::string out = std::string(OutcomeName(r.outcome)) + " " + r.event_id;
  if (r.entity) out += " " + r.entity->entity + "/" + r.entity->id;
  return out;
}

// The property: a store that remembers recent bodies (and one that can
// remember only a few, so they keep replacing each other) answers every
// delivery as a store that remembers none. Seeded random deliveries drawn
// with repetition from a pool of receipts, their conflicting variants and
// invoices (unrouted until the profile switch), with compaction passes and
// tombstone expiry (a resend past it is a new event) and one switch to a
// profile that routes the invoices.
TEST(RecentEventsStore, AnswersEveryDeliveryAsAStoreWithoutThem) {
  const uint64_t base = TestSeed("RecentEventsStore.AnswersEveryDeliveryAsAStoreWithoutThem", 17);
  Result<Profile> invoices = Profile::FromJson(test_util::kInvoiceProfile);
  ASSERT_TRUE(invoices.ok()) << invoices.status().ToString();
  GcOptions compact;
  compact.compact_after_micros = 7 * kDay;
  size_t duplicates_seen = 0, accepted_again = 0;  // the latter: resent past the tombstones
  for (uint64_t seed = base; seed < base + 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    // Each body with its event_id and a decoy: another id its bytes hold
    // before the event's own (a nested "event_id"), or the event_id again.
    struct Pooled {
      std::string body, id, decoy;
    };
    std::vector<Pooled> pool;
    for (int i = 0; i < 40; ++i) {
      const std::string n = std::to_string(i);
      const std::string at = FormatTimestamp(kT0 + i * kSecond);
      const std::string later = FormatTimestamp(kT0 + i * kSecond + 1);
      pool.push_back({storage_test::Issued("evt_i" + n, "r" + n, at), "evt_i" + n, "evt_i" + n});
      pool.push_back(
          {storage_test::Refunded("evt_r" + n, "r" + n, later), "evt_r" + n, "evt_r" + n});
      pool.push_back({storage_test::Issued("evt_i" + n, "r" + n, later), "evt_i" + n,
                      "evt_i" + n});  // a conflict
      pool.push_back({Body("evt_p" + n, "invoice.paid", at, "{\"invoice_id\":\"inv" + n + "\"}"),
                      "evt_p" + n, "evt_p" + n});
      pool.push_back({"{\"data\":{\"event_id\":\"evt_x" + n + "\",\"receipt_id\":\"n" + n +
                          "\"},\"event_id\":\"evt_n" + n +
                          "\",\"type\":\"receipt.issued\",\"occurred_at\":\"" + at + "\"}",
                      "evt_n" + n, "evt_x" + n});
    }
    std::vector<std::unique_ptr<TestStore>> stores;
    for (size_t recent : {size_t{0}, size_t{1} << 18, size_t{64}}) {
      stores.push_back(std::make_unique<TestStore>(recent, Profile::ReceiptRoller()));
      ASSERT_TRUE(stores.back()->store);
    }
    const int switch_at = 200 + static_cast<int>(rng() % 200);
    std::set<std::string> accepted;
    for (int step = 0; step < 600; ++step) {
      if (step == switch_at) {
        for (auto& s : stores) ASSERT_TRUE(s->store->maintenance().Rebuild(&*invoices).ok());
      } else if (rng() % 60 == 0) {
        const int64_t days = static_cast<int64_t>(rng() % 20);
        for (auto& s : stores) {
          s->clock.Advance(days * kDay);
          Result<GcSummary> g = s->store->maintenance().Gc(compact);
          ASSERT_TRUE(g.ok()) << g.status().ToString();
        }
        continue;
      }
      const Pooled& pick = pool[rng() % pool.size()];
      // No event-id header, the right one, or the decoy (then 400).
      Delivery delivery{{}, pick.body};
      if (const uint64_t h = rng() % 4; h != 0) {
        delivery.headers.emplace_back("X-RR-Event-Id", h == 1 ? pick.decoy : pick.id);
      }
      const IngestResult want = stores[0]->store->Ingest(delivery);
      duplicates_seen += want.outcome == Outcome::kDuplicate;
      for (size_t i = 1; i < stores.size(); ++i) {
        const IngestResult got = stores[i]->store->Ingest(delivery);
        ASSERT_EQ(Describe(got), Describe(want))
            << "store " << i << ", step " << step << ": " << pick.body;
      }
      if (want.outcome == Outcome::kAccepted) accepted_again += !accepted.insert(pick.body).second;
    }
    for (size_t i = 1; i < stores.size(); ++i) {
      EXPECT_EQ(storage_test::ListAll(stores[i]->store.get()),
                storage_test::ListAll(stores[0]->store.get()));
    }
  }
  EXPECT_GT(duplicates_seen, 1000u) << "too few redeliveries to mean anything";
  EXPECT_GT(accepted_again, 0u);
}

}  // namespace
}  // namespace eventfold::storage
