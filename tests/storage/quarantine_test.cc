// The quarantine's bounds: an unauthenticated flood of refused deliveries
// with big, many and secret-looking headers stays under the byte cap, keeps
// only allowlisted headers (values cut), is rate limited on the Clock, and
// what was not kept is counted.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "eventfold/clock.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold {
namespace {

constexpr int64_t kT0 = 1795000000LL * 1000000;

struct Fixture {
  std::unique_ptr<leveldb::Env> env = storage_test::NewMemEnv();
  ManualClock clock{kT0};
  Options options;
  std::unique_ptr<Store> store;

  explicit Fixture(size_t max_bytes, size_t per_second) {
    options.env = env.get();
    options.clock = &clock;
    options.durability = Durability::kBuffered;
    options.quarantine_max_bytes = max_bytes;
    options.quarantine_max_per_second = per_second;
    Reopen();
  }
  void Reopen() {
    store.reset();
    Result<std::unique_ptr<Store>> s = Store::Open("/mem/quarantine", options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(*s);
  }
  std::vector<RefusedDelivery> Refused() {
    std::vector<RefusedDelivery> out;
    EXPECT_TRUE(store->quarantine()
                    .List([&](const RefusedDelivery& r) {
                      out.push_back(r);
                      return true;
                    })
                    .ok());
    return out;
  }
  // The quarantine's records as stored: keys and values.
  uint64_t StoredBytes() {
    uint64_t bytes = 0;
    for (const RefusedDelivery& r : Refused()) {
      bytes += storage::QuarantineKey(r.seq).size() + storage::EncodeRefused(r).size();
    }
    return bytes;
  }
};

RefusedDelivery Unsigned(std::mt19937_64& rng, int headers, size_t value_bytes) {
  RefusedDelivery r;
  r.outcome = Outcome::kUnauthorized;
  r.reason = "X-RR-Signature: missing";
  for (int i = 0; i < headers; ++i) {
    r.headers.emplace_back("X-Junk-" + std::to_string(rng() % 100000),
                           std::string(value_bytes, static_cast<char>('a' + rng() % 26)));
  }
  r.headers.emplace_back("User-Agent", std::string(value_bytes, 'u'));
  r.headers.emplace_back("X-RR-Event-Id", "evt_flood");
  r.body_prefix = std::string(4096, 'b');
  r.body_bytes = 4096;
  return r;
}

TEST(QuarantineTest, FloodOfBigHeadersStaysUnderTheByteCap) {
  const uint64_t seed = storage_test::TestSeed("QuarantineTest.FloodOfBigHeaders", 1300);
  std::mt19937_64 rng(seed);
  constexpr size_t kCap = 256 << 10;
  Fixture f(kCap, /*per_second=*/0);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(f.store->quarantine().Add(Unsigned(rng, 100, 7000)).ok());
  }
  std::vector<RefusedDelivery> kept = f.Refused();
  ASSERT_FALSE(kept.empty());
  EXPECT_LE(f.StoredBytes(), kCap);
  for (const RefusedDelivery& r : kept) {
    EXPECT_LE(r.headers.size(), kQuarantineHeaderCount);
    for (const auto& [name, value] : r.headers) {
      EXPECT_LE(value.size(), kQuarantineHeaderValueBytes) << name;
      EXPECT_EQ(name.rfind("X-Junk-", 0), std::string::npos) << name;
    }
    EXPECT_LE(r.body_prefix.size(), kQuarantineBodyBytes);
  }
  EXPECT_EQ(f.store->counters().quarantine_headers_dropped, 300u * 100);
  EXPECT_EQ(f.store->Stats().refused, kept.size());
  // A reopened store knows the sizes of what it holds: the cap still holds.
  f.Reopen();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(f.store->quarantine().Add(Unsigned(rng, 10, 7000)).ok());
  }
  EXPECT_LE(f.StoredBytes(), kCap);
  EXPECT_EQ(f.store->Stats().refused, f.Refused().size());
}

TEST(QuarantineTest, OnlyAllowlistedHeadersAreKept) {
  Fixture f(16 << 20, 0);
  RefusedDelivery r;
  r.outcome = Outcome::kUnauthorized;
  r.reason = "X-RR-Signature: missing";
  r.headers = {{"X-Auth-Key", "k"},
               {"X-Password", "p"},
               {"X-Private-Key", "pk"},
               {"X-RR-Signature", "t=1,v1=00"},
               {"Content-Type", "application/json"},
               {"user-agent", "ReceiptRoller/1.0"},
               {"webhook-id", "evt_1"},
               {"Webhook-Timestamp", "1795000000"}};
  ASSERT_TRUE(f.store->quarantine().Add(r).ok());
  std::vector<RefusedDelivery> kept = f.Refused();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].headers, (Headers{{"Content-Type", "application/json"},
                                      {"user-agent", "ReceiptRoller/1.0"},
                                      {"webhook-id", "evt_1"},
                                      {"Webhook-Timestamp", "1795000000"}}));
  EXPECT_EQ(f.store->counters().quarantine_headers_dropped, 4u);
}

TEST(QuarantineTest, RateIsCappedPerSecondOfTheClock) {
  std::mt19937_64 rng(1);
  Fixture f(16 << 20, /*per_second=*/5);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.store->quarantine().Add(Unsigned(rng, 1, 10)).ok());
  EXPECT_EQ(f.Refused().size(), 5u);
  EXPECT_EQ(f.store->counters().quarantine_dropped, 15u);
  f.clock.Advance(1000000);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.store->quarantine().Add(Unsigned(rng, 1, 10)).ok());
  EXPECT_EQ(f.Refused().size(), 10u);
  EXPECT_EQ(f.store->counters().quarantine_dropped, 30u);
}

// ListAfter, the paging read, over a quarantine whose oldest entries the
// byte cap evicted: from any seq (kept, evicted, beyond the last, the
// largest) it gives exactly the kept deliveries after it, oldest first.
TEST(QuarantineTest, ListAfterStartsAfterAnySeq) {
  std::mt19937_64 rng(7);
  Fixture f(64 << 10, /*per_second=*/1000);
  for (int i = 0; i < 120; ++i) {
    ASSERT_TRUE(f.store->quarantine().Add(Unsigned(rng, 1 + rng() % 3, 10)).ok());
  }
  std::vector<uint64_t> kept;
  for (const RefusedDelivery& r : f.Refused()) kept.push_back(r.seq);
  ASSERT_FALSE(kept.empty());
  ASSERT_GT(kept.front(), 1u) << "the cap was meant to evict the oldest";
  const auto after = [&](uint64_t seq) {
    std::vector<uint64_t> out;
    EXPECT_TRUE(f.store->quarantine()
                    .ListAfter(seq,
                               [&](const RefusedDelivery& r) {
                                 out.push_back(r.seq);
                                 return true;
                               })
                    .ok());
    return out;
  };
  for (uint64_t seq = 0; seq <= kept.back() + 2; ++seq) {
    const std::vector<uint64_t> want(std::upper_bound(kept.begin(), kept.end(), seq), kept.end());
    EXPECT_EQ(after(seq), want) << "after " << seq;
  }
  EXPECT_TRUE(after(UINT64_MAX).empty());
}

}  // namespace
}  // namespace eventfold
