// The simulated sender (tools/history.h) keeps its promises: deterministic,
// realistic, every event delivered, refusals and conflicts where it says.

#include "tools/history.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "core/decode.h"
#include "tests/replay/replay_util.h"

namespace eventfold {
namespace {

using testing::ListAll;
using testing::MemStore;

bool SameDeliveries(const std::vector<Delivery>& a, const std::vector<Delivery>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].body != b[i].body || a[i].headers != b[i].headers) return false;
  }
  return true;
}

// An independent reading of the generator's timestamp shape,
// "YYYY-MM-DDTHH:MM:SS.ffffff" then "Z" or "+hh:mm".
int64_t ParseGenerated(const std::string& s) {
  int y, mo, d, h, mi, sec, off_h = 0, off_m = 0;
  long long frac;
  char zone = 0;
  EXPECT_EQ(std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6lld%c", &y, &mo, &d, &h, &mi, &sec,
                        &frac, &zone),
            8)
      << s;
  if (zone == '+') {
    EXPECT_EQ(std::sscanf(s.c_str() + 27, "%2d:%2d", &off_h, &off_m), 2) << s;
  }
  // Days since the epoch, the slow way.
  auto leap = [](int yy) { return (yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0; };
  const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int64_t days = 0;
  for (int yy = 1970; yy < y; ++yy) days += leap(yy) ? 366 : 365;
  for (int mm = 1; mm < mo; ++mm) days += mdays[mm - 1] + (mm == 2 && leap(y));
  days += d - 1;
  const int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - (off_h * 3600 + off_m * 60);
  return secs * 1000000 + frac;
}

std::string Field(const std::string& body, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const size_t at = body.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return body.substr(start, body.find('"', start) - start);
}

TEST(History, DeterministicPerSeed) {
  sim::HistoryOptions o;
  const sim::History a = sim::GenerateHistory(o), b = sim::GenerateHistory(o);
  EXPECT_EQ(a.events, b.events);
  EXPECT_TRUE(SameDeliveries(a.deliveries, b.deliveries));
  o.seed = 43;
  const sim::History c = sim::GenerateHistory(o);
  EXPECT_NE(a.events, c.events);

  std::vector<Delivery> s1 = a.deliveries, s2 = a.deliveries;
  sim::Shuffle(&s1, 5);
  sim::Shuffle(&s2, 5);
  EXPECT_TRUE(SameDeliveries(s1, s2));
  sim::Shuffle(&s2, 6);
  EXPECT_FALSE(SameDeliveries(s1, s2));
}

TEST(History, EventsAreValidUniqueAndRealistic) {
  for (uint64_t seed : {1, 42, 2026}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o;
    o.seed = seed;
    const sim::History h = sim::GenerateHistory(o);
    const sim::HistoryStats& s = h.stats;
    EXPECT_EQ(s.receipts, 200u);
    EXPECT_EQ(s.products, 50u);
    EXPECT_EQ(s.receipt_events + s.product_events + s.inventory_events, h.events.size());
    EXPECT_GE(s.inventory_events, 150u);

    std::set<std::string> ids;
    std::map<std::string, int> types;
    std::map<EntityRef, int64_t> last;
    size_t bytes = 0, ties = 0, offsets = 0;
    std::set<int64_t> instants;
    for (const std::string& body : h.events) {
      Result<DecodedEvent> e = DecodeEvent(body, Profile::ReceiptRoller());
      ASSERT_TRUE(e.ok()) << e.status().ToString() << ": " << body;
      ASSERT_TRUE(e->entity.has_value()) << body;
      EXPECT_TRUE(ids.insert(e->event.event_id).second) << "event_id reused: " << body;
      ++types[e->event.type];
      bytes += body.size();
      const std::string at = Field(body, "occurred_at");
      EXPECT_EQ(e->event.occurred_at, ParseGenerated(at)) << at;
      offsets += at.back() != 'Z';
      ties += !instants.insert(e->event.occurred_at).second;
      // Produced in time order.
      auto [it, fresh] = last.emplace(*e->entity, e->event.occurred_at);
      if (!fresh) {
        EXPECT_GE(e->event.occurred_at, it->second);
        it->second = e->event.occurred_at;
      }
      for (const char* extra : {"\"api_version\":", "\"account\":", "\"metadata\":"}) {
        EXPECT_NE(body.find(extra), std::string::npos) << extra << " in " << body;
      }
    }
    for (const char* t : {"receipt.issued", "receipt.refunded", "product.created",
                          "product.updated", "product.deleted", "inventory.updated"}) {
      EXPECT_GT(types[t], 0) << t;
    }
    EXPECT_EQ(types["receipt.issued"] >= 200, true);
    const size_t mean = bytes / h.events.size();
    EXPECT_GE(mean, 450u);
    EXPECT_LE(mean, 900u);
    EXPECT_GT(ties, 20u) << "sync runs should stamp many events with one instant";
    EXPECT_GT(offsets, 100u) << "receipts are stamped in store-local time";
  }
}

TEST(History, DeliveriesCoverEveryEventAndIngestAsPromised) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o;
    o.seed = seed;
    o.malformed = 7 + static_cast<int>(seed);
    o.conflicts = 3;
    o.impossible_rate = 0.05;
    const sim::History h = sim::GenerateHistory(o);
    EXPECT_EQ(h.malformed, static_cast<size_t>(o.malformed));
    EXPECT_EQ(h.conflicts, 3u);

    std::map<std::string, int> delivered;
    for (const Delivery& d : h.deliveries) ++delivered[d.body];
    size_t retried = 0;
    for (const std::string& e : h.events) {
      EXPECT_GE(delivered[e], 1) << "never delivered: " << e;
      retried += delivered[e] > 1;
    }
    EXPECT_GE(retried, h.stats.retried);  // a forged-header copy adds a few
    EXPECT_GT(h.stats.retried, h.events.size() / 5);
    EXPECT_GT(h.stats.with_header, 0u);
    EXPECT_GT(h.stats.late, 0u);
    // The arrival order is not the production order.
    size_t in_place = 0;
    for (size_t i = 0; i < std::min(h.events.size(), h.deliveries.size()); ++i) {
      in_place += h.deliveries[i].body == h.events[i];
    }
    EXPECT_LT(in_place, h.events.size() / 10);

    MemStore store;
    ASSERT_TRUE(store);
    std::map<Outcome, size_t> outcomes;
    for (const IngestResult& r : store->IngestBatch(h.deliveries)) {
      ++outcomes[r.outcome];
      if (r.outcome == Outcome::kInvalid) {
        EXPECT_FALSE(r.message.empty());
      }
    }
    EXPECT_EQ(outcomes[Outcome::kAccepted], h.events.size());
    EXPECT_EQ(outcomes[Outcome::kInvalid], h.malformed);
    EXPECT_EQ(outcomes[Outcome::kConflict], h.conflicts);
    EXPECT_EQ(outcomes[Outcome::kDuplicate],
              h.deliveries.size() - h.events.size() - h.malformed - h.conflicts);

    // Each impossible event is rejected, and nothing else is.
    size_t rejected = 0;
    std::map<std::string, size_t> states;
    ASSERT_TRUE(store
                    ->List("",
                           [&](const Projection& p) {
                             rejected += p.rejected.size();
                             ++states[p.entity + ":" + p.state];
                             return true;
                           })
                    .ok());
    EXPECT_EQ(rejected, h.stats.impossible);
    EXPECT_GT(h.stats.impossible, 0u);
    EXPECT_GT(states["receipt:refunded"], 0u);
    EXPECT_GT(states["product:deleted"], 0u);
    EXPECT_EQ(states["inventory:tracked"], 50u);
  }
}

TEST(History, EveryMalformedKindIsRefusedWith400) {
  sim::HistoryOptions o;
  o.receipts = 5;
  o.products = 3;
  o.malformed = 14;  // each of the seven kinds twice
  o.conflicts = 0;
  const sim::History h = sim::GenerateHistory(o);
  MemStore store;
  ASSERT_TRUE(store);
  std::set<std::string> fields;
  for (const IngestResult& r : store->IngestBatch(h.deliveries)) {
    if (r.outcome != Outcome::kInvalid) continue;
    EXPECT_EQ(r.http_status(), 400);
    fields.insert(r.message.substr(0, r.message.find(':')));
  }
  EXPECT_EQ(fields, (std::set<std::string>{"body", "occurred_at", "X-RR-Event-Id",
                                           "data.receipt_id", "version", "data"}));
}

TEST(History, TinyAndEmptyHistories) {
  for (int receipts : {0, 1}) {
    for (int products : {0, 1}) {
      sim::HistoryOptions o;
      o.receipts = receipts;
      o.products = products;
      o.impossible_rate = 1.0;
      const sim::History h = sim::GenerateHistory(o);
      MemStore store;
      ASSERT_TRUE(store);
      size_t accepted = 0;
      for (const IngestResult& r : store->IngestBatch(h.deliveries)) {
        accepted += r.outcome == Outcome::kAccepted;
      }
      EXPECT_EQ(accepted, h.events.size());
      EXPECT_EQ(testing::ReferenceModel(h.deliveries).list, ListAll(store.get()));
    }
  }
}

}  // namespace
}  // namespace eventfold
