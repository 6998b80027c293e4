// Helpers shared by the storage tests: event bodies, seeded histories and
// in-memory LevelDB environments (seeds and scratch directories come from
// tests/common).

#ifndef EVENTFOLD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define EVENTFOLD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/rfc3339.h"
#include "eventfold/projection.h"
#include "eventfold/store.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"

namespace eventfold::storage_test {

using test_util::ScratchDir;
using test_util::TestSeed;

// A JSON event body. `data` is the JSON object text of `data`.
inline std::string Body(const std::string& event_id, const std::string& type,
                        const std::string& occurred_at, const std::string& data,
                        std::optional<int64_t> version = std::nullopt) {
  std::string out = "{\"event_id\":\"" + event_id + "\",\"type\":\"" + type +
                    "\",\"occurred_at\":\"" + occurred_at + "\"";
  if (version) out += ",\"version\":" + std::to_string(*version);
  out += ",\"data\":" + data + "}";
  return out;
}

// The body a sender would have delivered for `e` (its data as they are).
inline std::string BodyOf(const Event& e) {
  std::string data = "{";
  for (size_t i = 0; i < e.data.size(); ++i) {
    data += (i ? ",\"" : "\"") + e.data[i].name + "\":" + e.data[i].json;
  }
  return Body(e.event_id, e.type, FormatRfc3339(e.occurred_at), data + "}", e.version);
}

// receipt.issued / receipt.refunded for receipt `rid`.
inline std::string Issued(const std::string& event_id, const std::string& rid,
                          const std::string& at = "2026-11-29T10:15:30.123Z",
                          std::optional<int64_t> version = std::nullopt, int amount = 1500) {
  return Body(event_id, "receipt.issued", at,
              "{\"receipt_id\":\"" + rid + "\",\"amount\":" + std::to_string(amount) +
                  ",\"currency\":\"THB\"}",
              version);
}

inline std::string Refunded(const std::string& event_id, const std::string& rid,
                            const std::string& at = "2026-11-29T11:00:00Z",
                            std::optional<int64_t> version = std::nullopt) {
  return Body(event_id, "receipt.refunded", at, "{\"receipt_id\":\"" + rid + "\"}", version);
}

// An in-memory LevelDB environment; files live as long as the object.
inline std::unique_ptr<leveldb::Env> NewMemEnv() {
  return std::unique_ptr<leveldb::Env>(leveldb::NewMemEnv(leveldb::Env::Default()));
}

// A seeded ReceiptRoller-like history: distinct valid event bodies for
// receipts (issued, some refunded, a few impossible re-issues), products
// (created, versioned updates, some stale, some deleted) and inventory
// (versioned updates in scrambled time order).
inline std::vector<std::string> GenerateEvents(uint64_t seed, int receipts, int products) {
  std::mt19937_64 rng(seed);
  const int64_t t0 = 1795000000000000;  // 2026-11-18
  auto at = [&](int64_t micros) { return FormatTimestamp(micros); };
  std::vector<std::string> out;
  int next_id = 0;
  auto id = [&] { return "evt_" + std::to_string(seed % 1000) + "_" + std::to_string(next_id++); };
  for (int r = 0; r < receipts; ++r) {
    const std::string rid = "rcp_" + std::to_string(r);
    const int64_t issued = t0 + static_cast<int64_t>(rng() % 86400000000ull);
    out.push_back(
        Issued(id(), rid, at(issued), std::nullopt, 100 + static_cast<int>(rng() % 9000)));
    if (rng() % 2 == 0) {
      out.push_back(
          Refunded(id(), rid, at(issued + 1 + static_cast<int64_t>(rng() % 3600000000ull))));
    }
    if (rng() % 20 == 0) {  // impossible: issued again later
      out.push_back(Issued(id(), rid, at(issued + 7200000000ll), std::nullopt, 1));
    }
  }
  for (int p = 0; p < products; ++p) {
    const std::string pid = "prd_" + std::to_string(p);
    const std::string key = "\"product_id\":\"" + pid + "\"";
    int64_t t = t0 + static_cast<int64_t>(rng() % 86400000000ull);
    out.push_back(Body(id(), "product.created", at(t), "{" + key + ",\"name\":\"p\"}", 1));
    const int updates = static_cast<int>(rng() % 4);
    for (int u = 0; u < updates; ++u) {
      t += 1 + static_cast<int64_t>(rng() % 1000000);
      // Now and then a version that is not newer: rejected as stale.
      const int64_t version = rng() % 5 == 0 ? 1 : 2 + u;
      out.push_back(Body(id(), "product.updated", at(t),
                         "{" + key + ",\"price\":" + std::to_string(rng() % 1000) + "}", version));
    }
    if (rng() % 4 == 0) {
      out.push_back(Body(id(), "product.deleted", at(t + 5), "{" + key + "}", 10));
    }
    // Inventory of the same product: versions in scrambled time order, and
    // sometimes two updates at the very same instant (version breaks the tie).
    const int inv = 1 + static_cast<int>(rng() % 4);
    for (int v = 1; v <= inv; ++v) {
      const int64_t when = t0 + static_cast<int64_t>(rng() % 3) * 1000000;
      out.push_back(Body(id(), "inventory.updated", at(when),
                         "{" + key + ",\"qty\":" + std::to_string(rng() % 50) + "}", v));
    }
  }
  return out;
}

// Every projection of a store, in List order, as docs/SPEC.md §5.4 JSON lines.
inline std::vector<std::string> ListAll(Store* store, std::string_view entity = "") {
  std::vector<std::string> out;
  Status st = store->List(entity, [&](const Projection& p) {
    out.push_back(ProjectionToJson(p));
    return true;
  });
  if (!st.ok()) out.push_back("LIST FAILED: " + st.ToString());
  return out;
}

}  // namespace eventfold::storage_test

#endif  // EVENTFOLD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
