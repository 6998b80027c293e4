// Tests of the LevelDB-backed Store (store/store_impl): ingest outcomes of
// docs/SPEC.md §3, the fold as seen through Get/Log/List, persistence, batches,
// rebuilds and profile switches, Verify, locking and storage faults.

#include "eventfold/store.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/decode.h"
#include "core/sha256.h"
#include "storage/key_codec.h"
#include "storage/leveldb_util.h"
#include "storage/record_codec.h"
#include "tests/common/check_clean.h"
#include "tests/common/invoice_profile.h"
#include "tests/common/raw_generations.h"
#include "tests/common/test_seed.h"
#include "tests/storage/legacy_records.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold {
namespace {

using storage_test::Body;
using storage_test::GenerateEvents;
using storage_test::Issued;
using storage_test::ListAll;
using storage_test::Refunded;
using storage_test::ScratchDir;
using storage_test::TestSeed;

constexpr int64_t kStart = 1795000000000000;  // ManualClock start

using test_util::kInvoiceProfile;
using test_util::RawGeneration;

std::string InvoicePaid(const std::string& event_id, const std::string& invoice_id) {
  return Body(event_id, "invoice.paid", "2026-11-29T12:00:00Z",
              "{\"invoice_id\":\"" + invoice_id + "\",\"total\":99}");
}

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : env_(storage_test::NewMemEnv()), clock_(kStart) {}

  Options Opts() const {
    Options o;
    o.env = env_.get();
    o.clock = &clock_;
    return o;
  }

  std::unique_ptr<Store> Open(const Options& o) {
    Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Store> Open() { return Open(Opts()); }
  // A store whose two entities' names are prefixes apart ("a" and "ab",
  // keyed by data.id, created by "a.created" and "ab.created").
  std::unique_ptr<Store> OpenWithPrefixEntities() {
    Result<Profile> profile = Profile::FromJson(R"({"name":"prefixes","entities":[
    {"name":"ab","key":"data.id","transitions":[{"type":"ab.created","from":["none"],"to":"live"}]},
    {"name":"a","key":"data.id","transitions":[{"type":"a.created","from":["none"],"to":"live"}]}]})");
    EXPECT_TRUE(profile.ok()) << profile.status().ToString();
    if (!profile.ok()) return nullptr;
    Options o = Opts();
    o.profile = *profile;
    return Open(o);
  }
  // Opened with Options::upgrade_format, as `eventfold migrate` opens it.
  std::unique_ptr<Store> OpenUpgrading() {
    Options o = Opts();
    o.upgrade_format = true;
    return Open(o);
  }

  // Receipts rcp_1 and rcp_2 as JSON, by id.
  static std::map<std::string, std::string> ReceiptsJson(Store* store) {
    std::map<std::string, std::string> out;
    for (const char* id : {"rcp_1", "rcp_2"}) {
      Result<Projection> p = store->Get("receipt", id);
      EXPECT_TRUE(p.ok()) << id << ": " << p.status().ToString();
      if (p.ok()) out[id] = ProjectionToJson(*p);
    }
    return out;
  }

  // The store's LevelDB database itself (no Store may have it open), to
  // write records as an older format did; null (and a failure) if it does
  // not open.
  std::unique_ptr<leveldb::DB> RawDb() {
    leveldb::Options lo;
    lo.env = env_.get();
    leveldb::DB* raw = nullptr;
    EXPECT_TRUE(leveldb::DB::Open(lo, path_, &raw).ok());
    return std::unique_ptr<leveldb::DB>(raw);
  }

  // The event stored at a/<seq> of a raw database.
  static void RawStoredEvent(leveldb::DB* db, uint64_t seq, storage::StoredEvent* out) {
    std::string value;
    ASSERT_TRUE(db->Get({}, storage::EventKey(seq), &value).ok()) << "a/" << seq;
    Result<storage::StoredEvent> stored = storage::DecodeStoredEvent(storage::EventKey(seq), value);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    *out = std::move(*stored);
  }

  // Open refuses the store as one of the older `format`, naming the
  // command that upgrades it.
  void ExpectRefusedAsOlder(const std::string& format) {
    Result<std::unique_ptr<Store>> refused = Store::Open(path_, Opts());
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("store format " + format + " is older"),
              std::string::npos)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("eventfold migrate --data " + path_),
              std::string::npos)
        << refused.status().ToString();
  }

  // The event log entry at `key` (value `value`) of a raw database of the
  // ReceiptRoller profile, with its received_at (a/<seq>'s since format 8).
  static void RawLogEntry(leveldb::DB* db, const std::string& key, std::string_view value,
                          storage::LogEntry* out) {
    Result<storage::LogEntry> e = storage::DecodeLog(key, value, Profile::ReceiptRoller());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    if (e->received_at == 0) {
      storage::StoredEvent stored;
      ASSERT_NO_FATAL_FAILURE(RawStoredEvent(db, e->seq, &stored));
      e->received_at = stored.received_at;
    }
    *out = std::move(*e);
  }

  // A store whose per-event values are all rewritten as `format` ("6" or
  // "7") wrote them is refused, then upgraded on request (only m/format
  // changes) and reads as before: projections, log, feed, redeliveries and
  // conflicts, then new events; `check` finds the mixed store clean.
  void ExpectUpgradeFromCompactOrFlatBufferFormat(const std::string& format) {
    const bool six = format == "6";
    Options o = Opts();
    o.snapshot_interval = 2;  // so that there are snapshots to read as the older format
    std::map<std::string, std::string> before;
    std::vector<Change> feed_before;
    std::string log_before;
    std::vector<std::string> issued;
    {
      auto store = Open(o);
      ASSERT_TRUE(store);
      for (int i = 0; i < 6; ++i) {
        issued.push_back(Issued("evt_i" + std::to_string(i), "rcp_" + std::to_string(i % 2 + 1)));
        MustAccept(store.get(), issued.back());
      }
      MustAccept(store.get(), Refunded("evt_r", "rcp_1"));
      EXPECT_EQ(store->Ingest(Issued("evt_late", "rcp_1")).outcome, Outcome::kAccepted);
      before = ReceiptsJson(store.get());
      ASSERT_TRUE(store->feed()
                      .Read(0, 100,
                            [&](const Change& c) {
                              feed_before.push_back(c);
                              return true;
                            })
                      .ok());
      Result<EntityLog> log = store->Log("receipt", "rcp_1");
      ASSERT_TRUE(log.ok());
      log_before = EntityLogToJson(*log);
    }
    std::map<char, int> rewritten;
    int keyed = 0, legacy_keys = 0;
    {
      std::unique_ptr<leveldb::DB> db = RawDb();
      ASSERT_TRUE(db);
      leveldb::WriteBatch batch;
      std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string key = it->key().ToString();
        const std::string_view value = storage::View(it->value());
        std::string legacy;
        char family = key[0];
        if (key.starts_with(storage::kEventPrefix)) {
          Result<storage::StoredEvent> e = storage::DecodeStoredEvent(key, value);
          ASSERT_TRUE(e.ok()) << e.status().ToString();
          // The route the older formats stored beside the body.
          Result<DecodedEvent> decoded = DecodeEvent(e->body, Profile::ReceiptRoller());
          ASSERT_TRUE(decoded.ok());
          e->entity = decoded->entity;
          legacy =
              six ? storage_test::EncodeFormat6Event(*e) : storage_test::EncodeFormat7Event(*e);
        } else if (key.starts_with(storage::kDedupPrefix)) {
          Result<storage::DedupEntry> d = storage::DecodeDedup(key, value);
          ASSERT_TRUE(d.ok()) << d.status().ToString();
          legacy =
              six ? storage_test::EncodeFormat6Dedup(*d) : storage_test::EncodeFormat7Dedup(*d);
        } else if (key.starts_with(storage::kFeedPrefix)) {
          Result<Change> c = storage::DecodeChange(key, value);
          ASSERT_TRUE(c.ok()) << c.status().ToString();
          if (six) legacy = storage_test::EncodeFormat6Change(*c);  // format 7's is format 8's
        } else if (const auto g = storage::ParseGenerationKey(key); g && !g->rest.empty()) {
          family = g->rest[0];  // g/<gen>/<family>/
          if (family == 'l') {
            storage::LogEntry e;
            ASSERT_NO_FATAL_FAILURE(RawLogEntry(db.get(), key, value, &e));
            legacy = six ? storage_test::EncodeFormat6Log(e) : storage_test::EncodeFormat7Log(e);
          } else if (family == 'p' || family == 's') {
            Result<ProjectionState> ps = storage::DecodeProjection(key, value);
            ASSERT_TRUE(ps.ok()) << ps.status().ToString();
            legacy = six ? storage_test::EncodeFormat6Projection(*ps)
                         : storage_test::EncodeFormat7Projection(*ps, ps->cursor_only);
          }
        }
        if (legacy.empty() && key.starts_with(storage::kGenerationPrefix)) {
          legacy = std::string(value);  // u/: only its key changes
        } else if (legacy.empty()) {
          continue;
        } else {
          EXPECT_LT(value.size(), legacy.size()) << "format 8 is smaller: " << family;
        }
        ++rewritten[family];
        // Derived keys in the older grammar too; for format 7 every third
        // one is left in format 8's, as an upgrade cut short (a crash)
        // leaves them, which the next one finishes.
        if (key.starts_with(storage::kGenerationPrefix) && (six || ++keyed % 3 != 0)) {
          const std::string old_key = storage_test::LegacyGenerationKey(key);
          ASSERT_NE(old_key, key);
          EXPECT_LT(key.size(), old_key.size()) << "format 8 keys are smaller";
          batch.Delete(key);
          batch.Put(old_key, legacy);
          ++legacy_keys;
          continue;
        }
        batch.Put(key, legacy);
      }
      batch.Put(storage::MetaKey("format"), storage::EncodeText(format));
      ASSERT_TRUE(db->Write({}, &batch).ok());
    }
    EXPECT_EQ(rewritten['a'], 8);
    EXPECT_EQ(rewritten['d'], 8);
    EXPECT_EQ(rewritten['l'], 8);
    EXPECT_EQ(rewritten['p'], 2);
    EXPECT_GE(rewritten['s'], 2);
    EXPECT_EQ(rewritten['f'], six ? static_cast<int>(feed_before.size()) : 0);
    EXPECT_GE(legacy_keys, six ? 10 : 6);
    ASSERT_NO_FATAL_FAILURE(ExpectRefusedAsOlder(format));
    auto expect_as_before = [&](Store* store) {
      EXPECT_EQ(ReceiptsJson(store), before);
      std::vector<Change> feed;
      ASSERT_TRUE(store->feed()
                      .Read(0, feed_before.size(),
                            [&](const Change& c) {
                              feed.push_back(c);
                              return true;
                            })
                      .ok());
      EXPECT_EQ(feed, feed_before);
      Result<EntityLog> log = store->Log("receipt", "rcp_1");
      ASSERT_TRUE(log.ok());
      EXPECT_EQ(EntityLogToJson(*log), log_before);
      for (const std::string& body : issued) {
        EXPECT_EQ(store->Ingest(body).outcome, Outcome::kDuplicate);
        EXPECT_EQ(store->Ingest(body + " ").outcome, Outcome::kDuplicate) << "other bytes";
      }
      IngestResult c = store->Ingest(Refunded("evt_i0", "rcp_1"));
      EXPECT_EQ(c.outcome, Outcome::kConflict);
      EXPECT_NE(c.message.find("receipt.issued"), std::string::npos) << c.message;
    };
    o.upgrade_format = true;
    std::vector<uint64_t> progress;  // what the upgrade reported, in order
    o.upgrade_progress = [&progress](uint64_t keys) { progress.push_back(keys); };
    {
      auto store = Open(o);
      ASSERT_TRUE(store);
      expect_as_before(store.get());
      test_util::ExpectCheckClean(store.get());
    }
    // Counts that only grow, ending at every key left in the old grammar.
    ASSERT_FALSE(progress.empty()) << "the upgrade reported no progress";
    EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
    EXPECT_EQ(progress.back(), static_cast<uint64_t>(legacy_keys));
    o.upgrade_progress = nullptr;
    o.upgrade_format = false;
    auto store = Open(o);
    ASSERT_TRUE(store) << "an upgraded store opens without the option";
    expect_as_before(store.get());
    MustAccept(store.get(), Refunded("evt_r2", "rcp_2"));
    EXPECT_EQ(store->Get("receipt", "rcp_2").value().state, "refunded");
    EXPECT_EQ(store->Ingest(Refunded("evt_r2", "rcp_2") + "\n").outcome, Outcome::kDuplicate);
    test_util::ExpectCheckClean(store.get());
  }

  void MustAccept(Store* store, const std::string& body) {
    IngestResult r = store->Ingest(body);
    EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message << "\n" << body;
  }

  std::unique_ptr<leveldb::Env> env_;
  mutable ManualClock clock_;
  const std::string path_ = "/mem/store";
};

// Suite name: the area prefix lets `ctest -R storage` select these.
using storage_store = StoreTest;

TEST(storage_options, DefaultsAreTheSafeOnes) {
  Options o;
  EXPECT_EQ(o.durability, Durability::kSync);
  EXPECT_TRUE(o.create_if_missing);
  EXPECT_FALSE(o.error_if_exists);
  EXPECT_EQ(o.max_body_bytes, size_t{1} << 20);
  EXPECT_FALSE(o.profile.has_value());
  EXPECT_EQ(o.clock, nullptr);
  EXPECT_EQ(o.env, nullptr);
}

TEST_F(storage_store, IngestThenGet) {
  auto store = Open();
  ASSERT_TRUE(store);
  IngestResult r = store->Ingest(Issued("evt_1", "rcp_1", "2026-11-29T10:15:30.123Z", 1));
  EXPECT_EQ(r.outcome, Outcome::kAccepted);
  EXPECT_EQ(r.http_status(), 200);
  EXPECT_EQ(r.message, "");
  EXPECT_EQ(r.ResponseBody(), R"({"status":"accepted"})");
  EXPECT_EQ(r.event_id, "evt_1");
  EXPECT_EQ(r.entity, (EntityRef{"receipt", "rcp_1"}));

  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->entity, "receipt");
  EXPECT_EQ(p->id, "rcp_1");
  EXPECT_EQ(p->state, "issued");
  EXPECT_EQ(p->fields,
            (std::vector<Field>{
                {"receipt_id", "\"rcp_1\""}, {"amount", "1500"}, {"currency", "\"THB\""}}));
  EXPECT_EQ(p->version, 1);
  EXPECT_EQ(p->applied, 1u);
  EXPECT_TRUE(p->rejected.empty());
  EXPECT_EQ(p->occurred_at, 1795947330123000);  // 2026-11-29T10:15:30.123Z

  EXPECT_TRUE(store->Get("receipt", "rcp_2").status().IsNotFound());
  EXPECT_TRUE(store->Get("product", "rcp_1").status().IsNotFound());
  EXPECT_TRUE(store->Log("receipt", "rcp_2").status().IsNotFound());
  EXPECT_EQ(store->counters().accepted, 1u);
}

TEST_F(storage_store, DuplicateIs200AndChangesNothing) {
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  IngestResult r = store->Ingest(Issued("evt_1", "rcp_1"));
  EXPECT_EQ(r.outcome, Outcome::kDuplicate);
  EXPECT_EQ(r.http_status(), 200);
  EXPECT_EQ(r.ResponseBody(), R"({"status":"duplicate"})");
  // Same identity (type, occurred_at, entity), other payload: still a
  // duplicate, and the first body's data stays.
  r = store->Ingest(Issued("evt_1", "rcp_1", "2026-11-29T10:15:30.123Z", std::nullopt, 42));
  EXPECT_EQ(r.outcome, Outcome::kDuplicate) << r.message;
  // The same instant spelled differently is the same occurred_at.
  r = store->Ingest(Issued("evt_1", "rcp_1", "2026-11-29T17:15:30.123000+07:00"));
  EXPECT_EQ(r.outcome, Outcome::kDuplicate) << r.message;

  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->applied, 1u);
  EXPECT_EQ(p->fields[1], (Field{"amount", "1500"}));
  Result<EntityLog> log = store->Log("receipt", "rcp_1");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->fold_order.size(), 1u);
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.duplicate, 3u);
}

// A byte-identical redelivery is answered from the dedup entry's body digest
// without decoding; anything that is not the same bytes takes the full path.
TEST_F(storage_store, SameBytesAreADuplicateWithoutTheFullDecode) {
  auto store = Open();
  const std::string body = Issued("evt_1", "rcp_1");
  MustAccept(store.get(), body);
  IngestResult r = store->Ingest(body);
  EXPECT_EQ(r.outcome, Outcome::kDuplicate);
  EXPECT_EQ(r.event_id, "evt_1");
  EXPECT_EQ(r.entity, (EntityRef{"receipt", "rcp_1"}));
  // The header rule still holds for the same bytes.
  r = store->Ingest(Delivery{{{"X-RR-Event-Id", "evt_9"}}, body});
  EXPECT_EQ(r.outcome, Outcome::kInvalid) << r.message;
  EXPECT_EQ(store->Ingest(Delivery{{{"X-RR-Event-Id", "evt_1"}}, body}).outcome,
            Outcome::kDuplicate);
  // A nested "event_id" naming the stored event: the guess finds evt_1, the
  // digest differs, and the full decode sees evt_2.
  const std::string nested =
      R"({"data":{"event_id":"evt_1","receipt_id":"rcp_2","amount":1,"currency":"THB"},)"
      R"("event_id":"evt_2","type":"receipt.issued","occurred_at":"2026-11-29T10:15:30.123Z"})";
  r = store->Ingest(nested);
  EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  EXPECT_EQ(r.event_id, "evt_2");
  EXPECT_EQ(store->Ingest(nested).outcome, Outcome::kDuplicate);
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, 2u);
  EXPECT_EQ(c.duplicate, 3u);
  EXPECT_EQ(c.invalid, 1u);
}

TEST_F(storage_store, ConflictIs409AndTheFirstOneWins) {
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  const std::vector<std::pair<std::string, std::string>> conflicting = {
      {"other type", Refunded("evt_1", "rcp_1", "2026-11-29T10:15:30.123Z")},
      {"other occurred_at", Issued("evt_1", "rcp_1", "2026-11-29T10:15:30.124Z")},
      {"other entity", Issued("evt_1", "rcp_2")},
      {"unrouted type", Body("evt_1", "invoice.paid", "2026-11-29T10:15:30.123Z", "{}")},
  };
  for (const auto& [what, body] : conflicting) {
    IngestResult r = store->Ingest(body);
    EXPECT_EQ(r.outcome, Outcome::kConflict) << what;
    EXPECT_EQ(r.http_status(), 409) << what;
    EXPECT_TRUE(r.message.starts_with("event_id:")) << what << ": " << r.message;
    EXPECT_NE(r.message.find("evt_1"), std::string::npos) << r.message;
  }
  // The projection keeps the first event's data; the conflicting entity
  // got nothing.
  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "issued");
  EXPECT_EQ(p->applied, 1u);
  EXPECT_EQ(p->occurred_at, 1795947330123000);
  EXPECT_TRUE(store->Get("receipt", "rcp_2").status().IsNotFound());
  EXPECT_EQ(store->Log("receipt", "rcp_1")->fold_order.size(), 1u);
  // The original is still a duplicate after the conflicts.
  EXPECT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kDuplicate);
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.conflict, 4u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(c.unrouted, 0u);
}

TEST_F(storage_store, InvalidIs400AndNamesTheField) {
  auto store = Open();
  const std::string at = "2026-11-29T10:15:30Z";
  const std::string data = R"({"receipt_id":"rcp_1"})";
  struct Case {
    std::string body;
    std::string field;  // the message starts with "<field>:"
  };
  const std::vector<Case> cases = {
      {"not json at all", "body"},
      {"", "body"},
      {"[1,2]", "body"},
      {R"({"event_id":"evt_1","type":"receipt.issued")", "body"},  // truncated
      {R"({"type":"receipt.issued","occurred_at":"2026-11-29T10:15:30Z","data":{}})", "event_id"},
      {Body("evt 1", "receipt.issued", at, data), "event_id"},
      {Body(std::string(129, 'e'), "receipt.issued", at, data), "event_id"},
      {R"({"event_id":"evt_1","occurred_at":"2026-11-29T10:15:30Z","data":{}})", "type"},
      {Body("evt_1", "receipt", at, data), "type"},
      {R"({"event_id":"evt_1","type":"receipt.issued","data":{}})", "occurred_at"},
      {Body("evt_1", "receipt.issued", "2026-02-30T10:15:30Z", data), "occurred_at"},
      {Body("evt_1", "receipt.issued", "yesterday", data), "occurred_at"},
      {Body("evt_1", "receipt.issued", "2026-11-29 10:15:30", data), "occurred_at"},
      {Body("evt_1", "receipt.issued", at, data, -1), "version"},
      {R"({"event_id":"evt_1","type":"receipt.issued","occurred_at":"2026-11-29T10:15:30Z"})",
       "data"},
      {Body("evt_1", "receipt.issued", at, "[1]"), "data"},
      {Body("evt_1", "receipt.issued", at, R"({"amount":1})"), "data.receipt_id"},
      {Body("evt_1", "receipt.issued", at, R"({"receipt_id":true})"), "data.receipt_id"},
      {Body("evt_1", "receipt.issued", at, R"({"receipt_id":1.5})"), "data.receipt_id"},
  };
  for (const Case& c : cases) {
    IngestResult r = store->Ingest(c.body);
    EXPECT_EQ(r.outcome, Outcome::kInvalid) << c.body;
    EXPECT_EQ(r.http_status(), 400) << c.body;
    EXPECT_TRUE(r.message.starts_with(c.field + ":"))
        << "body " << c.body << "\nwant field " << c.field << ", got: " << r.message;
    EXPECT_NE(r.ResponseBody().find("\"status\":\"invalid\""), std::string::npos);
  }
  EXPECT_EQ(store->counters().invalid, cases.size());
  EXPECT_EQ(store->counters().accepted, 0u);
  EXPECT_TRUE(ListAll(store.get()).empty());
  // Nothing was stored under any of those ids: a valid evt_1 is new.
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  // A JSON integer key is taken as its decimal text.
  MustAccept(store.get(), Body("evt_2", "receipt.issued", at, R"({"receipt_id":12})"));
  EXPECT_TRUE(store->Get("receipt", "12").ok());
}

TEST_F(storage_store, TooLargeIs413CheckedBeforeParsing) {
  auto store = Open();
  // 2 MiB of non-JSON: the size is refused before the body is read.
  IngestResult r = store->Ingest(std::string(2 << 20, 'x'));
  EXPECT_EQ(r.outcome, Outcome::kTooLarge);
  EXPECT_EQ(r.http_status(), 413);
  EXPECT_TRUE(r.message.starts_with("body:")) << r.message;
  // A valid event over the limit is refused too.
  std::string big = Body("evt_big", "receipt.issued", "2026-11-29T10:15:30Z",
                         R"({"receipt_id":"rcp_big","pad":")" + std::string(1 << 20, 'p') + "\"}");
  EXPECT_EQ(store->Ingest(big).outcome, Outcome::kTooLarge);
  EXPECT_EQ(store->counters().too_large, 2u);
  EXPECT_EQ(store->counters().invalid, 0u);
  EXPECT_TRUE(store->Get("receipt", "rcp_big").status().IsNotFound());
  store.reset();

  // The limit is Options::max_body_bytes, inclusive.
  Options o = Opts();
  const std::string body = Issued("evt_1", "rcp_1");
  o.max_body_bytes = body.size() - 1;
  store = Open(o);
  EXPECT_EQ(store->Ingest(body).outcome, Outcome::kTooLarge);
  EXPECT_EQ(store->Ingest(std::string(body.size(), '{')).outcome, Outcome::kTooLarge);
  store.reset();
  o.max_body_bytes = body.size();
  store = Open(o);
  EXPECT_EQ(store->Ingest(body).outcome, Outcome::kAccepted);
}

TEST_F(storage_store, UnknownTypeIsStoredAndUnrouted) {
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  IngestResult r = store->Ingest(InvoicePaid("evt_inv_1", "inv_1"));
  EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  EXPECT_EQ(r.http_status(), 200);
  EXPECT_FALSE(r.entity.has_value());
  EXPECT_EQ(store->counters().unrouted, 1u);
  EXPECT_EQ(store->counters().accepted, 2u);
  // Listed by no projection.
  std::vector<std::string> all = ListAll(store.get());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_NE(all[0].find("rcp_1"), std::string::npos);
  EXPECT_TRUE(store->Get("invoice", "inv_1").status().IsNotFound());
  // Stored: a redelivery is a duplicate, not counted as unrouted again.
  EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv_1", "inv_1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->counters().unrouted, 1u);
}

TEST_F(storage_store, EventIdHeaderMustMatchTheBody) {
  auto store = Open();
  IngestResult r = store->Ingest(Delivery{{{"X-RR-Event-Id", "evt_2"}}, Issued("evt_1", "rcp_1")});
  EXPECT_EQ(r.outcome, Outcome::kInvalid);
  EXPECT_EQ(r.http_status(), 400);
  EXPECT_TRUE(r.message.starts_with("X-RR-Event-Id:")) << r.message;
  EXPECT_TRUE(store->Get("receipt", "rcp_1").status().IsNotFound());
  // Header names are case-insensitive; a matching one is fine.
  r = store->Ingest(Delivery{{{"x-rr-event-id", "evt_1"}}, Issued("evt_1", "rcp_1")});
  EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  r = store->Ingest(Delivery{{{"X-RR-EVENT-ID", "EVT_1"}}, Issued("evt_1", "rcp_1")});
  EXPECT_EQ(r.outcome, Outcome::kInvalid) << "values compare exactly";
}

TEST_F(storage_store, LateEventRefolds) {
  auto store = Open();
  // The refund arrives first: rejected, nothing applied.
  MustAccept(store.get(), Refunded("evt_2", "rcp_1", "2026-11-29T11:00:00Z"));
  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok()) << "an entity whose events were all rejected still has a projection";
  EXPECT_EQ(p->state, "none");
  EXPECT_EQ(p->applied, 0u);
  EXPECT_FALSE(p->occurred_at.has_value());
  EXPECT_FALSE(p->version.has_value());
  ASSERT_EQ(p->rejected.size(), 1u);
  EXPECT_EQ(p->rejected[0],
            (Rejection{"evt_2", "receipt.refunded", "impossible transition none -> refunded"}));
  // Then the issue, which sorts before it: both applied.
  MustAccept(store.get(), Issued("evt_1", "rcp_1", "2026-11-29T10:15:30.123Z"));
  p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "refunded");
  EXPECT_EQ(p->applied, 2u);
  EXPECT_TRUE(p->rejected.empty());
  EXPECT_EQ(p->occurred_at, 1795950000000000);  // 2026-11-29T11:00:00Z

  // Versions: an older version that occurred later is stale.
  MustAccept(store.get(), Body("inv_3", "inventory.updated", "2026-11-29T10:00:00Z",
                               R"({"product_id":"p1","qty":3})", 3));
  MustAccept(store.get(), Body("inv_2", "inventory.updated", "2026-11-29T10:05:00Z",
                               R"({"product_id":"p1","qty":2})", 2));
  MustAccept(store.get(), Body("inv_1", "inventory.updated", "2026-11-29T09:00:00Z",
                               R"({"product_id":"p1","qty":1})", 1));
  p = store->Get("inventory", "p1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "tracked");
  EXPECT_EQ(p->version, 3);
  EXPECT_EQ(p->applied, 2u);
  ASSERT_EQ(p->rejected.size(), 1u);
  EXPECT_EQ(p->rejected[0].reason, "stale version 2 (entity is at version 3)");
  EXPECT_EQ(p->fields[1], (Field{"qty", "3"}));
}

TEST_F(storage_store, LogShowsArrivalAndFoldOrderWithVerdicts) {
  auto store = Open();
  clock_.Set(kStart + 10);
  MustAccept(store.get(), Refunded("evt_2", "rcp_1", "2026-11-29T11:00:00Z", 2));
  clock_.Set(kStart + 20);
  MustAccept(store.get(), Issued("evt_other", "rcp_9"));  // another entity in between
  clock_.Set(kStart + 30);
  MustAccept(store.get(), Body("evt_9", "receipt.issued", "2026-11-29T12:00:00Z",
                               R"({"receipt_id":"rcp_1","amount":9999})"));
  clock_.Set(kStart + 40);
  MustAccept(store.get(), Issued("evt_1", "rcp_1", "2026-11-29T10:15:30.123Z", 1));

  Result<EntityLog> log = store->Log("receipt", "rcp_1");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->ref, (EntityRef{"receipt", "rcp_1"}));
  ASSERT_EQ(log->fold_order.size(), 3u);
  const LoggedEvent& a = log->fold_order[0];
  const LoggedEvent& b = log->fold_order[1];
  const LoggedEvent& c = log->fold_order[2];
  EXPECT_EQ(a.event.event_id, "evt_1");
  EXPECT_TRUE(a.applied);
  EXPECT_EQ(a.reason, "");
  EXPECT_EQ(a.received_at, kStart + 40);
  EXPECT_EQ(a.event.version, 1);
  EXPECT_EQ(a.event.type, "receipt.issued");
  EXPECT_EQ(b.event.event_id, "evt_2");
  EXPECT_TRUE(b.applied);
  EXPECT_EQ(b.received_at, kStart + 10);
  EXPECT_EQ(c.event.event_id, "evt_9");
  EXPECT_FALSE(c.applied);
  EXPECT_EQ(c.reason, "impossible transition refunded -> issued");
  EXPECT_EQ(c.received_at, kStart + 30);
  // Arrival order is by seq: evt_2, (evt_other), evt_9, evt_1.
  EXPECT_LT(b.seq, c.seq);
  EXPECT_LT(c.seq, a.seq);
  EXPECT_GT(c.seq, b.seq + 1) << "evt_other took a seq in between";
  // The log's events carry their data as the fold saw it.
  EXPECT_EQ(c.event.data, (std::vector<Field>{{"receipt_id", "\"rcp_1\""}, {"amount", "9999"}}));

  const std::string json = EntityLogToJson(*log);
  const size_t arrival = json.find("\"arrival\":[");
  const size_t fold = json.find("\"fold\":[");
  ASSERT_NE(arrival, std::string::npos);
  ASSERT_NE(fold, std::string::npos);
  auto pos = [&](size_t from, const std::string& id) {
    return json.find("\"event_id\":\"" + id + "\"", from);
  };
  EXPECT_LT(pos(arrival, "evt_2"), pos(arrival, "evt_9"));
  EXPECT_LT(pos(arrival, "evt_9"), pos(arrival, "evt_1"));
  EXPECT_LT(pos(fold, "evt_1"), pos(fold, "evt_2"));
  EXPECT_LT(pos(fold, "evt_2"), pos(fold, "evt_9"));
  EXPECT_NE(
      json.find("\"verdict\":\"rejected\",\"reason\":\"impossible transition refunded -> issued\""),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"received_at\":\"" + FormatTimestamp(kStart + 40) + "\""),
            std::string::npos)
      << json;

  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(ProjectionToJson(*p),
            R"({"entity":"receipt","id":"rcp_1","state":"refunded",)"
            R"("fields":{"receipt_id":"rcp_1","amount":1500,"currency":"THB"},)"
            R"("version":2,"applied":2,)"
            R"("rejected":[{"event_id":"evt_9","type":"receipt.issued",)"
            R"("reason":"impossible transition refunded -> issued"}],)"
            R"("occurred_at":"2026-11-29T11:00:00.000000Z"})");
}

TEST_F(storage_store, ListOrdersByEntityThenIdBytewiseAndFilters) {
  auto store = Open();
  // ids chosen so that bytewise, numeric and case-insensitive orders differ.
  const std::vector<std::string> receipts = {"b", "a", "B", "aa", "10", "9", "\xc3\xa9", "a-"};
  int n = 0;
  for (const std::string& id : receipts) {
    MustAccept(store.get(), Issued("evt_r" + std::to_string(n++), id));
  }
  MustAccept(store.get(),
             Body("evt_p1", "product.created", "2026-11-29T10:00:00Z", R"({"product_id":"z"})"));
  MustAccept(store.get(), Body("evt_i1", "inventory.updated", "2026-11-29T10:00:00Z",
                               R"({"product_id":"z","qty":1})"));
  std::vector<std::pair<std::string, std::string>> seen;
  ASSERT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           seen.emplace_back(p.entity, p.id);
                           return true;
                         })
                  .ok());
  const std::vector<std::pair<std::string, std::string>> want = {
      {"inventory", "z"}, {"product", "z"},        {"receipt", "10"}, {"receipt", "9"},
      {"receipt", "B"},   {"receipt", "a"},        {"receipt", "a-"}, {"receipt", "aa"},
      {"receipt", "b"},   {"receipt", "\xc3\xa9"},
  };
  EXPECT_EQ(seen, want);

  seen.clear();
  ASSERT_TRUE(store
                  ->List("receipt",
                         [&](const Projection& p) {
                           seen.emplace_back(p.entity, p.id);
                           return true;
                         })
                  .ok());
  const std::vector<std::pair<std::string, std::string>> receipts_only(want.begin() + 2,
                                                                       want.end());
  EXPECT_EQ(seen, receipts_only);
  EXPECT_EQ(ListAll(store.get(), "product").size(), 1u);
  EXPECT_TRUE(ListAll(store.get(), "invoice").empty());
  EXPECT_TRUE(ListAll(store.get(), "receip").empty()) << "a prefix of an entity name is not it";

  // Returning false stops the scan.
  int calls = 0;
  ASSERT_TRUE(store->List("", [&](const Projection&) { return ++calls < 3; }).ok());
  EXPECT_EQ(calls, 3);
}

TEST_F(storage_store, ListKeepsEntitiesWhoseNamesArePrefixesApart) {
  // Entity "a" is a prefix of entity "ab": a/z must list before ab/a, and
  // List("a") must not include ab's projections.
  auto store = OpenWithPrefixEntities();
  ASSERT_TRUE(store);
  const std::string at = "2026-11-29T10:00:00Z";
  MustAccept(store.get(), Body("e1", "ab.created", at, R"({"id":"a"})"));
  MustAccept(store.get(), Body("e2", "a.created", at, R"({"id":"z"})"));
  MustAccept(store.get(), Body("e3", "a.created", at, R"({"id":"b"})"));
  MustAccept(store.get(), Body("e4", "ab.created", at, R"({"id":"\u0001"})"));
  std::vector<std::string> order;
  ASSERT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           order.push_back(p.entity + "/" + p.id);
                           return true;
                         })
                  .ok());
  EXPECT_EQ(order, (std::vector<std::string>{"a/b", "a/z", "ab/\x01", "ab/a"}));
  order.clear();
  ASSERT_TRUE(store
                  ->List("a",
                         [&](const Projection& p) {
                           order.push_back(p.entity + "/" + p.id);
                           return true;
                         })
                  .ok());
  EXPECT_EQ(order, (std::vector<std::string>{"a/b", "a/z"}));
}

// ListAfter, the paging read: over seeded random ids in two entities whose
// names are prefixes apart, resuming after any listed projection, or after
// any position at all (listed or not, of the scope or not), gives exactly
// the part of List that follows it, and pages of any size rebuild List.
TEST_F(storage_store, ListAfterResumesExactlyWhereAPageEnded) {
  const uint64_t seed =
      test_util::TestSeed("storage_store.ListAfterResumesExactlyWhereAPageEnded", 11);
  std::mt19937_64 rng(seed);
  auto store = OpenWithPrefixEntities();
  ASSERT_TRUE(store);
  // Bytes that sort apart from each other and from the key's separator.
  const std::vector<std::pair<std::string, std::string>> letters = {
      {"\x01", "\\u0001"}, {" ", " "}, {"%", "%"}, {"/", "/"},
      {"a", "a"},          {"b", "b"}, {"z", "z"}, {"\xc3\xa9", "\xc3\xa9"}};
  const auto random_id = [&](std::string* json) {
    std::string id;
    for (size_t n = 1 + rng() % 3; n > 0; --n) {
      const auto& [raw, escaped] = letters[rng() % letters.size()];
      id += raw;
      if (json) *json += escaped;
    }
    return id;
  };
  std::set<EntityRef> stored;
  for (int i = 0; i < 80; ++i) {
    const std::string entity = rng() % 2 ? "a" : "ab";
    std::string json;
    const std::string id = random_id(&json);
    if (!stored.insert(EntityRef{entity, id}).second) continue;
    MustAccept(store.get(), Body("e" + std::to_string(i), entity + ".created",
                                 "2026-11-29T10:00:00Z", R"({"id":")" + json + R"("})"));
  }
  const auto list = [&](std::string_view scope, const EntityRef* after, size_t max) {
    std::vector<EntityRef> out;
    const auto take = [&](const Projection& p) {
      out.push_back(EntityRef{p.entity, p.id});
      return out.size() < max;
    };
    Status st = after ? store->ListAfter(scope, *after, take) : store->List(scope, take);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  };
  for (const std::string scope : {"", "a", "ab"}) {
    SCOPED_TRACE("scope \"" + scope + "\"");
    std::vector<EntityRef> all;
    for (const EntityRef& r : stored) {
      if (scope.empty() || r.entity == scope) all.push_back(r);
    }
    ASSERT_EQ(list(scope, nullptr, SIZE_MAX), all);
    const auto following = [&](const EntityRef& after) {
      return std::vector<EntityRef>(std::upper_bound(all.begin(), all.end(), after), all.end());
    };
    for (const EntityRef& r : all) EXPECT_EQ(list(scope, &r, SIZE_MAX), following(r));
    for (int i = 0; i < 40; ++i) {
      const EntityRef r{std::vector<std::string>{"", "a", "aa", "ab", "b"}[rng() % 5],
                        rng() % 4 ? random_id(nullptr) : ""};
      EXPECT_EQ(list(scope, &r, SIZE_MAX), following(r)) << r.entity << "/" << r.id;
    }
    const size_t page = 1 + rng() % 7;
    std::vector<EntityRef> paged = list(scope, nullptr, page);
    while (!paged.empty() && paged.size() < all.size()) {
      std::vector<EntityRef> next = list(scope, &paged.back(), page);
      if (next.empty()) break;
      paged.insert(paged.end(), next.begin(), next.end());
    }
    EXPECT_EQ(paged, all) << "pages of " << page;
  }
}

// Rewrites every m/ and k/ value as formats 1 and 2 stored it: bare text.
void UnframeMetadata(leveldb::DB* db) {
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
  leveldb::WriteBatch batch;
  for (std::string_view family : {storage::kMetaPrefix, storage::kCheckpointPrefix}) {
    for (it->Seek(std::string(family)); it->Valid() && it->key().starts_with(std::string(family));
         it->Next()) {
      Result<std::string> text = storage::DecodeText(it->key().ToString(), it->value().ToString());
      ASSERT_TRUE(text.ok()) << text.status().ToString();
      batch.Put(it->key(), *text);
    }
  }
  ASSERT_TRUE(db->Write({}, &batch).ok());
}

TEST_F(storage_store, RefusesAStoreOfAnotherFormat) {
  {
    auto store = Open();
    ASSERT_TRUE(store);
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  }
  auto set_format = [&](const std::optional<std::string>& format) {
    leveldb::Options lo;
    lo.env = env_.get();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, path_, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    const leveldb::Status s =
        format ? db->Put({}, storage::MetaKey("format"), storage::EncodeText(*format))
               : db->Delete({}, storage::MetaKey("format"));
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  set_format("9");
  Result<std::unique_ptr<Store>> newer = Store::Open(path_, Opts());
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(newer.status().IsInvalidArgument()) << newer.status().ToString();
  EXPECT_NE(newer.status().message().find("store format 9 is not supported"), std::string::npos)
      << newer.status().ToString();
  set_format(std::nullopt);
  Result<std::unique_ptr<Store>> unmarked = Store::Open(path_, Opts());
  ASSERT_FALSE(unmarked.ok());
  EXPECT_TRUE(unmarked.status().IsCorruption()) << unmarked.status().ToString();
  set_format(std::string(storage::kFormatVersion));
  auto store = Open();
  ASSERT_TRUE(store) << "the right format opens again, nothing lost";
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued");
}

// A format 1 store: its log records carry their data, its m/ and k/ values
// are bare text. Open refuses it and names the command; with upgrade_format
// it opens, becomes the current format, reads the old records as they are
// and writes lean ones beside them.
TEST_F(storage_store, UpgradesAFormat1StoreOnlyWhenAsked) {
  {
    auto store = Open();
    ASSERT_TRUE(store);
    MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));  // late: a re-fold reads the log
    ASSERT_TRUE(store->feed().SetCheckpoint("mailer", 1).ok());
  }
  {
    // Rewrite it as format 1 wrote it: every log record with its data.
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    const uint32_t gen = RawGeneration(db.get());
    const std::string prefix = storage::LogFamilyPrefix(gen);
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
    int rewritten = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string key = it->key().ToString();
      std::optional<storage::LogEntry> e(std::in_place);
      ASSERT_NO_FATAL_FAILURE(RawLogEntry(db.get(), key, storage::View(it->value()), &*e));
      ASSERT_FALSE(e->has_data) << "format 2 writes lean log records";
      storage::StoredEvent stored;
      ASSERT_NO_FATAL_FAILURE(RawStoredEvent(db.get(), e->seq, &stored));
      Result<DecodedEvent> decoded = DecodeEvent(stored.body, Profile::ReceiptRoller());
      ASSERT_TRUE(decoded.ok());
      e->ranked.event.data = decoded->event.data;
      ASSERT_TRUE(db->Put({}, key, storage::EncodeLogWithData(*e)).ok());
      ++rewritten;
    }
    EXPECT_EQ(rewritten, 2);
    UnframeMetadata(db.get());
    ASSERT_TRUE(db->Put({}, storage::MetaKey("format"), "1").ok());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRefusedAsOlder("1"));
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    std::string format;
    ASSERT_TRUE(db->Get({}, storage::MetaKey("format"), &format).ok());
    EXPECT_EQ(format, "1") << "a refusal writes nothing";
  }
  {
    auto store = OpenUpgrading();
    ASSERT_TRUE(store);
    Result<Projection> p = store->Get("receipt", "rcp_1");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->state, "refunded");
    Result<uint64_t> checkpoint = store->feed().GetCheckpoint("mailer");
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
    EXPECT_EQ(*checkpoint, 1u) << "a bare checkpoint is framed, not lost";
    // A late refund between the two re-folds the format 1 records: the
    // issue's amount comes from its record's data.
    MustAccept(store.get(), Body("evt_0", "receipt.refunded", "2026-11-29T10:30:00Z",
                                 "{\"receipt_id\":\"rcp_1\",\"note\":\"early\"}"));
    p = store->Get("receipt", "rcp_1");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->state, "refunded");
    ASSERT_EQ(p->rejected.size(), 1u) << "the second refund is impossible";
    EXPECT_EQ(p->rejected[0].event_id, "evt_2");
    bool amount = false;
    for (const Field& f : p->fields) amount = amount || (f.name == "amount" && f.json == "1500");
    EXPECT_TRUE(amount) << "data read from a format 1 log record";
  }
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    std::string format;
    ASSERT_TRUE(db->Get({}, storage::MetaKey("format"), &format).ok());
    EXPECT_EQ(storage::DecodeText(storage::MetaKey("format"), format).value(),
              storage::kFormatVersion);
  }
  auto store = Open();
  ASSERT_TRUE(store) << "an upgraded store opens without the option";
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "refunded");
}

// A format 3 store keeps each projection whole. Open refuses it and names
// the command; upgraded, it reads the whole records as they are, and an
// entity's next event replaces its record with the cursor (format 4), from
// which reads fold the same projection. Check finds nothing either way.
TEST_F(storage_store, UpgradesAFormat3StoreOnlyWhenAsked) {
  std::map<std::string, Projection> before;
  {
    Options o = Opts();
    o.snapshot_interval = 2;
    auto store = Open(o);
    ASSERT_TRUE(store);
    MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));
    MustAccept(store.get(), Issued("evt_3", "rcp_2"));
    MustAccept(store.get(), Refunded("evt_4", "rcp_2"));
    MustAccept(store.get(), Issued("evt_5", "rcp_3"));
    for (const char* id : {"rcp_1", "rcp_2", "rcp_3"})
      before[id] = store->Get("receipt", id).value();
  }
  // Counts the projection records in each form.
  auto count_forms = [&](int* whole, int* cursors) {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    *whole = *cursors = 0;
    const std::string prefix = storage::ProjectionScanPrefix(1, "");
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      Result<storage::ProjectionState> p =
          storage::DecodeProjection(it->key().ToString(), it->value().ToString());
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      ++(p->cursor_only ? *cursors : *whole);
    }
  };
  int whole = 0, cursors = 0;
  count_forms(&whole, &cursors);
  EXPECT_EQ(whole, 0);
  EXPECT_EQ(cursors, 3) << "format 4 writes each projection as its cursor";
  {
    // Rewrite it as format 3 wrote it: every projection whole.
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    const std::string prefix = storage::ProjectionScanPrefix(1, "");
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
    leveldb::WriteBatch batch;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      Result<storage::ProjectionState> p =
          storage::DecodeProjection(it->key().ToString(), it->value().ToString());
      ASSERT_TRUE(p.ok());
      p->cursor_only = false;
      p->projection = before.at(p->projection.id);
      batch.Put(it->key(), storage::EncodeProjection(*p));
    }
    batch.Put(storage::MetaKey("format"), storage::EncodeText("3"));
    ASSERT_TRUE(db->Write({}, &batch).ok());
  }
  count_forms(&whole, &cursors);
  ASSERT_EQ(whole, 3);
  ASSERT_NO_FATAL_FAILURE(ExpectRefusedAsOlder("3"));
  {
    Options o = Opts();
    o.snapshot_interval = 2;
    o.upgrade_format = true;
    auto store = Open(o);
    ASSERT_TRUE(store);
    for (const auto& [id, p] : before) {
      Result<Projection> got = store->Get("receipt", id);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(ProjectionToJson(*got), ProjectionToJson(p)) << "a whole record, read as it is";
    }
    // A late refund for rcp_3 (it folds before the issue: re-fold) and an
    // in-order one for rcp_1 (applied to the whole record as it is).
    MustAccept(store.get(), Refunded("evt_6", "rcp_3", "2026-11-29T09:00:00Z"));
    MustAccept(store.get(), Body("evt_7", "receipt.refunded", "2026-11-30T10:00:00Z",
                                 "{\"receipt_id\":\"rcp_1\",\"note\":\"again\"}"));
    test_util::ExpectCheckClean(store.get());
  }
  count_forms(&whole, &cursors);
  EXPECT_EQ(whole, 1) << "rcp_2 had no event since the upgrade";
  EXPECT_EQ(cursors, 2);
  auto store = Open();
  ASSERT_TRUE(store) << "an upgraded store opens without the option";
  EXPECT_EQ(ProjectionToJson(store->Get("receipt", "rcp_2").value()),
            ProjectionToJson(before.at("rcp_2")));
  Result<Projection> rcp1 = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(rcp1.ok());
  EXPECT_EQ(rcp1->state, "refunded");
  ASSERT_EQ(rcp1->rejected.size(), 1u) << "the second refund is impossible";
  EXPECT_EQ(rcp1->rejected[0].event_id, "evt_7");
  Result<Projection> rcp3 = store->Get("receipt", "rcp_3");
  ASSERT_TRUE(rcp3.ok());
  EXPECT_EQ(rcp3->state, "issued");
  EXPECT_EQ(rcp3->applied, 1u);
  ASSERT_EQ(rcp3->rejected.size(), 1u) << "a refund before the issue is impossible";
  EXPECT_EQ(rcp3->rejected[0].event_id, "evt_6");
}

// A format 4 store keeps its logs under m/generation and has no
// m/log_generation. Open refuses it and names the command; upgraded, the
// log generation is recorded as that generation, the store reads as
// before, and a rebuild under the same profile keeps those logs beside its
// new projections. Check finds nothing either way.
TEST_F(storage_store, UpgradesAFormat4StoreOnlyWhenAsked) {
  std::map<std::string, std::string> before;
  {
    auto store = Open();
    ASSERT_TRUE(store);
    MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));
    MustAccept(store.get(), Issued("evt_3", "rcp_2"));
    // Logs and projections under generation 2, as format 4 kept them.
    RebuildOptions rederive;
    rederive.rederive_logs = true;
    ASSERT_TRUE(store->maintenance().Rebuild(rederive).ok());
    before = ReceiptsJson(store.get());
  }
  auto meta = [&](const char* name) -> std::optional<std::string> {
    std::unique_ptr<leveldb::DB> db = RawDb();
    std::string value;
    if (!db || !db->Get({}, storage::MetaKey(name), &value).ok()) return std::nullopt;
    return storage::DecodeText(storage::MetaKey(name), value).value();
  };
  ASSERT_EQ(meta("generation"), "2");
  ASSERT_EQ(meta("log_generation"), "2");
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    leveldb::WriteBatch batch;
    batch.Delete(storage::MetaKey("log_generation"));
    batch.Put(storage::MetaKey("format"), storage::EncodeText("4"));
    ASSERT_TRUE(db->Write({}, &batch).ok());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectRefusedAsOlder("4"));
  EXPECT_EQ(meta("format"), "4") << "a refusal writes nothing";
  EXPECT_EQ(meta("log_generation"), std::nullopt) << "a refusal writes nothing";
  {
    auto store = OpenUpgrading();
    ASSERT_TRUE(store);
    EXPECT_EQ(ReceiptsJson(store.get()), before);
    test_util::ExpectCheckClean(store.get());
  }
  // (The raw database is read while the store is closed.)
  EXPECT_EQ(meta("format"), std::string(storage::kFormatVersion));
  EXPECT_EQ(meta("log_generation"), "2");
  {
    auto store = Open();
    ASSERT_TRUE(store) << "an upgraded store opens without the option";
    ASSERT_TRUE(store->maintenance().Rebuild(RebuildOptions{}).ok());
    MustAccept(store.get(), Refunded("evt_4", "rcp_2"));
    test_util::ExpectCheckClean(store.get());
  }
  EXPECT_EQ(meta("generation"), "3");
  EXPECT_EQ(meta("log_generation"), "2") << "the same profile keeps the logs";
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(ProjectionToJson(store->Get("receipt", "rcp_1").value()), before.at("rcp_1"));
  EXPECT_EQ(store->Get("receipt", "rcp_2").value().state, "refunded");
  test_util::ExpectCheckClean(store.get());
}

// A format 5 store: its log records repeat their fold position, its dedup
// entries keep their event's type and time and a 32-byte digest. Open
// refuses it and names the command; upgraded, nothing is rewritten and
// every record reads as before: the projections, and redeliveries against
// the old entries and the lean ones written since, after a reopen (so from
// the database, not the memory of recent bodies): the same bytes and other
// bytes of the same event are duplicates, another type is a conflict that
// names the stored one.
TEST_F(storage_store, UpgradesAFormat5StoreOnlyWhenAsked) {
  const std::string issued = Issued("evt_1", "rcp_1");
  std::map<std::string, std::string> before;
  {
    auto store = Open();
    ASSERT_TRUE(store);
    MustAccept(store.get(), issued);
    MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
    MustAccept(store.get(), Issued("evt_3", "rcp_2"));
    before = ReceiptsJson(store.get());
  }
  int rewritten_logs = 0, rewritten_dedup = 0;
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
    const std::string logs = storage::LogFamilyPrefix(RawGeneration(db.get(), "log_generation"));
    for (it->Seek(logs); it->Valid() && it->key().starts_with(logs); it->Next()) {
      storage::LogEntry e;
      ASSERT_NO_FATAL_FAILURE(
          RawLogEntry(db.get(), it->key().ToString(), storage::View(it->value()), &e));
      batch.Put(it->key(), storage_test::EncodeFormat5Log(e));
      ++rewritten_logs;
    }
    const std::string dedup(storage::kDedupPrefix);
    for (it->Seek(dedup); it->Valid() && it->key().starts_with(dedup); it->Next()) {
      const std::string key = it->key().ToString();
      Result<storage::DedupEntry> d = storage::DecodeDedup(key, storage::View(it->value()));
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      ASSERT_FALSE(d->has_identity) << "format 6 leaves it to a/<seq>";
      storage::StoredEvent stored;
      ASSERT_NO_FATAL_FAILURE(RawStoredEvent(db.get(), d->seq, &stored));
      d->type = stored.event.type;
      d->occurred_at = stored.event.occurred_at;
      d->body_digest = Sha256(stored.body);
      batch.Put(key, storage_test::EncodeFormat5Dedup(*d));
      ++rewritten_dedup;
    }
    batch.Put(storage::MetaKey("format"), storage::EncodeText("5"));
    ASSERT_TRUE(db->Write({}, &batch).ok());
  }
  ASSERT_EQ(rewritten_logs, 3);
  ASSERT_EQ(rewritten_dedup, 3);
  ASSERT_NO_FATAL_FAILURE(ExpectRefusedAsOlder("5"));
  auto redeliver = [&](Store* store) {
    EXPECT_EQ(store->Ingest(issued).outcome, Outcome::kDuplicate);
    EXPECT_EQ(store->Ingest(issued + " ").outcome, Outcome::kDuplicate) << "other bytes";
    IngestResult c = store->Ingest(Refunded("evt_1", "rcp_1"));
    EXPECT_EQ(c.outcome, Outcome::kConflict);
    EXPECT_NE(c.message.find("receipt.issued"), std::string::npos) << c.message;
  };
  {
    auto store = OpenUpgrading();
    ASSERT_TRUE(store);
    EXPECT_EQ(ReceiptsJson(store.get()), before);
    redeliver(store.get());
    MustAccept(store.get(), Refunded("evt_4", "rcp_2"));
    test_util::ExpectCheckClean(store.get());
  }
  auto store = Open();
  ASSERT_TRUE(store) << "an upgraded store opens without the option";
  redeliver(store.get());
  EXPECT_EQ(store->Ingest(Refunded("evt_4", "rcp_2") + "\n").outcome, Outcome::kDuplicate);
  IngestResult c = store->Ingest(Issued("evt_4", "rcp_2"));
  EXPECT_EQ(c.outcome, Outcome::kConflict);
  EXPECT_NE(c.message.find("receipt.refunded"), std::string::npos) << c.message;
  EXPECT_EQ(store->Get("receipt", "rcp_2").value().state, "refunded");
}

// A format 6 store: every value of its events is a FlatBuffer (a/, d/, f/,
// the logs, cursors and snapshots). Open refuses it and names the command;
// upgraded, nothing is rewritten and every record reads as before: the
// projections, the logs, the feed, and redeliveries against the old
// entries, after a reopen (so from the database, not the memory of recent
// bodies); new events land beside the old records, and check finds the
// mixed store clean.
TEST_F(storage_store, UpgradesAFormat6StoreOnlyWhenAsked) {
  ExpectUpgradeFromCompactOrFlatBufferFormat("6");
}

TEST_F(storage_store, UpgradesAFormat7StoreOnlyWhenAsked) {
  ExpectUpgradeFromCompactOrFlatBufferFormat("7");
}

TEST_F(storage_store, PersistsAcrossReopen) {
  {
    auto store = Open();
    clock_.Set(kStart + 1);
    MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));
    MustAccept(store.get(), Issued("evt_3", "rcp_2"));
    MustAccept(store.get(), InvoicePaid("evt_inv", "inv_1"));
    EXPECT_EQ(store->Ingest(Refunded("evt_3", "rcp_2")).outcome, Outcome::kConflict);
  }
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->counters().accepted, 0u) << "counters are since open";
  Result<Projection> p = store->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "refunded");
  EXPECT_EQ(p->applied, 2u);
  EXPECT_EQ(ListAll(store.get()).size(), 2u);
  // Dedup survived: every old id is a duplicate (the unrouted one too), and
  // the conflict's loser is still a conflict.
  EXPECT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(Refunded("evt_2", "rcp_1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv", "inv_1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(Refunded("evt_3", "rcp_2")).outcome, Outcome::kConflict);
  // The sequence continues: a new event arrives after the old ones.
  clock_.Set(kStart + 2);
  MustAccept(store.get(), Refunded("evt_4", "rcp_2"));
  Result<EntityLog> log = store->Log("receipt", "rcp_2");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->fold_order.size(), 2u);
  EXPECT_EQ(log->fold_order[0].event.event_id, "evt_3");
  EXPECT_EQ(log->fold_order[1].event.event_id, "evt_4");
  EXPECT_LT(log->fold_order[0].seq, log->fold_order[1].seq);
  Result<EntityLog> old_log = store->Log("receipt", "rcp_1");
  ASSERT_TRUE(old_log.ok());
  for (const LoggedEvent& e : old_log->fold_order) {
    EXPECT_LT(e.seq, log->fold_order[1].seq) << e.event.event_id;
    EXPECT_EQ(e.received_at, kStart + 1);
  }
  EXPECT_EQ(log->fold_order[1].received_at, kStart + 2);
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "refunded");
}

TEST_F(storage_store, ErrorIfExistsAndCreateIfMissing) {
  Options o = Opts();
  o.create_if_missing = false;
  Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
  EXPECT_FALSE(s.ok());
  Open().reset();  // creates it
  o = Opts();
  o.error_if_exists = true;
  s = Store::Open(path_, o);
  EXPECT_FALSE(s.ok());
}

TEST_F(storage_store, IngestBatchGivesPerDeliveryResultsInOrder) {
  const std::vector<Delivery> batch = {
      {{}, Issued("evt_1", "rcp_1")},                           // accepted
      {{}, Issued("evt_1", "rcp_1")},                           // duplicate in batch
      {{}, Refunded("evt_1", "rcp_1")},                         // conflict in batch
      {{}, "{oops"},                                            // invalid
      {{{"X-RR-Event-Id", "nope"}}, Issued("evt_5", "rcp_5")},  // invalid header
      {{}, InvoicePaid("evt_inv", "inv_1")},                    // unrouted
      {{}, Refunded("evt_2", "rcp_1")},                         // accepted, same entity
      {{}, std::string((1 << 20) + 1, ' ')},                    // too large
      {{}, Refunded("evt_3", "rcp_3")},                         // accepted, rejected in fold
      {{}, Issued("evt_4", "rcp_3", "2026-11-29T09:00:00Z")},   // late: re-fold in batch
      {{}, Refunded("evt_2", "rcp_1")},                         // duplicate of in-batch
  };
  const std::vector<Outcome> want = {
      Outcome::kAccepted, Outcome::kDuplicate, Outcome::kConflict,  Outcome::kInvalid,
      Outcome::kInvalid,  Outcome::kAccepted,  Outcome::kAccepted,  Outcome::kTooLarge,
      Outcome::kAccepted, Outcome::kAccepted,  Outcome::kDuplicate,
  };
  auto store = Open();
  std::vector<IngestResult> results = store->IngestBatch(batch);
  ASSERT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].outcome, want[i]) << "delivery " << i << ": " << results[i].message;
  }
  EXPECT_TRUE(results[3].message.starts_with("body:")) << results[3].message;
  EXPECT_TRUE(results[4].message.starts_with("X-RR-Event-Id:")) << results[4].message;
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, 5u);
  EXPECT_EQ(c.duplicate, 2u);
  EXPECT_EQ(c.conflict, 1u);
  EXPECT_EQ(c.invalid, 2u);
  EXPECT_EQ(c.too_large, 1u);
  EXPECT_EQ(c.unrouted, 1u);
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "refunded");
  EXPECT_EQ(store->Get("receipt", "rcp_3")->state, "refunded");
  EXPECT_EQ(store->Get("receipt", "rcp_3")->applied, 2u);
  const std::vector<std::string> batched = ListAll(store.get());
  EXPECT_TRUE(store->IngestBatch({}).empty());

  // One by one, in the same order, into a fresh store: same results, same
  // projections.
  auto env2 = storage_test::NewMemEnv();
  Options o = Opts();
  o.env = env2.get();
  Result<std::unique_ptr<Store>> single = Store::Open(path_, o);
  ASSERT_TRUE(single.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    IngestResult r = (*single)->Ingest(batch[i]);
    EXPECT_EQ(r.outcome, results[i].outcome) << "delivery " << i;
    EXPECT_EQ(r.message, results[i].message) << "delivery " << i;
    EXPECT_EQ(r.event_id, results[i].event_id) << "delivery " << i;
    EXPECT_EQ(r.entity, results[i].entity) << "delivery " << i;
  }
  EXPECT_EQ(ListAll(single->get()), batched);
  // A second identical batch is all duplicates/refusals.
  results = store->IngestBatch(batch);
  for (size_t i = 0; i < results.size(); ++i) {
    const Outcome o2 = results[i].outcome;
    EXPECT_TRUE(o2 == Outcome::kDuplicate || o2 == Outcome::kConflict || o2 == Outcome::kInvalid ||
                o2 == Outcome::kTooLarge)
        << "delivery " << i << ": " << OutcomeName(o2);
  }
  EXPECT_EQ(ListAll(store.get()), batched);
}

TEST_F(storage_store, RebuildWithTheSameProfileKeepsProjections) {
  const uint64_t seed = TestSeed("RebuildWithTheSameProfileKeepsProjections", 1234);
  auto store = Open();
  std::vector<std::string> events = GenerateEvents(seed, 150, 40);
  std::mt19937_64 rng(seed);
  std::shuffle(events.begin(), events.end(), rng);
  for (const std::string& e : events) MustAccept(store.get(), e);
  MustAccept(store.get(), InvoicePaid("evt_inv", "inv_1"));
  const std::vector<std::string> before = ListAll(store.get());

  Result<RebuildSummary> sum = store->maintenance().Rebuild(nullptr);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(ListAll(store.get()), before);
  EXPECT_EQ(sum->entities, before.size());
  EXPECT_EQ(sum->events, events.size() + 1);
  EXPECT_EQ(sum->unrouted, 1u);
  uint64_t applied = 0, rejected = 0;
  ASSERT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           applied += p.applied;
                           rejected += p.rejected.size();
                           return true;
                         })
                  .ok());
  EXPECT_EQ(sum->applied, applied);
  EXPECT_EQ(sum->rejected, rejected);
  EXPECT_EQ(sum->applied + sum->rejected + sum->unrouted, sum->events);
  EXPECT_EQ(store->profile()->Fingerprint(), Profile::ReceiptRoller().Fingerprint());
  // Ingest still works and dedups after a rebuild.
  EXPECT_EQ(store->Ingest(events[0]).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv", "inv_1")).outcome, Outcome::kDuplicate);
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 0u);
}

TEST_F(storage_store, RebuildWithANewProfileRoutesUnroutedEventsAndIsRemembered) {
  Result<Profile> invoices = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(invoices.ok()) << invoices.status().ToString();
  {
    auto store = Open();
    MustAccept(store.get(), Issued("evt_1", "rcp_1"));
    MustAccept(store.get(), InvoicePaid("evt_inv_1", "inv_1"));
    MustAccept(store.get(), InvoicePaid("evt_inv_2", "inv_2"));
    EXPECT_EQ(store->counters().unrouted, 2u);
    EXPECT_TRUE(store->Get("invoice", "inv_1").status().IsNotFound());

    Result<RebuildSummary> sum = store->maintenance().Rebuild(&*invoices);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(sum->events, 3u);
    EXPECT_EQ(sum->entities, 3u);
    EXPECT_EQ(sum->unrouted, 0u);
    EXPECT_EQ(store->profile()->name(), "receiptroller-invoices");
    Result<Projection> inv = store->Get("invoice", "inv_1");
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    EXPECT_EQ(inv->state, "paid");
    EXPECT_EQ(inv->fields, (std::vector<Field>{{"invoice_id", "\"inv_1\""}, {"total", "99"}}));
    EXPECT_EQ(ListAll(store.get(), "invoice").size(), 2u);
    EXPECT_TRUE(store->Log("invoice", "inv_2").ok());
    // The old events are duplicates under their new routing.
    EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv_1", "inv_1")).outcome, Outcome::kDuplicate);
    MustAccept(store.get(), InvoicePaid("evt_inv_3", "inv_3"));
    EXPECT_EQ(store->counters().unrouted, 2u) << "evt_inv_3 is routed";
  }
  // Reopened without a profile: the store remembers its new one.
  {
    auto store = Open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->profile()->Fingerprint(), invoices->Fingerprint());
    EXPECT_EQ(store->Get("invoice", "inv_3")->state, "paid");
    EXPECT_EQ(ListAll(store.get()).size(), 4u);
    EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv_2", "inv_2")).outcome, Outcome::kDuplicate);
  }
  // Opened with the profile it was created with: the store keeps its new
  // one and reports the opener's as stale (store.h: Options::profile).
  Options o = Opts();
  o.profile = Profile::ReceiptRoller();
  {
    Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)->profile()->Fingerprint(), invoices->Fingerprint());
    const StoreStats stats = (*s)->Stats();
    EXPECT_TRUE(stats.profile_stale);
    EXPECT_EQ(stats.requested_fingerprint, Profile::ReceiptRoller().Fingerprint());
    EXPECT_EQ(stats.profile_fingerprint, invoices->Fingerprint());
    EXPECT_EQ((*s)->Get("invoice", "inv_1")->state, "paid");
  }
  // With the new one: not stale.
  o.profile = *invoices;
  Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->Stats().profile_stale);
  EXPECT_EQ((*s)->Stats().requested_fingerprint, "");
}

TEST_F(storage_store, RebuildToAProfileThatDropsAnEntityUnroutesItsEvents) {
  Result<Profile> receipts_only = Profile::FromJson(R"({"name":"receipts","entities":[
    {"name":"receipt","key":"data.receipt_id",
     "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                    {"type":"receipt.refunded","from":["issued"],"to":"refunded"}]}]})");
  ASSERT_TRUE(receipts_only.ok());
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  MustAccept(store.get(),
             Body("evt_p", "product.created", "2026-11-29T10:00:00Z", R"({"product_id":"p1"})"));
  Result<RebuildSummary> sum = store->maintenance().Rebuild(&*receipts_only);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->unrouted, 1u);
  EXPECT_TRUE(store->Get("product", "p1").status().IsNotFound());
  EXPECT_EQ(ListAll(store.get()).size(), 1u);
  // Stored, not dropped: a duplicate still, now unrouted.
  EXPECT_EQ(store
                ->Ingest(Body("evt_p", "product.created", "2026-11-29T10:00:00Z",
                              R"({"product_id":"p1"})"))
                .outcome,
            Outcome::kDuplicate);
  // And switching back brings it back.
  ASSERT_TRUE(store->maintenance().Rebuild(&Profile::ReceiptRoller()).ok());
  EXPECT_EQ(store->Get("product", "p1")->state, "active");
}

// Long logs of a few entities, with versions, ties and impossible
// transitions: late arrivals re-fold from fold snapshots.
std::vector<std::string> LongLogs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out = GenerateEvents(seed, 20, 5);
  const int64_t t0 = 1795000000000000;
  for (int v = 1; v <= 60; ++v) {
    // Few distinct instants: equal occurred_at ties broken by version;
    // a later-version event that occurred earlier makes others stale.
    const int64_t at = t0 + static_cast<int64_t>(rng() % 8) * 1000000;
    out.push_back(Body("inv_" + std::to_string(v), "inventory.updated", FormatTimestamp(at),
                       R"({"product_id":"long","qty":)" + std::to_string(v) + "}", v));
  }
  out.push_back(Body("lp_c", "product.created", FormatTimestamp(t0), R"({"product_id":"long"})"));
  for (int u = 0; u < 40; ++u) {
    const int64_t at = t0 + 1 + static_cast<int64_t>(rng() % 20) * 1000000;
    std::string body = Body("lp_u" + std::to_string(u), "product.updated", FormatTimestamp(at),
                            R"({"product_id":"long","price":)" + std::to_string(u) + "}");
    if (rng() % 3 == 0) {  // some versioned, some not
      body = Body("lp_u" + std::to_string(u), "product.updated", FormatTimestamp(at),
                  R"({"product_id":"long","price":)" + std::to_string(u) + "}",
                  static_cast<int64_t>(rng() % 10));
    }
    out.push_back(body);
  }
  out.push_back(
      Body("lp_d", "product.deleted", FormatTimestamp(t0 + 15000000), R"({"product_id":"long"})"));
  // A second, very late creation: impossible in any state but none.
  out.push_back(
      Body("lp_c2", "product.created", FormatTimestamp(t0 + 30000000), R"({"product_id":"long"})"));
  return out;
}

std::vector<std::string> LogsOf(Store* store) {
  std::vector<std::string> out;
  Status st = store->List("", [&](const Projection& p) {
    Result<EntityLog> log = store->Log(p.entity, p.id);
    std::string line = log.ok() ? EntityLogToJson(*log) : log.status().ToString();
    // received_at and seq depend on arrival, not on the set of events.
    out.push_back(p.entity + "/" + p.id + ":" +
                  std::to_string(log.ok() ? log->fold_order.size() : 0));
    if (log.ok()) {
      for (const LoggedEvent& e : log->fold_order) {
        out.back() += " " + e.event.event_id + (e.applied ? "+" : "-" + e.reason);
      }
    }
    return true;
  });
  if (!st.ok()) out.push_back(st.ToString());
  return out;
}

TEST(storage_snapshot, FoldSnapshotsNeverChangeTheResult) {
  const uint64_t seed = TestSeed("FoldSnapshotsNeverChangeTheResult", 31337);
  const std::vector<std::string> events = LongLogs(seed);
  // Reference: no snapshots, each event once, in generation order.
  auto ref_env = storage_test::NewMemEnv();
  Options ro;
  ro.env = ref_env.get();
  ro.snapshot_interval = 0;
  Result<std::unique_ptr<Store>> reference = Store::Open("/mem/ref", ro);
  ASSERT_TRUE(reference.ok());
  for (const std::string& e : events) {
    ASSERT_EQ((*reference)->Ingest(e).outcome, Outcome::kAccepted) << e;
  }
  const std::vector<std::string> want = ListAll(reference->get());
  const std::vector<std::string> want_logs = LogsOf(reference->get());
  ASSERT_GT(want.size(), 20u);

  std::mt19937_64 rng(seed);
  for (uint64_t interval : {1, 2, 3, 7, 1000}) {
    SCOPED_TRACE("snapshot_interval " + std::to_string(interval));
    auto env = storage_test::NewMemEnv();
    Options o;
    o.env = env.get();
    o.snapshot_interval = interval;
    o.durability = Durability::kBuffered;
    std::vector<std::string> shuffled = events;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    {
      Result<std::unique_ptr<Store>> store = Store::Open("/mem/snap", o);
      ASSERT_TRUE(store.ok());
      // The first half one by one, the second in batches of random sizes
      // (several late events of one entity in one transaction), with
      // duplicates mixed in.
      size_t i = 0;
      for (; i < shuffled.size() / 2; ++i) {
        ASSERT_EQ((*store)->Ingest(shuffled[i]).outcome, Outcome::kAccepted);
      }
      while (i < shuffled.size()) {
        std::vector<Delivery> batch;
        const size_t n = 1 + rng() % 9;
        for (size_t k = 0; k < n && i < shuffled.size(); ++k, ++i) {
          batch.push_back({{}, shuffled[i]});
          if (rng() % 4 == 0) batch.push_back({{}, shuffled[rng() % (i + 1)]});
        }
        for (const IngestResult& r : (*store)->IngestBatch(batch)) {
          ASSERT_TRUE(r.outcome == Outcome::kAccepted || r.outcome == Outcome::kDuplicate)
              << r.message;
        }
      }
      EXPECT_EQ(ListAll(store->get()), want);
      EXPECT_EQ(LogsOf(store->get()), want_logs);
      Result<VerifySummary> v = (*store)->maintenance().Verify([](const auto&, const auto&) {});
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(v->differences, 0u);
    }
    // Reopened with another interval, late events still fold right: the
    // snapshots already stored were taken at other positions.
    o.snapshot_interval = interval == 1000 ? 0 : interval + 2;
    Result<std::unique_ptr<Store>> store = Store::Open("/mem/snap", o);
    ASSERT_TRUE(store.ok());
    const std::string late = Body("inv_late", "inventory.updated", "2026-11-18T00:00:00Z",
                                  R"({"product_id":"long","qty":-1})", 0);
    ASSERT_EQ((*store)->Ingest(late).outcome, Outcome::kAccepted);
    ASSERT_EQ((*reference)->Ingest(late).outcome,
              interval == 1 ? Outcome::kAccepted : Outcome::kDuplicate);
    EXPECT_EQ(ListAll(store->get()), ListAll(reference->get()));
    ASSERT_TRUE((*store)->maintenance().Rebuild(nullptr).ok());
    EXPECT_EQ(ListAll(store->get()), ListAll(reference->get()));
    EXPECT_EQ(LogsOf(store->get()), LogsOf(reference->get()));
  }
}

TEST_F(storage_store, AnInterruptedRebuildLeavesAConsistentStore) {
  {
    auto store = Open();
    for (const std::string& e : GenerateEvents(3, 30, 10)) MustAccept(store.get(), e);
  }
  const std::vector<std::string> before = [&] {
    auto store = Open();
    return ListAll(store.get());
  }();
  // Simulate a crash in the middle of a rebuild to the same profile: its
  // marker is there, and a partial next generation with a bogus projection.
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    const uint32_t gen = RawGeneration(db.get());
    const uint32_t next = gen + 1;
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), storage::MetaKey("rebuild"),
                        storage::EncodeText(std::to_string(next) + "\n" +
                                            Profile::ReceiptRoller().ToJson()))
                    .ok());
    storage::ProjectionState bogus;
    bogus.projection.state = "bogus";
    bogus.events = 1;
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), storage::ProjectionKey(next, {"receipt", "zzz"}),
                        storage::EncodeProjection(bogus))
                    .ok());
  }
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(ListAll(store.get()), before);
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
  // Usable: ingest, and another rebuild, work.
  MustAccept(store.get(), Issued("evt_after", "rcp_after"));
  ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(store->Get("receipt", "rcp_after")->state, "issued");
  EXPECT_TRUE(store->Get("receipt", "zzz").status().IsNotFound());
  store.reset();
  store = Open();
  EXPECT_EQ(ListAll(store.get()).size(), before.size() + 1);
}

TEST_F(storage_store, RebuildWithThreadsGivesTheSameProjections) {
  const uint64_t seed = TestSeed("RebuildWithThreadsGivesTheSameProjections", 808);
  Options o = Opts();
  o.snapshot_interval = 4;
  auto store = Open(o);
  std::vector<std::string> events = LongLogs(seed);
  std::mt19937_64 rng(seed);
  std::shuffle(events.begin(), events.end(), rng);
  for (const std::string& e : events) MustAccept(store.get(), e);
  const std::vector<std::string> before = ListAll(store.get());
  const std::vector<std::string> before_logs = LogsOf(store.get());
  std::optional<RebuildSummary> first;
  for (int threads : {1, 2, 5, 0}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    RebuildOptions ro;
    ro.threads = threads;
    std::atomic<int> reports{0};
    ro.progress = [&](const RebuildProgress& p) {
      ++reports;
      EXPECT_LE(p.events_done, events.size());
    };
    Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(ListAll(store.get()), before);
    EXPECT_EQ(LogsOf(store.get()), before_logs);
    EXPECT_EQ(sum->events, events.size());
    if (!first) first = *sum;
    EXPECT_EQ(sum->entities, first->entities);
    EXPECT_EQ(sum->applied, first->applied);
    EXPECT_EQ(sum->rejected, first->rejected);
    EXPECT_EQ(sum->applied + sum->rejected + sum->unrouted, sum->events);
  }
  // Late events after rebuilds still re-fold right (the rebuilt snapshots).
  MustAccept(store.get(), Body("inv_late", "inventory.updated", "2026-11-18T00:00:00Z",
                               R"({"product_id":"long","qty":-1})", 0));
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 0u);
}

TEST_F(storage_store, RefoldOneEntityOrOneTypeInPlace) {
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  MustAccept(store.get(), Refunded("evt_2", "rcp_1"));
  MustAccept(store.get(), Issued("evt_3", "rcp_2"));
  MustAccept(store.get(),
             Body("evt_p", "product.created", "2026-11-29T10:00:00Z", R"({"product_id":"p1"})"));
  store.reset();
  // Damage two receipts' projections and the product's behind the store's back.
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    const uint32_t gen = RawGeneration(db.get());
    for (const EntityRef& ref : {EntityRef{"receipt", "rcp_1"}, EntityRef{"receipt", "rcp_2"},
                                 EntityRef{"product", "p1"}}) {
      const std::string key = storage::ProjectionKey(gen, ref);
      std::string value;
      ASSERT_TRUE(db->Get(leveldb::ReadOptions(), key, &value).ok());
      Result<storage::ProjectionState> st = storage::DecodeProjection(key, value);
      ASSERT_TRUE(st.ok());
      st->projection.state = "damaged";
      ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, storage::EncodeProjection(*st)).ok());
    }
  }
  store = Open();
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 3u);

  // One entity.
  RebuildOptions one;
  one.entity = "receipt";
  one.id = "rcp_1";
  Result<RebuildSummary> sum = store->maintenance().Rebuild(one);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->entities, 1u);
  EXPECT_EQ(sum->events, 2u);
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "refunded");
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "damaged");
  EXPECT_EQ(store->Get("product", "p1")->state, "damaged");

  // One entity type.
  RebuildOptions type;
  type.entity = "receipt";
  sum = store->maintenance().Rebuild(type);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->entities, 2u);
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "issued");
  EXPECT_EQ(store->Get("product", "p1")->state, "damaged");
  v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 1u);

  // Refused filters.
  RebuildOptions bad;
  bad.id = "rcp_1";  // an id without its entity type
  EXPECT_TRUE(store->maintenance().Rebuild(bad).status().IsInvalidArgument());
  bad = RebuildOptions{};
  bad.entity = "receipt";
  bad.profile = &Profile::ReceiptRoller();  // a profile re-routes everything
  EXPECT_TRUE(store->maintenance().Rebuild(bad).status().IsInvalidArgument());
  bad = RebuildOptions{};
  bad.entity = "invoice";  // not in the profile: not found, like an id without events
  EXPECT_TRUE(store->maintenance().Rebuild(bad).status().IsNotFound());
  bad.entity = "receipt";
  bad.id = "rcp_404";
  EXPECT_TRUE(store->maintenance().Rebuild(bad).status().IsNotFound());
  EXPECT_EQ(store->Get("product", "p1")->state, "damaged") << "refused rebuilds change nothing";
}

TEST_F(storage_store, ASecondRebuildWhileOneRunsIsBusy) {
  auto store = Open();
  MustAccept(store.get(), Issued("evt_1", "rcp_1"));
  // Hold a rebuild inside its progress callback (the in-place re-fold
  // reports once when it finishes) and start others meanwhile.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  RebuildOptions held;
  held.entity = "receipt";
  held.progress = [&](const RebuildProgress&) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
  };
  std::thread running([&] { EXPECT_TRUE(store->maintenance().Rebuild(held).ok()); });
  {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(5), [&] { return entered; })) {
      ADD_FAILURE() << "the in-place rebuild never reported progress";
    }
  }
  if (entered) {
    EXPECT_TRUE(store->maintenance().Rebuild(nullptr).status().IsBusy());
    RebuildOptions other;
    other.entity = "product";
    EXPECT_TRUE(store->maintenance().Rebuild(other).status().IsBusy());
    // Ingest and reads go on meanwhile.
    MustAccept(store.get(), Issued("evt_2", "rcp_2"));
    EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued");
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  running.join();
  EXPECT_TRUE(store->maintenance().Rebuild(nullptr).ok()) << "free again";
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "issued");
}

TEST_F(storage_store, OpeningWithAnotherProfileKeepsTheStoredOneAndReportsItStale) {
  {
    auto store = Open();  // created with the built-in profile
    MustAccept(store.get(), InvoicePaid("evt_inv_1", "inv_1"));
    const StoreStats stats = store->Stats();
    EXPECT_FALSE(stats.profile_stale);
    EXPECT_EQ(stats.profile_name, "receiptroller");
    EXPECT_EQ(stats.last_seq, 1u);
  }
  Result<Profile> other = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(other.ok());
  Options o = Opts();
  o.profile = *other;
  {
    Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Store& store = **s;
    // The store routes and folds with its own profile until a rebuild.
    EXPECT_EQ(store.profile()->Fingerprint(), Profile::ReceiptRoller().Fingerprint());
    StoreStats stats = store.Stats();
    EXPECT_TRUE(stats.profile_stale);
    EXPECT_EQ(stats.profile_name, "receiptroller");
    EXPECT_EQ(stats.requested_fingerprint, other->Fingerprint());
    IngestResult r = store.Ingest(InvoicePaid("evt_inv_2", "inv_2"));
    EXPECT_EQ(r.outcome, Outcome::kAccepted);
    EXPECT_FALSE(r.entity.has_value()) << "still unrouted under the stored profile";
    EXPECT_TRUE(store.Get("invoice", "inv_1").status().IsNotFound());
    // A rebuild with the requested profile switches the store to it.
    ASSERT_TRUE(store.maintenance().Rebuild(&*other).ok());
    EXPECT_FALSE(store.Stats().profile_stale);
    EXPECT_EQ(store.Get("invoice", "inv_2")->state, "paid");
  }
  Result<std::unique_ptr<Store>> s = Store::Open(path_, o);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->Stats().profile_stale);
  EXPECT_EQ(ListAll(s->get(), "invoice").size(), 2u);
}

TEST(storage_lock, ASecondStoreOnTheSameDirectoryIsBusy) {
  ScratchDir dir;
  Options o;
  o.durability = Durability::kBuffered;
  Result<std::unique_ptr<Store>> first = Store::Open(dir.path(), o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::unique_ptr<Store>> second = Store::Open(dir.path(), o);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().IsBusy()) << second.status().ToString();
  // The first is unaffected, and once closed the directory opens again.
  EXPECT_EQ((*first)->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  first.value().reset();  // closes it
  Result<std::unique_ptr<Store>> third = Store::Open(dir.path(), o);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ((*third)->Get("receipt", "rcp_1")->state, "issued");
}

TEST_F(storage_store, VerifyFindsNoDifferenceOnAHealthyStoreAndFindsTampering) {
  {
    auto store = Open();
    for (const std::string& e : GenerateEvents(5, 20, 5)) MustAccept(store.get(), e);
    int calls = 0;
    Result<VerifySummary> v =
        store->maintenance().Verify([&](const auto&, const auto&) { ++calls; });
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->differences, 0u);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(v->entities, ListAll(store.get()).size());
    EXPECT_GT(v->entities, 20u);
    MustAccept(store.get(), Issued("evt_t", "rcp_tamper"));
  }
  // Tamper with one projection behind the store's back.
  {
    std::unique_ptr<leveldb::DB> db = RawDb();
    ASSERT_TRUE(db);
    const uint32_t gen = RawGeneration(db.get());
    const std::string key = storage::ProjectionKey(gen, {"receipt", "rcp_tamper"});
    std::string value;
    ASSERT_TRUE(db->Get(leveldb::ReadOptions(), key, &value).ok());
    Result<storage::ProjectionState> state = storage::DecodeProjection(key, value);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    ASSERT_EQ(state->projection.state, "issued");
    state->projection.state = "refunded";
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, storage::EncodeProjection(*state)).ok());
  }
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Get("receipt", "rcp_tamper")->state, "refunded");
  std::vector<std::pair<std::optional<Projection>, std::optional<Projection>>> diffs;
  Result<VerifySummary> v = store->maintenance().Verify(
      [&](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        diffs.emplace_back(live, rebuilt);
      });
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 1u);
  ASSERT_EQ(diffs.size(), 1u);
  ASSERT_TRUE(diffs[0].first.has_value());
  ASSERT_TRUE(diffs[0].second.has_value());
  EXPECT_EQ(diffs[0].first->id, "rcp_tamper");
  EXPECT_EQ(diffs[0].first->state, "refunded");
  EXPECT_EQ(diffs[0].second->state, "issued");
  // Verify never writes live data; a rebuild repairs it.
  EXPECT_EQ(store->Get("receipt", "rcp_tamper")->state, "refunded");
  ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(store->Get("receipt", "rcp_tamper")->state, "issued");
  v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 0u);
}

TEST(storage_verify, ScratchStoreOnDiskIsRemoved) {
  ScratchDir dir;
  Options o;
  o.durability = Durability::kBuffered;
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), o);
  ASSERT_TRUE(store.ok());
  ASSERT_EQ((*store)->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  Result<VerifySummary> v = (*store)->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
  EXPECT_EQ(v->entities, 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + ".verify"));
}

// ---- Storage faults -------------------------------------------------------

// Wraps every writable file so its Append or Sync can be made to fail.
class FaultEnv : public leveldb::EnvWrapper {
 public:
  explicit FaultEnv(leveldb::Env* base) : leveldb::EnvWrapper(base) {}

  std::atomic<bool> fail_append{false};
  std::atomic<bool> fail_sync{false};

  leveldb::Status NewWritableFile(const std::string& name,
                                  leveldb::WritableFile** result) override {
    leveldb::WritableFile* file = nullptr;
    leveldb::Status s = target()->NewWritableFile(name, &file);
    if (s.ok()) *result = new File(this, name, file);
    return s;
  }
  leveldb::Status NewAppendableFile(const std::string& name,
                                    leveldb::WritableFile** result) override {
    leveldb::WritableFile* file = nullptr;
    leveldb::Status s = target()->NewAppendableFile(name, &file);
    if (s.ok()) *result = new File(this, name, file);
    return s;
  }

 private:
  class File : public leveldb::WritableFile {
   public:
    File(FaultEnv* env, std::string name, leveldb::WritableFile* base)
        : env_(env), name_(std::move(name)), base_(base) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
      if (env_->fail_append) return leveldb::Status::IOError(name_, "injected append failure");
      return base_->Append(data);
    }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override {
      if (env_->fail_sync) return leveldb::Status::IOError(name_, "injected sync failure");
      return base_->Sync();
    }

   private:
    FaultEnv* env_;
    std::string name_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };
};

class StoreFaultTest : public ::testing::Test {
 protected:
  StoreFaultTest() : mem_(storage_test::NewMemEnv()), env_(mem_.get()) {}
  std::unique_ptr<Store> Open() {
    Options o;
    o.env = &env_;  // durability: the default kSync
    Result<std::unique_ptr<Store>> s = Store::Open("/mem/faulty", o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<leveldb::Env> mem_;
  FaultEnv env_;
};

// Suite name: the area prefix lets `ctest -R storage` select these.
using storage_fault = StoreFaultTest;

void ExpectStorageError(const IngestResult& r, const std::string& what) {
  EXPECT_EQ(r.outcome, Outcome::kStorageError) << what << ": " << r.message;
  EXPECT_EQ(r.http_status(), 503) << what;
  EXPECT_FALSE(r.message.empty()) << what;
  // The first failure names the fault; later writes are refused by the
  // store itself until it is reopened (storage/guarded_db.h).
  EXPECT_TRUE(r.message.find("injected") != std::string::npos ||
              r.message.find("reopen it to resume") != std::string::npos)
      << what << ": " << r.message;
}

TEST_F(storage_fault, FailedAppendIs503AndNothingIsVisible) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);

  env_.fail_append = true;
  ExpectStorageError(store->Ingest(Issued("evt_2", "rcp_2")), "new entity");
  ExpectStorageError(store->Ingest(Refunded("evt_3", "rcp_1")), "existing entity");
  std::vector<IngestResult> batch = store->IngestBatch(
      {{{}, Issued("evt_4", "rcp_4")}, {{}, Issued("evt_1", "rcp_1")}, {{}, "bad"}});
  ExpectStorageError(batch[0], "batch");
  // Refusals that need no write keep their own outcome.
  EXPECT_EQ(batch[1].outcome, Outcome::kDuplicate);
  EXPECT_EQ(batch[2].outcome, Outcome::kInvalid);

  // Nothing partial: no projection, no log, the old projection unchanged.
  EXPECT_TRUE(store->Get("receipt", "rcp_2").status().IsNotFound());
  EXPECT_TRUE(store->Get("receipt", "rcp_4").status().IsNotFound());
  EXPECT_TRUE(store->Log("receipt", "rcp_2").status().IsNotFound());
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued");
  EXPECT_EQ(store->Log("receipt", "rcp_1")->fold_order.size(), 1u);
  const Counters c = store->counters();
  EXPECT_EQ(c.storage_error, 3u);
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.duplicate, 1u);

  // LevelDB 1.23 does not remember a failed log *append* (only a failed
  // sync): its next writes would succeed behind a torn log record that the
  // next Open drops, acknowledged writes included. So the store refuses every
  // write after a failed one, even once the disk recovers, until reopened.
  env_.fail_append = false;
  ExpectStorageError(store->Ingest(Issued("evt_2", "rcp_2")), "after the fault cleared");
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued") << "reads keep working";
  store.reset();
  store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->Ingest(Issued("evt_2", "rcp_2")).outcome, Outcome::kAccepted);
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "issued");
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued");
}

TEST_F(storage_fault, FailedSyncIs503AndNothingIsVisible) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);

  env_.fail_sync = true;
  ExpectStorageError(store->Ingest(Issued("evt_2", "rcp_2")), "sync");
  EXPECT_TRUE(store->Get("receipt", "rcp_2").status().IsNotFound());
  EXPECT_TRUE(store->Log("receipt", "rcp_2").status().IsNotFound());
  EXPECT_EQ(store->Get("receipt", "rcp_1")->applied, 1u);

  // What LevelDB 1.23 does afterwards: a failed *sync* leaves the log in an
  // unknown state (the record was appended, maybe not durable), so LevelDB
  // records a sticky background error and refuses every later write with it
  // until the DB is reopened; reads keep working. The store therefore keeps
  // answering 503 (the sender retries) until it is reopened.
  env_.fail_sync = false;
  IngestResult again = store->Ingest(Issued("evt_5", "rcp_5"));
  EXPECT_TRUE(again.outcome == Outcome::kStorageError || again.outcome == Outcome::kAccepted)
      << OutcomeName(again.outcome);
  std::printf("after a failed sync, a new event on the same store: %s (%s)\n",
              std::string(OutcomeName(again.outcome)).c_str(), again.message.c_str());
  EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued") << "reads still work";
  store.reset();

  // After a reopen, the appended-but-unsynced record may or may not be
  // replayed; either way the sender's retry gets a 200 (accepted, or
  // duplicate when the record survived) and the store is consistent.
  store = Open();
  ASSERT_TRUE(store);
  IngestResult retry = store->Ingest(Issued("evt_2", "rcp_2"));
  EXPECT_TRUE(retry.outcome == Outcome::kAccepted || retry.outcome == Outcome::kDuplicate)
      << OutcomeName(retry.outcome) << ": " << retry.message;
  EXPECT_EQ(retry.http_status(), 200);
  EXPECT_EQ(store->Get("receipt", "rcp_2")->state, "issued");
  EXPECT_EQ(store->Get("receipt", "rcp_2")->applied, 1u);
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
}

TEST_F(storage_fault, ConcurrentIngestsDuringAFaultAreAll503AndRetriesSucceedAfterReopen) {
  constexpr int kThreads = 8, kPerThread = 40;
  auto body = [](int t, int i) {
    const std::string id = std::to_string(t) + "_" + std::to_string(i);
    return Issued("evt_" + id, "rcp_" + id);
  };
  {
    auto store = Open();
    ASSERT_TRUE(store);
    env_.fail_append = true;
    std::atomic<int> not_503{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          if (store->Ingest(body(t, i)).http_status() != 503) ++not_503;
        }
      });
    }
    for (auto& th : threads) th.join();
    env_.fail_append = false;
    EXPECT_EQ(not_503.load(), 0) << "every member of a failed group commit gets 503";
    EXPECT_TRUE(ListAll(store.get()).empty());
    EXPECT_EQ(store->counters().storage_error, uint64_t{kThreads} * kPerThread);
  }
  // The sender retries; after a reopen every retry is new and stored.
  {
    auto store = Open();
    ASSERT_TRUE(store);
    std::vector<std::thread> threads;
    std::atomic<int> not_accepted{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          if (store->Ingest(body(t, i)).outcome != Outcome::kAccepted) ++not_accepted;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(not_accepted.load(), 0);
  }
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(ListAll(store.get()).size(), size_t{kThreads} * kPerThread);
}

// KNOWN BUG (reported; enable once fixed): after one failed log append,
// LevelDB 1.23 keeps accepting writes (only a failed *sync* is sticky), but
// its log writer has already advanced its block offset past the record it
// could not write, so every later record sits misaligned in the log file.
// Recovery (paranoid_checks off) silently drops what does not line up once
// the log crosses a 32 KiB block boundary: events acknowledged with 200 —
// synced under kSync — are lost on the next Open (here ~370 of 400). With
// PosixEnv the same happens on a failed write() (disk full) when the log
// writer flushes. The store must refuse every write after a failed one
// (503) until it is reopened, as LevelDB itself does after a failed sync.
TEST_F(storage_fault, NothingAcknowledgedAfterAFailedAppendIsLostOnReopen) {
  std::vector<std::string> acknowledged;
  {
    auto store = Open();
    ASSERT_TRUE(store);
    ASSERT_EQ(store->Ingest(Issued("evt_0", "rcp_0")).outcome, Outcome::kAccepted);
    acknowledged.push_back("rcp_0");
    env_.fail_append = true;
    ExpectStorageError(store->Ingest(Issued("evt_x", "rcp_x")), "the failed append");
    env_.fail_append = false;
    for (int i = 1; i < 400; ++i) {  // ~100 KiB of log: several 32 KiB blocks
      const IngestResult r =
          store->Ingest(Issued("evt_" + std::to_string(i), "rcp_" + std::to_string(i)));
      // Either refused (the fix: 503 until reopened) or durably stored.
      if (r.outcome == Outcome::kAccepted) acknowledged.push_back("rcp_" + std::to_string(i));
    }
  }
  auto store = Open();
  ASSERT_TRUE(store);
  size_t lost = 0;
  for (const std::string& id : acknowledged) {
    if (!store->Get("receipt", id).ok()) ++lost;
  }
  EXPECT_EQ(lost, 0u) << "of " << acknowledged.size() << " acknowledged events";
}

}  // namespace
}  // namespace eventfold
