// The framework-agnostic Receiver (receiver/receiver.cc) over a Store on an
// in-memory LevelDB Env: every row of docs/SPEC.md §3 through Handle(), metrics,
// methods, the quarantine of refused deliveries, storage faults, overload,
// and a seeded fuzz loop that must never see a 3xx.

#include "eventfold/receiver.h"

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <algorithm>
#include <atomic>
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

#include "core/signature.h"
#include "eventfold/clock.h"
#include "eventfold/ingest_sink.h"
#include "eventfold/store.h"
#include "tests/common/quarantined.h"
#include "tests/receiver/receiver_test_util.h"

namespace eventfold {
namespace {

using receiver_test::IsJsonObject;
using receiver_test::Issued;
using receiver_test::JsonString;
using receiver_test::Refunded;
using receiver_test::TestSeed;
using test_util::Quarantined;

constexpr int64_t kMicros = 1000000;
constexpr int64_t kNow = 1795000000;  // unix seconds at the start of each test
const std::string kSecret = "rr_test_secret_0123456789";
const std::string kWhsec = "whsec_" + Base64Encode("standard-webhooks-key-42");

// --- a LevelDB Env whose writes fail, or block, on demand ---------------------

class FaultEnv;

class FaultFile final : public leveldb::WritableFile {
 public:
  FaultFile(leveldb::WritableFile* base, FaultEnv* env) : base_(base), env_(env) {}
  ~FaultFile() override { delete base_; }
  leveldb::Status Append(const leveldb::Slice& data) override;
  leveldb::Status Close() override { return base_->Close(); }
  leveldb::Status Flush() override;
  leveldb::Status Sync() override;

 private:
  leveldb::WritableFile* base_;
  FaultEnv* env_;
};

class FaultEnv final : public leveldb::EnvWrapper {
 public:
  explicit FaultEnv(leveldb::Env* base) : leveldb::EnvWrapper(base) {}

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::WritableFile* base = nullptr;
    leveldb::Status s = target()->NewWritableFile(f, &base);
    *r = s.ok() ? new FaultFile(base, this) : nullptr;
    return s;
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::WritableFile* base = nullptr;
    leveldb::Status s = target()->NewAppendableFile(f, &base);
    *r = s.ok() ? new FaultFile(base, this) : nullptr;
    return s;
  }

  std::atomic<bool> fail_writes{false};  // Append and Flush fail ("disk full")
  std::atomic<bool> fail_sync{false};    // Sync fails

  // While blocked, Sync waits; WaitUntilSyncBlocked returns once one does.
  void BlockSync() {
    std::lock_guard lock(mu_);
    block_sync_ = true;
  }
  bool WaitUntilSyncBlocked() {
    std::unique_lock lock(mu_);
    // A safety bound only: the waiting thread is woken by the notify.
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return syncs_blocked_ > 0; });
  }
  void ReleaseSync() {
    std::lock_guard lock(mu_);
    block_sync_ = false;
    cv_.notify_all();
  }
  void MaybeBlockInSync() {
    std::unique_lock lock(mu_);
    if (!block_sync_) return;
    ++syncs_blocked_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !block_sync_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool block_sync_ = false;
  int syncs_blocked_ = 0;
};

leveldb::Status FaultFile::Append(const leveldb::Slice& data) {
  if (env_->fail_writes) return leveldb::Status::IOError("injected", "no space left on device");
  return base_->Append(data);
}
leveldb::Status FaultFile::Flush() {
  if (env_->fail_writes) return leveldb::Status::IOError("injected", "no space left on device");
  return base_->Flush();
}
leveldb::Status FaultFile::Sync() {
  env_->MaybeBlockInSync();
  if (env_->fail_sync) return leveldb::Status::IOError("injected", "sync failed");
  return base_->Sync();
}

// --- fixture -------------------------------------------------------------------

class receiver_handle : public ::testing::Test {
 protected:
  receiver_handle()
      : mem_(leveldb::NewMemEnv(leveldb::Env::Default())),
        env_(mem_.get()),
        clock_(kNow * kMicros) {}

  void SetUp() override {
    OpenStore(Options{});
    MakeReceiver(ReceiverOptions{});
  }

  void OpenStore(Options o) {
    rx_.reset();
    store_.reset();
    o.env = &env_;
    o.clock = &clock_;
    Result<std::unique_ptr<Store>> s = Store::Open("/rx-store", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  void MakeReceiver(ReceiverOptions ro) {
    if (ro.secrets.empty()) ro.secrets = {kSecret, kWhsec};
    ro.clock = &clock_;
    Result<std::unique_ptr<Receiver>> r = Receiver::Make(store_.get(), ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    rx_ = std::move(*r);
  }

  int64_t NowSeconds() const { return clock_.NowMicros() / kMicros; }

  // POSTs `body` signed with X-RR-Signature at the clock's time.
  HttpResponse Post(const std::string& body, Headers extra = {}) {
    extra.emplace_back("X-RR-Signature", SignRr(kSecret, NowSeconds(), body));
    return rx_->Handle("POST", "/hooks", extra, body);
  }
  HttpResponse PostUnsigned(const std::string& body, Headers extra = {}) {
    return rx_->Handle("POST", "/hooks", extra, body);
  }
  // POSTs `body` signed the Standard Webhooks way, covering `webhook_id`.
  HttpResponse PostStandard(const std::string& body, const std::string& webhook_id) {
    Headers h = {{"webhook-id", webhook_id},
                 {"webhook-timestamp", std::to_string(NowSeconds())},
                 {"webhook-signature", SignStandard(kWhsec, webhook_id, NowSeconds(), body)}};
    return rx_->Handle("POST", "/hooks", h, body);
  }

  std::vector<RefusedDelivery> Refused() { return Quarantined(store_.get()); }

  std::vector<std::string> ListedIds() {
    std::vector<std::string> out;
    Status st = store_->List("", [&](const Projection& p) {
      out.push_back(p.entity + "/" + p.id);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // The value of the metric line that starts with `series` + " ", or -1.
  long long Metric(const std::string& series) {
    const std::string text = rx_->MetricsText();
    const std::string needle = series + " ";
    size_t at = 0;
    while ((at = text.find(needle, at)) != std::string::npos) {
      if (at == 0 || text[at - 1] == '\n') {
        return std::stoll(text.substr(at + needle.size()));
      }
      at += needle.size();
    }
    return -1;
  }

  std::unique_ptr<leveldb::Env> mem_;
  FaultEnv env_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Receiver> rx_;
};

void ExpectStatus(const HttpResponse& r, int status, const std::string& outcome) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(JsonString(r.body, "status"), outcome) << r.body;
}

// The "error" of a refusal starts with `field` (the field or header named).
void ExpectError(const HttpResponse& r, int status, const std::string& outcome,
                 const std::string& field) {
  ExpectStatus(r, status, outcome);
  std::optional<std::string> error = JsonString(r.body, "error");
  ASSERT_TRUE(error.has_value()) << r.body;
  EXPECT_EQ(error->rfind(field, 0), 0u) << "error \"" << *error << "\" should name " << field;
  EXPECT_EQ(error->find(kSecret), std::string::npos) << *error;
}

// --- docs/SPEC.md §3, row by row ---------------------------------------------------------

TEST_F(receiver_handle, AcceptsANewEventDurably) {
  HttpResponse r = Post(Issued("evt_1", "rcp_1"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"accepted"})");
  Result<Projection> p = store_->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->state, "issued");
  EXPECT_EQ(store_->counters().accepted, 1u);
  // Header id equal to the body's: fine.
  EXPECT_EQ(Post(Issued("evt_2", "rcp_2"), {{"X-RR-Event-Id", "evt_2"}}).status, 200);
  // Any path takes deliveries.
  EXPECT_EQ(Post(Issued("evt_3", "rcp_3")).status, 200);
  EXPECT_EQ(
      rx_->Handle("POST", "/",
                  {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), Issued("evt_4", "rcp_4"))}},
                  Issued("evt_4", "rcp_4"))
          .status,
      200);
}

TEST_F(receiver_handle, AnswersDuplicatesWith200) {
  const std::string body = Issued("evt_1", "rcp_1");
  ASSERT_EQ(Post(body).status, 200);
  // The sender re-signs each attempt: a later t, same body.
  clock_.Advance(3600 * kMicros);
  HttpResponse r = Post(body, {{"x-rr-event-id", "evt_1"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"duplicate"})");
  // 30 days later (manual resend window): still a duplicate.
  clock_.Advance(30LL * 86400 * kMicros);
  EXPECT_EQ(Post(body).body, R"({"status":"duplicate"})");
  EXPECT_EQ(store_->counters().accepted, 1u);
  EXPECT_EQ(store_->counters().duplicate, 2u);
}

TEST_F(receiver_handle, StoresUnknownTypesAsUnrouted) {
  HttpResponse r = Post(
      R"({"event_id":"evt_w","type":"widget.created","occurred_at":"2026-11-29T10:00:00Z","data":{"widget_id":"w1"}})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"status":"accepted"})");
  EXPECT_EQ(store_->counters().unrouted, 1u);
  EXPECT_TRUE(ListedIds().empty());
}

// The answer carries the body's event_id for the access log (not sent).
TEST_F(receiver_handle, AnswerNamesTheBodysEventIdForTheAccessLog) {
  EXPECT_EQ(Post(Issued("evt_log", "rcp_log")).event_id, "evt_log");
  EXPECT_EQ(Post(Issued("evt_log", "rcp_log")).event_id, "evt_log") << "duplicate";
  EXPECT_EQ(Post("not json").event_id, "");
}

TEST_F(receiver_handle, MetricsCountUnroutedEvents) {
  ASSERT_EQ(
      Post(
          R"({"event_id":"evt_w","type":"widget.created","occurred_at":"2026-11-29T10:00:00Z","data":{"widget_id":"w1"}})")
          .status,
      200);
  const std::string metrics = rx_->MetricsText();
  EXPECT_NE(metrics.find("\neventfold_unrouted_total 1\n"), std::string::npos) << metrics;
}

TEST_F(receiver_handle, RefusesInvalidBodiesWith400NamingTheField) {
  const std::string at = R"("occurred_at":"2026-11-29T10:00:00Z")";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "body"},
      {"", "body"},
      {"[1,2]", "body"},
      {R"({"event_id":"evt_1"} trailing)", "body"},
      {R"({"type":"receipt.issued",)" + at + R"(,"data":{"receipt_id":"r"}})", "event_id"},
      {R"({"event_id":"evt 1","type":"receipt.issued",)" + at + R"(,"data":{"receipt_id":"r"}})",
       "event_id"},
      {R"({"event_id":7,"type":"receipt.issued",)" + at + R"(,"data":{"receipt_id":"r"}})",
       "event_id"},
      {R"({"event_id":")" + std::string(129, 'e') + R"(","type":"receipt.issued",)" + at +
           R"(,"data":{"receipt_id":"r"}})",
       "event_id"},
      {R"({"event_id":"evt_1",)" + at + R"(,"data":{"receipt_id":"r"}})", "type"},
      {R"({"event_id":"evt_1","type":"receipt",)" + at + R"(,"data":{"receipt_id":"r"}})", "type"},
      {R"({"event_id":"evt_1","type":"receipt.issued","data":{"receipt_id":"r"}})", "occurred_at"},
      {R"({"event_id":"evt_1","type":"receipt.issued","occurred_at":"yesterday","data":{"receipt_id":"r"}})",
       "occurred_at"},
      {R"({"event_id":"evt_1","type":"receipt.issued",)" + at +
           R"(,"version":-1,"data":{"receipt_id":"r"}})",
       "version"},
      {R"({"event_id":"evt_1","type":"receipt.issued",)" + at + "}", "data"},
      {R"({"event_id":"evt_1","type":"receipt.issued",)" + at + R"(,"data":[1]})", "data"},
      {R"({"event_id":"evt_1","type":"receipt.issued",)" + at + R"(,"data":{"amount":1}})",
       "data.receipt_id"},
      {R"({"event_id":"evt_1","type":"receipt.issued",)" + at + R"(,"data":{"receipt_id":true}})",
       "data.receipt_id"},
  };
  for (const auto& [body, field] : cases) {
    SCOPED_TRACE(body);
    ExpectError(Post(body), 400, "invalid", field);
  }
  EXPECT_TRUE(ListedIds().empty());
  EXPECT_EQ(store_->counters().accepted, 0u);
}

// A compressed body is refused by its header's name, not as "body: not
// JSON", and only once its signature holds. Any other label (identity, a
// charset sent by mistake, an unknown word) leaves the body as it came, as
// before: a JSON body with it is accepted.
TEST_F(receiver_handle, RefusesAContentEncodingNamingTheHeader) {
  const std::string body = Issued("evt_gz", "rcp_gz");
  const std::vector<std::string> compressed = {"gzip", "br",     " GZIP ",  "identity, gzip",
                                               "zstd", "x-gzip", "deflate", "compress"};
  for (const std::string& coding : compressed) {
    SCOPED_TRACE(coding);
    HttpResponse r = Post(body, {{"Content-Encoding", coding}});
    ExpectError(r, 400, "invalid", "Content-Encoding");
    EXPECT_NE(JsonString(r.body, "error")->find("uncompressed"), std::string::npos) << r.body;
  }
  EXPECT_FALSE(store_->Get("receipt", "rcp_gz").ok());
  std::vector<RefusedDelivery> refused = Refused();
  ASSERT_EQ(refused.size(), compressed.size());
  EXPECT_EQ(refused.back().outcome, Outcome::kInvalid);
  EXPECT_EQ(refused.back().reason.rfind("Content-Encoding", 0), 0u) << refused.back().reason;
  // Unsigned, the signature is what is refused: the coding is not looked at.
  ExpectError(PostUnsigned(body, {{"Content-Encoding", "gzip"}}), 401, "unauthorized", "signature");
  int n = 0;
  for (const std::string coding : {"identity", " Identity ", "", "utf-8", "none", "gzipped"}) {
    SCOPED_TRACE(coding);
    HttpResponse r =
        Post(Issued("evt_id" + std::to_string(++n), "rcp_id"), {{"Content-Encoding", coding}});
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_TRUE(store_->Get("receipt", "rcp_id").ok());
}

TEST_F(receiver_handle, RefusesHeaderIdMismatchWith400) {
  ExpectError(Post(Issued("evt_1", "rcp_1"), {{"X-RR-Event-Id", "evt_2"}}), 400, "invalid",
              "X-RR-Event-Id");
  EXPECT_FALSE(store_->Get("receipt", "rcp_1").ok());
  // The same delivery with the right header is then accepted.
  EXPECT_EQ(Post(Issued("evt_1", "rcp_1"), {{"X-RR-Event-Id", "evt_1"}}).status, 200);
}

TEST_F(receiver_handle, StandardWebhooksIdMustEqualBodyEventId) {
  // Correctly signed, but the signed webhook-id is not the body's event_id.
  ExpectError(PostStandard(Issued("evt_sw_1", "rcp_sw"), "msg_other"), 400, "invalid",
              "webhook-id");
  EXPECT_FALSE(store_->Get("receipt", "rcp_sw").ok());
  HttpResponse ok = PostStandard(Issued("evt_sw_1", "rcp_sw"), "evt_sw_1");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, R"({"status":"accepted"})");
  EXPECT_TRUE(store_->Get("receipt", "rcp_sw").ok());
}

TEST_F(receiver_handle, RefusesBadSignaturesWith401) {
  const std::string body = Issued("evt_1", "rcp_1");
  ExpectError(PostUnsigned(body), 401, "unauthorized", "signature");
  ExpectError(
      PostUnsigned(body, {{"X-RR-Signature", SignRr("some_other_secret_123", NowSeconds(), body)}}),
      401, "unauthorized", "X-RR-Signature");
  ExpectError(PostUnsigned(body, {{"X-RR-Signature", "t=1,v1=zz"}}), 401, "unauthorized",
              "X-RR-Signature");
  // Signed 301 s ago (a replayed capture): outside the default tolerance.
  const std::string old = SignRr(kSecret, NowSeconds() - 301, body);
  ExpectError(PostUnsigned(body, {{"X-RR-Signature", old}}), 401, "unauthorized", "X-RR-Signature");
  // 300 s ago is still inside.
  EXPECT_EQ(
      PostUnsigned(body, {{"X-RR-Signature", SignRr(kSecret, NowSeconds() - 300, body)}}).status,
      200);
  // A forged signature never reaches the store, even with a valid body.
  ExpectError(PostUnsigned(Issued("evt_9", "rcp_9"), {{"X-RR-Signature", old}}), 401,
              "unauthorized", "X-RR-Signature");
  EXPECT_FALSE(store_->Get("receipt", "rcp_9").ok());
}

TEST_F(receiver_handle, UsesItsClockAndToleranceForSignatures) {
  ReceiverOptions ro;
  ro.tolerance_seconds = 10;
  MakeReceiver(ro);
  const std::string body = Issued("evt_1", "rcp_1");
  const std::string sig = SignRr(kSecret, NowSeconds(), body);
  clock_.Advance(11 * kMicros);
  ExpectError(PostUnsigned(body, {{"X-RR-Signature", sig}}), 401, "unauthorized", "X-RR-Signature");
  clock_.Advance(-1 * kMicros);
  EXPECT_EQ(PostUnsigned(body, {{"X-RR-Signature", sig}}).status, 200);
}

TEST_F(receiver_handle, ConflictIs409AndTheFirstOneWins) {
  ASSERT_EQ(Post(Issued("evt_1", "rcp_1", "2026-11-29T10:00:00Z", 100)).status, 200);
  // Same event_id, other type.
  ExpectError(Post(Refunded("evt_1", "rcp_1")), 409, "conflict", "event_id");
  // Same event_id, other occurred_at.
  ExpectError(Post(Issued("evt_1", "rcp_1", "2026-11-29T10:00:01Z", 100)), 409, "conflict",
              "event_id");
  // Same event_id, other entity.
  ExpectError(Post(Issued("evt_1", "rcp_2", "2026-11-29T10:00:00Z", 100)), 409, "conflict",
              "event_id");
  Result<Projection> p = store_->Get("receipt", "rcp_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "issued");
  EXPECT_FALSE(store_->Get("receipt", "rcp_2").ok());
  // Identity is type/occurred_at/entity: other data is still a duplicate.
  EXPECT_EQ(Post(Issued("evt_1", "rcp_1", "2026-11-29T10:00:00Z", 999)).body,
            R"({"status":"duplicate"})");
  EXPECT_EQ(store_->counters().conflict, 3u);
}

TEST_F(receiver_handle, RefusesOversizedBodiesWith413BeforeParsing) {
  ReceiverOptions ro;
  ro.max_body_bytes = 4096;
  MakeReceiver(ro);
  // Not JSON, but too large: 413, not 400.
  const std::string big(4097, 'x');
  ExpectError(Post(big), 413, "too_large", "body");
  // Checked before the signature too: an unsigned oversized body is 413.
  ExpectError(PostUnsigned(big), 413, "too_large", "body");
  // At the limit: parsed (and refused as not JSON).
  ExpectError(Post(std::string(4096, 'x')), 400, "invalid", "body");
  // A valid event padded past the limit is refused and not stored.
  std::string padded = Issued("evt_big", "rcp_big");
  padded.insert(padded.size() - 1, ",\"pad\":\"" + std::string(5000, 'p') + "\"");
  ExpectError(Post(padded), 413, "too_large", "body");
  EXPECT_FALSE(store_->Get("receipt", "rcp_big").ok());
  // The default limit is 1 MiB.
  MakeReceiver(ReceiverOptions{});
  ExpectError(Post(std::string((1 << 20) + 1, '{')), 413, "too_large", "body");
}

TEST_F(receiver_handle, RefuseOversizedRecordsAndQuarantines) {
  HttpResponse r = rx_->RefuseOversized(
      "POST", "/hooks",
      {{"Content-Length", "2097152"}, {"X-RR-Signature", "t=1,v1=ab"}, {"X-RR-Event-Id", "evt_x"}},
      2097152);
  ExpectError(r, 413, "too_large", "body");
  std::vector<RefusedDelivery> q = Refused();
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].status, 413);
  EXPECT_EQ(q[0].outcome, Outcome::kTooLarge);
  EXPECT_EQ(q[0].body_bytes, 2097152u);
  EXPECT_TRUE(q[0].body_prefix.empty());
  EXPECT_FALSE(FindHeader(q[0].headers, "X-RR-Signature").has_value());
  EXPECT_EQ(FindHeader(q[0].headers, "X-RR-Event-Id"), "evt_x");
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="too_large",status="413"})"), 1);
}

// A request that is no delivery (a GET of /healthz declaring 2 MiB) gets
// its 413 without a quarantine entry or a delivery count: otherwise any
// client could fill the quarantine with what was never a webhook.
TEST_F(receiver_handle, RefuseOversizedOfAnotherMethodIsNoDelivery) {
  for (const char* method : {"GET", "HEAD", "PUT", "DELETE"}) {
    SCOPED_TRACE(method);
    HttpResponse r =
        rx_->RefuseOversized(method, "/healthz", {{"Content-Length", "2097152"}}, 2097152);
    ExpectError(r, 413, "too_large", "body");
  }
  EXPECT_TRUE(Refused().empty());
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="too_large",status="413"})"), 0);
  // A POST to any path is a delivery.
  ExpectError(rx_->RefuseOversized("POST", "/other", {}, 0), 413, "too_large", "body");
  EXPECT_EQ(Refused().size(), 1u);
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="too_large",status="413"})"), 1);
}

TEST_F(receiver_handle, RefuseOverloadedRecordsAndQuarantinesNothing) {
  HttpResponse r = rx_->RefuseOverloaded("all 2 connection workers are busy");
  ExpectStatus(r, 429, "overloaded");
  EXPECT_NE(r.body.find("all 2 connection workers are busy; retry later"), std::string::npos)
      << r.body;
  EXPECT_TRUE(Refused().empty()) << "a 429 is retried by the sender, not quarantined";
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="overloaded",status="429"})"), 1);
}

TEST_F(receiver_handle, Answers429WhenOverloadedAndStoresNothing) {
  ReceiverOptions ro;
  ro.max_in_flight = 0;
  MakeReceiver(ro);
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = Post(Issued("evt_" + std::to_string(i), "rcp_" + std::to_string(i)));
    ExpectStatus(r, 429, "overloaded");
  }
  // Even unsigned or garbage deliveries: admission comes before any work.
  ExpectStatus(PostUnsigned("garbage"), 429, "overloaded");
  EXPECT_EQ(store_->counters().accepted, 0u);
  EXPECT_TRUE(ListedIds().empty());
  EXPECT_TRUE(Refused().empty()) << "429 is retried: nothing to quarantine";
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="overloaded",status="429"})"), 6);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
  EXPECT_EQ(rx_->Handle("GET", "/healthz", {}, "").status, 200);
}

TEST_F(receiver_handle, Answers429WhileMaxInFlightDeliveriesAreBeingStored) {
  ReceiverOptions ro;
  ro.max_in_flight = 1;
  MakeReceiver(ro);
  env_.BlockSync();
  HttpResponse first;
  std::thread slow([&] { first = Post(Issued("evt_slow", "rcp_slow")); });
  ASSERT_TRUE(env_.WaitUntilSyncBlocked());
  // One delivery is in flight (its write waits for the disk): the next is 429.
  EXPECT_EQ(Metric("eventfold_in_flight"), 1);
  ExpectStatus(Post(Issued("evt_fast", "rcp_fast")), 429, "overloaded");
  env_.ReleaseSync();
  slow.join();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
  // The slot is free again: the retried delivery is accepted.
  EXPECT_EQ(Post(Issued("evt_fast", "rcp_fast")).status, 200);
}

TEST_F(receiver_handle, Answers503WhenWritesFail) {
  ASSERT_EQ(Post(Issued("evt_0", "rcp_0")).status, 200);
  env_.fail_writes = true;  // the disk is full
  HttpResponse r = Post(Issued("evt_1", "rcp_1"));
  ExpectError(r, 503, "storage_error", "storage");
  // Not stored, not quarantined (503 is retried by the sender).
  EXPECT_FALSE(store_->Get("receipt", "rcp_1").ok());
  EXPECT_EQ(rx_->Handle("GET", "/healthz", {}, "").status, 200);
  // A duplicate needs no write: still answered 200 while the disk is full.
  EXPECT_EQ(Post(Issued("evt_0", "rcp_0")).body, R"({"status":"duplicate"})");
  env_.fail_writes = false;
  EXPECT_EQ(rx_->Handle("GET", "/healthz", {}, "").status, 200);
  // LevelDB keeps no sticky error for a failed Append, but writing on would
  // risk acknowledged data (storage/guarded_db.h): the store answers 503
  // until it is reopened, and the sender retries.
  HttpResponse retry = Post(Issued("evt_1", "rcp_1"));
  EXPECT_EQ(retry.status, 503) << retry.body;
  EXPECT_NE(retry.body.find("reopen"), std::string::npos) << retry.body;
  EXPECT_FALSE(store_->Get("receipt", "rcp_1").ok());
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="storage_error",status="503"})"), 2);
  for (const RefusedDelivery& q : Refused()) EXPECT_NE(q.status, 503);
}

TEST_F(receiver_handle, Answers503AfterASyncFailureUntilReopened) {
  ASSERT_EQ(Post(Issued("evt_0", "rcp_0")).status, 200);
  env_.fail_sync = true;
  ExpectError(Post(Issued("evt_1", "rcp_1")), 503, "storage_error", "storage");
  env_.fail_sync = false;
  // /healthz answers 200: it reports the process, not the store.
  EXPECT_EQ(rx_->Handle("GET", "/healthz", {}, "").status, 200);
  // LevelDB records a failed log sync as a sticky background error (the log
  // record may or may not be on disk), so every later write of this DB
  // instance fails: deliveries keep getting 503, which the sender retries;
  // nothing is acknowledged that is not stored.
  ExpectError(Post(Issued("evt_2", "rcp_2")), 503, "storage_error", "storage");
  // Reads still work; a reopen clears the error and the retries succeed.
  EXPECT_TRUE(store_->Get("receipt", "rcp_0").ok());
  OpenStore(Options{});
  MakeReceiver(ReceiverOptions{});
  EXPECT_EQ(Post(Issued("evt_2", "rcp_2")).status, 200);
  HttpResponse again = Post(Issued("evt_1", "rcp_1"));
  // evt_1's record reached the log before its sync failed, so after recovery
  // it may already be there: either way the answer is a 200.
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(store_->Get("receipt", "rcp_0").ok());
  EXPECT_TRUE(store_->Get("receipt", "rcp_1").ok());
  EXPECT_TRUE(store_->Get("receipt", "rcp_2").ok());
}

// --- GET, metrics and methods ------------------------------------------------------

TEST_F(receiver_handle, ServesHealthzMetricsAndRefusesOtherMethods) {
  HttpResponse h = rx_->Handle("GET", "/healthz", {}, "");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(JsonString(h.body, "status"), "ok");

  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Post(Issued("evt_" + std::to_string(i), "rcp_" + std::to_string(i))).status, 200);
  }
  ASSERT_EQ(Post(Issued("evt_0", "rcp_0")).status, 200);  // duplicate
  ASSERT_EQ(PostUnsigned(Issued("evt_9", "rcp_9")).status, 401);
  ASSERT_EQ(Post("nope").status, 400);

  HttpResponse m = rx_->Handle("GET", "/metrics", {}, "");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u) << m.content_type;
  EXPECT_NE(m.body.find("eventfold_deliveries_total{outcome=\"accepted\",status=\"200\"} 3\n"),
            std::string::npos)
      << m.body;
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="duplicate",status="200"})"), 1);
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="unauthorized",status="401"})"), 1);
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="invalid",status="400"})"), 1);
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="conflict",status="409"})"), 0);
  EXPECT_EQ(Metric("eventfold_ack_latency_seconds_count"), 6);
  EXPECT_EQ(Metric(R"(eventfold_ack_latency_seconds_bucket{le="+Inf"})"), 6);
  EXPECT_NE(m.body.find("# TYPE eventfold_ack_latency_seconds histogram"), std::string::npos);
  EXPECT_NE(m.body.find("eventfold_ack_latency_seconds_sum "), std::string::npos);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
  EXPECT_GE(Metric("eventfold_store_bytes"), 0);
  // The store's filters: built in the background after the first ingest,
  // so present, of whatever size they have reached (their bytes are
  // checked in the store's tests).
  EXPECT_GE(Metric("eventfold_store_memory_bytes"), 0);
  // Buckets are cumulative.
  long long previous = 0;
  for (const char* le : {"0.0005", "0.001", "0.01", "0.1", "1", "10", "+Inf"}) {
    const long long v =
        Metric(std::string("eventfold_ack_latency_seconds_bucket{le=\"") + le + "\"}");
    EXPECT_GE(v, previous) << le;
    previous = v;
  }
  // GETs are not deliveries.
  EXPECT_EQ(Metric("eventfold_ack_latency_seconds_count"), 6);

  for (const char* method : {"PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "", "post"}) {
    HttpResponse r = rx_->Handle(method, "/hooks", {}, Issued("evt_m", "rcp_m"));
    EXPECT_EQ(r.status, 405) << "method \"" << method << "\": " << r.body;
    EXPECT_TRUE(IsJsonObject(r.body)) << r.body;
  }
  EXPECT_FALSE(store_->Get("receipt", "rcp_m").ok());
  HttpResponse other = rx_->Handle("GET", "/hooks", {}, "");
  EXPECT_EQ(other.status, 404);
}

// --- quarantine --------------------------------------------------------------------

TEST_F(receiver_handle, QuarantinesRefusalsWithoutCredentials) {
  ReceiverOptions ro;
  ro.max_body_bytes = 8192;
  MakeReceiver(ro);
  ASSERT_EQ(Post(Issued("evt_1", "rcp_1")).status, 200);
  const Headers creds = {{"Authorization", "Bearer top-secret-token"},
                         {"Content-Type", "application/json"},
                         {"User-Agent", "ReceiptRoller/1.0"}};

  // 400: a long invalid body (prefix cut to 1024 bytes, full size kept).
  std::string invalid =
      R"({"event_id":"evt_bad","type":"receipt.issued","pad":")" + std::string(3000, 'a') + "\"}";
  ASSERT_EQ(Post(invalid, creds).status, 400);
  // 401: a valid event under a forged signature.
  Headers forged = creds;
  forged.emplace_back("X-RR-Signature", SignRr("not_the_secret_000000", NowSeconds(),
                                               Issued("evt_evil", "rcp_evil")));
  ASSERT_EQ(PostUnsigned(Issued("evt_evil", "rcp_evil"), forged).status, 401);
  // 401 Standard Webhooks flavour, forged.
  Headers forged_sw = creds;
  forged_sw.emplace_back("webhook-id", "evt_evil2");
  forged_sw.emplace_back("webhook-timestamp", std::to_string(NowSeconds()));
  forged_sw.emplace_back("webhook-signature", "v1," + Base64Encode(std::string(32, 'x')));
  ASSERT_EQ(PostUnsigned(Issued("evt_evil2", "rcp_evil2"), forged_sw).status, 401);
  // 409: same id, other entity.
  ASSERT_EQ(Post(Issued("evt_1", "rcp_conflict"), creds).status, 409);
  // 413: oversized.
  const std::string big = Issued("evt_huge", "rcp_huge") + std::string(9000, ' ');
  ASSERT_EQ(Post(big, creds).status, 413);

  std::vector<RefusedDelivery> q = Refused();
  std::string listed;
  for (const RefusedDelivery& r : q) listed += std::to_string(r.status) + " " + r.reason + "\n";
  ASSERT_EQ(q.size(), 5u) << listed;
  const std::vector<int> statuses = {400, 401, 401, 409, 413};
  const std::vector<Outcome> outcomes = {Outcome::kInvalid, Outcome::kUnauthorized,
                                         Outcome::kUnauthorized, Outcome::kConflict,
                                         Outcome::kTooLarge};
  const std::vector<size_t> sizes = {invalid.size(), Issued("evt_evil", "rcp_evil").size(),
                                     Issued("evt_evil2", "rcp_evil2").size(),
                                     Issued("evt_1", "rcp_conflict").size(), big.size()};
  const std::vector<std::string> bodies = {invalid, Issued("evt_evil", "rcp_evil"),
                                           Issued("evt_evil2", "rcp_evil2"),
                                           Issued("evt_1", "rcp_conflict"), big};
  for (size_t i = 0; i < q.size(); ++i) {
    SCOPED_TRACE("refusal " + std::to_string(i));
    EXPECT_EQ(q[i].status, statuses[i]);
    EXPECT_EQ(q[i].outcome, outcomes[i]);
    EXPECT_FALSE(q[i].reason.empty());
    if (i > 0) {
      EXPECT_GT(q[i].seq, q[i - 1].seq);
    }
    EXPECT_EQ(q[i].received_at, clock_.NowMicros());
    EXPECT_EQ(q[i].body_bytes, sizes[i]);
    EXPECT_LE(q[i].body_prefix.size(), kQuarantineBodyBytes);
    EXPECT_EQ(q[i].body_prefix, bodies[i].substr(0, kQuarantineBodyBytes));
    for (const auto& [name, value] : q[i].headers) {
      EXPECT_EQ(value.find("top-secret-token"), std::string::npos) << name;
      EXPECT_EQ(value.find(kSecret), std::string::npos) << name;
    }
    EXPECT_FALSE(FindHeader(q[i].headers, "Authorization").has_value());
    EXPECT_FALSE(FindHeader(q[i].headers, "X-RR-Signature").has_value());
    EXPECT_FALSE(FindHeader(q[i].headers, "webhook-signature").has_value());
    EXPECT_EQ(FindHeader(q[i].headers, "User-Agent"), "ReceiptRoller/1.0");
  }
  EXPECT_EQ(q[0].body_prefix.size(), kQuarantineBodyBytes);
  EXPECT_EQ(q[2].reason.rfind("webhook-signature", 0), 0u) << q[2].reason;
  EXPECT_EQ(FindHeader(q[2].headers, "webhook-id"), "evt_evil2");
  EXPECT_EQ(q[4].reason.rfind("body", 0), 0u) << q[4].reason;

  // Quarantined bodies are never projected.
  EXPECT_EQ(ListedIds(), std::vector<std::string>{"receipt/rcp_1"});
  for (const char* rid : {"rcp_evil", "rcp_evil2", "rcp_conflict", "rcp_huge"}) {
    EXPECT_FALSE(store_->Get("receipt", rid).ok()) << rid;
  }
  // Nor after a rebuild from the stored events.
  ASSERT_TRUE(store_->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(ListedIds(), std::vector<std::string>{"receipt/rcp_1"});
}

TEST_F(receiver_handle, QuarantineKeepsTheNewestEntriesWithinItsBound) {
  Options o;
  o.quarantine_max_entries = 5;
  OpenStore(o);
  MakeReceiver(ReceiverOptions{});
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(kMicros);
    ASSERT_EQ(PostUnsigned(Issued("evt_" + std::to_string(i), "rcp_" + std::to_string(i))).status,
              401);
  }
  std::vector<RefusedDelivery> q = Refused();
  ASSERT_EQ(q.size(), 5u);
  for (size_t i = 0; i < q.size(); ++i) {
    const int n = 7 + static_cast<int>(i);
    EXPECT_EQ(q[i].body_prefix, Issued("evt_" + std::to_string(n), "rcp_" + std::to_string(n)));
    EXPECT_EQ(q[i].received_at, (kNow + n + 1) * kMicros);
    if (i > 0) {
      EXPECT_GT(q[i].seq, q[i - 1].seq);
    }
  }
  // The bound survives a reopen.
  OpenStore(o);
  MakeReceiver(ReceiverOptions{});
  ASSERT_EQ(PostUnsigned(Issued("evt_12", "rcp_12")).status, 401);
  q = Refused();
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q.front().body_prefix, Issued("evt_8", "rcp_8"));
  EXPECT_EQ(q.back().body_prefix, Issued("evt_12", "rcp_12"));
}

TEST_F(receiver_handle, ConcurrentDeliveriesAreEachAnsweredOnce) {
  const uint64_t seed = TestSeed("receiver_handle.ConcurrentDeliveriesAreEachAnsweredOnce", 77);
  constexpr int kThreads = 8, kPerThread = 60, kDistinct = 150;
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0}, duplicate{0}, other{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(t));
      for (int i = 0; i < kPerThread; ++i) {
        const int n = static_cast<int>(rng() % kDistinct);
        HttpResponse r = Post(Issued("evt_c" + std::to_string(n), "rcp_c" + std::to_string(n)));
        if (r.body == R"({"status":"accepted"})") {
          accepted.fetch_add(1);
        } else if (r.body == R"({"status":"duplicate"})") {
          duplicate.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(accepted.load() + duplicate.load(), kThreads * kPerThread);
  // Each distinct event is accepted exactly once, whoever sent it first.
  EXPECT_EQ(static_cast<size_t>(accepted.load()), ListedIds().size());
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="accepted",status="200"})"),
            accepted.load());
  EXPECT_EQ(Metric("eventfold_ack_latency_seconds_count"), kThreads * kPerThread);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
}

// --- HandleAsync: the same answers, stored in groups -------------------------------

// Every projection of `store`, in list order.
std::vector<Projection> AllProjections(Store* store) {
  std::vector<Projection> out;
  Status st = store->List("", [&](const Projection& p) {
    out.push_back(p);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST_F(receiver_handle, ConcurrentHandleAsyncAnswersOnceDurableAndFoldsLikeHandle) {
  const uint64_t seed =
      TestSeed("receiver_handle.ConcurrentHandleAsyncAnswersOnceDurableAndFoldsLikeHandle", 5);
  std::mt19937_64 rng(seed);
  // A history: issued/refunded pairs whose copies arrive shuffled and
  // repeated, plus deliveries the receiver or the store refuses.
  struct Request {
    Headers headers;
    std::string body;
    int want = 0;  // 401 or 400 for the refused ones; 200 otherwise
  };
  std::vector<Request> requests;
  constexpr int kReceipts = 60;
  for (int i = 0; i < kReceipts; ++i) {
    const std::string rid = "rcp_a" + std::to_string(i);
    const std::string issued = Issued("evt_ai" + std::to_string(i), rid);
    const std::string refunded = Refunded("evt_ar" + std::to_string(i), rid);
    for (int copy = 0, n = 1 + static_cast<int>(rng() % 3); copy < n; ++copy) {
      requests.push_back({{}, issued, 200});
      if (i % 2 == 0) requests.push_back({{}, refunded, 200});
    }
    if (i % 7 == 0) requests.push_back({{{"X-RR-Signature", "t=1,v1=00"}}, issued, 401});
    if (i % 9 == 0)
      requests.push_back({{}, R"({"event_id":"evt_bad)" + std::to_string(i) + "\"}", 400});
  }
  std::shuffle(requests.begin(), requests.end(), rng);
  for (Request& r : requests) {
    if (r.want != 401)
      r.headers.emplace_back("X-RR-Signature", SignRr(kSecret, NowSeconds(), r.body));
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> answers(requests.size(), 0);  // times answered
  std::vector<HttpResponse> got(requests.size());
  size_t answered = 0;
  // While every sync blocks, nothing that needs the store may be answered:
  // no 200, accepted or duplicate. A refusal (401, or 400 from the decode)
  // writes nothing the answer waits for (the quarantine is written in the
  // background), so it may be answered at once: with two batcher threads a
  // group of refusals alone passes the group blocked in its sync.
  env_.BlockSync();
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < requests.size(); i += 4) {
        rx_->HandleAsync("POST", "/hooks", requests[i].headers, requests[i].body,
                         [&, i](HttpResponse r) {
                           std::lock_guard lock(mu);
                           ++answers[i];
                           got[i] = std::move(r);
                           ++answered;
                           cv.notify_all();
                         });
      }
    });
  }
  for (std::thread& th : senders) th.join();
  ASSERT_TRUE(env_.WaitUntilSyncBlocked());
  {
    std::lock_guard lock(mu);
    for (size_t i = 0; i < requests.size(); ++i) {
      if (answers[i] != 0) {
        EXPECT_NE(requests[i].want, 200)
            << "answered before its write was synced: " << got[i].body << ", seed " << seed;
        EXPECT_EQ(got[i].status, requests[i].want) << got[i].body << ", seed " << seed;
      }
    }
  }
  env_.ReleaseSync();
  {
    std::unique_lock lock(mu);
    // A safety bound only: the last answer's notify wakes this.
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(60), [&] { return answered == requests.size(); }))
        << answered << " of " << requests.size() << " answered, seed " << seed;
  }
  std::set<std::string> accepted;
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + ", seed " + std::to_string(seed));
    EXPECT_EQ(answers[i], 1);
    EXPECT_EQ(got[i].status, requests[i].want) << got[i].body;
    if (got[i].body == R"({"status":"accepted"})") {
      EXPECT_TRUE(accepted.insert(requests[i].body).second) << "accepted twice";
    }
  }
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
  EXPECT_EQ(Metric("eventfold_ack_latency_seconds_count"), static_cast<long long>(requests.size()));

  // The same deliveries through Handle, one by one in list order, into a
  // second store: the same projections (arrival order does not matter).
  Options o;
  o.env = &env_;
  o.clock = &clock_;
  Result<std::unique_ptr<Store>> ref = Store::Open("/rx-reference", o);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ReceiverOptions ro;
  ro.secrets = {kSecret};
  ro.clock = &clock_;
  Result<std::unique_ptr<Receiver>> ref_rx = Receiver::Make(ref->get(), ro);
  ASSERT_TRUE(ref_rx.ok());
  for (const Request& r : requests) (void)(*ref_rx)->Handle("POST", "/hooks", r.headers, r.body);
  const std::vector<Projection> want = AllProjections(ref->get());
  EXPECT_EQ(want.size(), static_cast<size_t>(kReceipts));
  EXPECT_EQ(AllProjections(store_.get()), want) << "seed " << seed;
}

TEST_F(receiver_handle, HandleAsyncAnswers503ForEveryDeliveryOfAFailedGroup) {
  ASSERT_EQ(Post(Issued("evt_0", "rcp_0")).status, 200);
  env_.fail_sync = true;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<HttpResponse> got;
  constexpr int kDeliveries = 20;
  for (int i = 1; i <= kDeliveries; ++i) {
    const std::string body = Issued("evt_" + std::to_string(i), "rcp_" + std::to_string(i));
    rx_->HandleAsync("POST", "/hooks", {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), body)}},
                     body, [&](HttpResponse r) {
                       std::lock_guard lock(mu);
                       got.push_back(std::move(r));
                       cv.notify_all();
                     });
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(
      cv.wait_for(lock, std::chrono::seconds(60), [&] { return got.size() == kDeliveries; }));
  for (const HttpResponse& r : got) ExpectError(r, 503, "storage_error", "storage");
  for (int i = 1; i <= kDeliveries; ++i) {
    EXPECT_FALSE(store_->Get("receipt", "rcp_" + std::to_string(i)).ok()) << i;
  }
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
}

TEST_F(receiver_handle, HandleAsyncAnswersReadsAndRefusalsBeforeReturning) {
  bool answered = false;
  rx_->HandleAsync("GET", "/healthz", {}, "", [&](HttpResponse r) {
    EXPECT_EQ(r.status, 200);
    answered = true;
  });
  EXPECT_TRUE(answered);
  answered = false;
  rx_->HandleAsync("POST", "/hooks", {}, Issued("evt_u", "rcp_u"), [&](HttpResponse r) {
    ExpectError(r, 401, "unauthorized", "signature");
    answered = true;
  });
  EXPECT_TRUE(answered);
  ASSERT_EQ(Refused().size(), 1u);
  EXPECT_EQ(Refused().front().status, 401);
}

// --- TryHandleWithoutBlocking: what an event loop's thread may do itself ------------

// Collects one answer given on any thread.
class OneAnswer {
 public:
  Receiver::AnswerCallback Callback() {
    return [this](HttpResponse r) {
      std::lock_guard lock(mu_);
      answers_.push_back(std::move(r));
      cv_.notify_all();
    };
  }
  // The first answer, waiting at most 60 s for it.
  std::optional<HttpResponse> Wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return !answers_.empty(); })) {
      return std::nullopt;
    }
    return answers_.front();
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return answers_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HttpResponse> answers_;
};

TEST_F(receiver_handle, TryHandleWithoutBlockingTakesASignedPostAndAnswersOnceDurable) {
  const std::string body = Issued("evt_t1", "rcp_t1");
  Headers headers = {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), body)}};
  std::string taken = body;
  OneAnswer answer;
  Receiver::AnswerCallback done = answer.Callback();
  ASSERT_TRUE(rx_->TryHandleWithoutBlocking("POST", "/hooks", headers, taken, done));
  EXPECT_EQ(done, nullptr) << "the callback is taken";
  std::optional<HttpResponse> r = answer.Wait();
  ASSERT_TRUE(r.has_value());
  ExpectStatus(*r, 200, "accepted");
  EXPECT_EQ(answer.count(), 1u);
  Result<Projection> p = store_->Get("receipt", "rcp_t1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="accepted",status="200"})"), 1);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
}

TEST_F(receiver_handle, TryHandleWithoutBlockingRefusesAndQuarantinesOnTheLoop) {
  ReceiverOptions ro;
  ro.max_body_bytes = 32 * 1024;
  MakeReceiver(ro);
  // A forged signature: verified once, answered 401 before returning, and
  // quarantined (a store's quarantine only queues).
  const std::string body = Issued("evt_t2", "rcp_t2");
  Headers forged = {{"X-RR-Signature", SignRr("not_the_secret_000000", NowSeconds(), body)}};
  std::string taken = body;
  OneAnswer answer;
  Receiver::AnswerCallback done = answer.Callback();
  ASSERT_TRUE(rx_->TryHandleWithoutBlocking("POST", "/hooks", forged, taken, done));
  EXPECT_EQ(done, nullptr) << "the callback is taken";
  ASSERT_EQ(answer.count(), 1u) << "answered before returning";
  ExpectError(*answer.Wait(), 401, "unauthorized", "X-RR-Signature");
  ASSERT_EQ(Refused().size(), 1u);
  EXPECT_EQ(Refused().front().status, 401);
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="unauthorized",status="401"})"), 1);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);

  // Over the body limit and under 64 KiB: 413 there too, quarantined.
  const std::string large = Issued("evt_t3", "rcp_t3") + std::string(40 * 1024, ' ');
  Headers signed_large = {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), large)}};
  std::string large_body = large;
  OneAnswer too_large;
  Receiver::AnswerCallback large_done = too_large.Callback();
  ASSERT_TRUE(
      rx_->TryHandleWithoutBlocking("POST", "/hooks", signed_large, large_body, large_done));
  ASSERT_EQ(too_large.count(), 1u) << "answered before returning";
  EXPECT_EQ(too_large.Wait()->status, 413);
  ASSERT_EQ(Refused().size(), 2u);
  EXPECT_EQ(Refused().back().status, 413);
  EXPECT_EQ(Refused().back().body_bytes, large.size());

  // A body over 64 KiB: left to a worker, untouched, so one large delivery
  // cannot hold up the loop's other connections.
  const std::string big = Issued("evt_t4", "rcp_t4") + std::string(64 * 1024, ' ');
  Headers signed_big = {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), big)}};
  std::string big_body = big;
  OneAnswer unused_answer;
  Receiver::AnswerCallback unused = unused_answer.Callback();
  EXPECT_FALSE(rx_->TryHandleWithoutBlocking("POST", "/hooks", signed_big, big_body, unused));
  EXPECT_EQ(big_body, big);
  ASSERT_EQ(signed_big.size(), 1u);
  EXPECT_EQ(signed_big[0].first, "X-RR-Signature");
  // Reads are not taken either.
  Headers none;
  std::string empty;
  EXPECT_FALSE(rx_->TryHandleWithoutBlocking("GET", "/healthz", none, empty, unused));
  EXPECT_NE(unused, nullptr);
  EXPECT_EQ(unused_answer.count(), 0u);
  EXPECT_EQ(Refused().size(), 2u);
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
}

TEST_F(receiver_handle, TryHandleWithoutBlockingAnswers429ItselfAndKeepsNothing) {
  ReceiverOptions ro;
  ro.max_in_flight = 0;
  MakeReceiver(ro);
  const std::string body = Issued("evt_t4", "rcp_t4");
  Headers headers = {{"X-RR-Signature", SignRr(kSecret, NowSeconds(), body)}};
  std::string taken = body;
  OneAnswer answer;
  Receiver::AnswerCallback done = answer.Callback();
  ASSERT_TRUE(rx_->TryHandleWithoutBlocking("POST", "/hooks", headers, taken, done));
  ASSERT_EQ(answer.count(), 1u) << "answered before returning";
  ExpectStatus(*answer.Wait(), 429, "overloaded");
  EXPECT_TRUE(Refused().empty());
  EXPECT_EQ(Metric(R"(eventfold_deliveries_total{outcome="overloaded",status="429"})"), 1);
}

// A sink that keeps nothing and stores on the calling thread (the default
// IngestAsync), as an application's sink might.
class CallingThreadSink : public IngestSink {
 public:
  IngestResult Ingest(const Delivery&) override {
    ++ingested;
    IngestResult r;
    r.outcome = Outcome::kAccepted;
    return r;
  }
  Status Quarantine(RefusedDelivery) override { return Status::OK(); }
  uint64_t ApproximateBytes() override { return 0; }
  int ingested = 0;
};

TEST(receiver_make, TryHandleWithoutBlockingDeclinesOverASinkThatMayBlock) {
  CallingThreadSink sink;
  ReceiverOptions ro;
  ro.allow_unsigned = true;
  Result<std::unique_ptr<Receiver>> rx = Receiver::Make(&sink, ro);
  ASSERT_TRUE(rx.ok()) << rx.status().ToString();
  const std::string body = Issued("evt_t5", "rcp_t5");
  Headers headers;
  std::string kept = body;
  bool answered = false;
  Receiver::AnswerCallback done = [&](HttpResponse) { answered = true; };
  EXPECT_FALSE((*rx)->TryHandleWithoutBlocking("POST", "/hooks", headers, kept, done));
  EXPECT_EQ(kept, body);
  EXPECT_FALSE(answered);
  EXPECT_EQ(sink.ingested, 0);
  (*rx)->HandleAsync("POST", "/hooks", headers, kept, done);
  EXPECT_TRUE(answered);
  EXPECT_EQ(sink.ingested, 1);
}

// --- never a 3xx --------------------------------------------------------------------

TEST_F(receiver_handle, FuzzNeverAnswers3xx) {
  const uint64_t seed = TestSeed("receiver_handle.FuzzNeverAnswers3xx", 9001);
  std::mt19937_64 rng(seed);
  ReceiverOptions ro;
  ro.max_body_bytes = 2048;
  MakeReceiver(ro);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto garbage = [&](size_t max) {
    std::string s(rng() % (max + 1), '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xff);
    return s;
  };
  const std::vector<std::string> methods = {"POST", "POST",   "POST",  "POST", "GET",     "HEAD",
                                            "PUT",  "DELETE", "PATCH", "",     "P\x01ST", "GETT"};
  const std::vector<std::string> paths = {
      "/hooks", "/", "/healthz", "/metrics", "", "/../../etc/passwd", "/hooks?x=1", "//", "\xff"};
  const std::vector<std::string> header_names = {"X-RR-Signature",
                                                 "x-rr-signature",
                                                 "X-RR-Event-Id",
                                                 "webhook-id",
                                                 "webhook-timestamp",
                                                 "webhook-signature",
                                                 "Content-Type",
                                                 "Location",
                                                 "Authorization",
                                                 "",
                                                 "\r\n"};
  const std::vector<std::string> types = {
      "receipt.issued",  "receipt.refunded", "product.created",
      "product.updated", "product.deleted",  "inventory.updated",
      "widget.made",     "receipt",          ""};
  std::map<int, int> seen;
  for (int iter = 0; iter < 2000; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter) + ", seed " + std::to_string(seed));
    clock_.Advance(static_cast<int64_t>(rng() % 5000000));
    const std::string method = rng() % 10 < 7 ? std::string("POST") : pick(methods);
    const std::string path = pick(paths);
    // A body: plausible events (sometimes mutated) or garbage.
    std::string body;
    const std::string id = "evt_" + std::to_string(rng() % 50);
    switch (rng() % 4) {
      case 0:
        body = garbage(rng() % 8 == 0 ? 4096 : 200);
        break;
      default: {
        const std::string key = rng() % 2 ? "receipt_id" : "product_id";
        body = "{\"event_id\":\"" + id + "\",\"type\":\"" + pick(types) +
               "\",\"occurred_at\":\"2026-11-29T10:" + std::to_string(10 + rng() % 50) + ":00Z\"," +
               (rng() % 3 == 0 ? "\"version\":" + std::to_string(rng() % 4) + "," : "") +
               "\"data\":{\"" + key + "\":\"k" + std::to_string(rng() % 5) + "\"}}";
        if (rng() % 4 == 0 && !body.empty()) {
          for (int m = 0; m < 3; ++m) body[rng() % body.size()] = static_cast<char>(rng() & 0xff);
        }
      }
    }
    Headers headers;
    const int n_headers = static_cast<int>(rng() % 5);
    for (int h = 0; h < n_headers; ++h) {
      std::string value;
      switch (rng() % 6) {
        case 0:
          value = garbage(80);
          break;
        case 1:
          value = "t=" + std::to_string(NowSeconds()) + ",v1=" + garbage(64);
          break;
        case 2:
          value = id;
          break;
        case 3:
          value = "v1," + Base64Encode(garbage(32));
          break;
        case 4:
          value = std::to_string(NowSeconds() - 400 + static_cast<int64_t>(rng() % 800));
          break;
        default:
          value = "";
      }
      headers.emplace_back(pick(header_names), value);
    }
    switch (rng() % 3) {  // often a genuine signature, so deeper paths run
      case 0:
        headers.emplace_back("X-RR-Signature",
                             SignRr(kSecret, NowSeconds() - 350 + rng() % 700, body));
        break;
      case 1: {
        const std::string wid = rng() % 4 ? id : "msg_" + std::to_string(rng() % 9);
        const int64_t t = NowSeconds() - 350 + static_cast<int64_t>(rng() % 700);
        headers.emplace_back("webhook-id", wid);
        headers.emplace_back("webhook-timestamp", std::to_string(t));
        headers.emplace_back("webhook-signature", SignStandard(kWhsec, wid, t, body));
        break;
      }
      default:
        break;
    }
    std::shuffle(headers.begin(), headers.end(), rng);
    HttpResponse r = rx_->Handle(method, path, headers, body);
    ++seen[r.status];
    EXPECT_FALSE(r.status >= 300 && r.status < 400) << r.status << " " << r.body;
    static const std::set<int> allowed = {200, 400, 401, 404, 405, 409, 413, 429, 503};
    EXPECT_TRUE(allowed.count(r.status)) << r.status << " " << r.body;
    if (r.content_type == "application/json") {
      EXPECT_TRUE(IsJsonObject(r.body)) << r.body;
    }
    if (r.status == 200 && method == "POST") {
      const auto status = JsonString(r.body, "status");
      EXPECT_TRUE(status == "accepted" || status == "duplicate") << r.body;
    }
  }
  std::string summary;
  for (const auto& [status, count] : seen) {
    summary += std::to_string(status) + ":" + std::to_string(count) + " ";
  }
  std::printf("status counts: %s\n", summary.c_str());
  // The loop reached every interesting answer.
  for (int status : {200, 400, 401, 404, 405, 409, 413}) {
    EXPECT_GT(seen[status], 0) << "status " << status << " never seen";
  }
  EXPECT_EQ(Metric("eventfold_in_flight"), 0);
}

TEST(receiver_make, RefusesMissingOrBadSecrets) {
  std::unique_ptr<leveldb::Env> mem(leveldb::NewMemEnv(leveldb::Env::Default()));
  ManualClock clock(kNow * kMicros);
  Options o;
  o.env = mem.get();
  o.clock = &clock;
  Result<std::unique_ptr<Store>> store = Store::Open("/rx-make", o);
  ASSERT_TRUE(store.ok());
  ReceiverOptions ro;
  EXPECT_FALSE(Receiver::Make(store->get(), ro).ok()) << "no secret and not allow_unsigned";
  ro.secrets = {"tiny-secret"};
  Result<std::unique_ptr<Receiver>> bad = Receiver::Make(store->get(), ro);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("tiny-secret"), std::string::npos)
      << bad.status().message();
  ro.secrets = {"whsec_%%%%%%%%%%%%%%%%"};
  EXPECT_FALSE(Receiver::Make(store->get(), ro).ok());

  // No thread or no room to store with, or a body limit that refuses every
  // delivery for good (413): refused, naming the option.
  for (auto [threads, batch, body, field] :
       {std::tuple<size_t, size_t, size_t, const char*>{0, 256, 1, "store_threads"},
        {2, 0, 1, "max_store_batch"},
        {2, 256, 0, "max_body_bytes"}}) {
    ReceiverOptions zero;
    zero.secrets = {kSecret};
    zero.store_threads = threads;
    zero.max_store_batch = batch;
    zero.max_body_bytes = body;
    Result<std::unique_ptr<Receiver>> r = Receiver::Make(store->get(), zero);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_EQ(r.status().message().rfind(std::string(field) + ": ", 0), 0u) << r.status().message();
    EXPECT_FALSE(Receiver::ValidateOptions(zero).ok()) << field;
  }

  // allow_unsigned: deliveries without a signature are taken.
  ro.secrets.clear();
  ro.allow_unsigned = true;
  ro.clock = &clock;
  Result<std::unique_ptr<Receiver>> open = Receiver::Make(store->get(), ro);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ((*open)->Handle("POST", "/", {}, Issued("evt_u", "rcp_u")).status, 200);
}

}  // namespace
}  // namespace eventfold
