// The admin read API (tools/admin_api.h) on a real HttpServer over loopback,
// against a store in a scratch directory: bearer-token refusals, every
// endpoint's bytes against the CLI's views, paging, and the feed's long-poll
// (woken by an ingest; a bounded wait answers empty).

#include "tools/admin_api.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/http_server.h"
#include "tests/common/raw_http_client.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tools/read_views.h"

namespace eventfold::cli {
namespace {

using test_util::Lines;
using test_util::ScratchDir;

const std::string kToken = "admin-token-0123456789abcdef";

std::string Issued(const std::string& event_id, const std::string& rid) {
  return "{\"event_id\":\"" + event_id +
         "\",\"type\":\"receipt.issued\",\"occurred_at\":\"2026-11-29T10:15:30Z\","
         "\"data\":{\"receipt_id\":\"" +
         rid + "\",\"amount\":1500}}";
}

std::string Created(const std::string& event_id, const std::string& pid) {
  return "{\"event_id\":\"" + event_id +
         "\",\"type\":\"product.created\",\"occurred_at\":\"2026-11-29T10:15:30Z\","
         "\"data\":{\"product_id\":\"" +
         pid + "\"}}";
}

class AdminApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options options;
    options.clock = &clock_;
    Result<std::unique_ptr<Store>> store = Store::Open(dir_.path(), options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    for (int i = 1; i <= 5; ++i) {
      const std::string n = std::to_string(i);
      ASSERT_EQ(store_->Ingest(Issued("evt_r" + n, "rcp_" + n)).outcome, Outcome::kAccepted);
    }
    ASSERT_EQ(store_->Ingest(Created("evt_p1", "prd/1 x")).outcome, Outcome::kAccepted);
    AdminApiOptions ao;
    ao.token = kToken;
    ao.clock = &clock_;
    ao.stopping = &stopping_;
    Result<std::unique_ptr<Receiver>> api = MakeAdminApi(store_.get(), ao);
    ASSERT_TRUE(api.ok());
    api_ = std::move(*api);
    HttpServerOptions so;
    so.pass_query = true;
    so.workers = 4;
    server_ = std::make_unique<HttpServer>(api_.get(), so);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    stopping_.store(true);
    if (server_) server_->Stop();
  }

  // GETs `target` from the fixture's server, or from the one on `port`.
  httplib::Result Get(const std::string& target, const std::string& token = kToken, int port = 0) {
    httplib::Client client("127.0.0.1", port != 0 ? port : server_->port());
    client.set_read_timeout(std::chrono::seconds(60));
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return client.Get(target, h);
  }

  // Every page of `target` (ending in "?" or "&"), `limit` items a page,
  // following the cursor until a page without one, or an empty page (the
  // feed's last); each page's line count in `sizes`.
  std::string AllPages(const std::string& target, size_t limit, std::vector<size_t>* sizes,
                       int port = 0) {
    std::string all, after;
    for (int round = 0; round < 20; ++round) {
      const std::string page_target = target + "limit=" + std::to_string(limit) +
                                      (round == 0 ? "" : "&after=" + PercentEncode(after));
      auto page = Get(page_target, kToken, port);
      EXPECT_TRUE(page) << page_target;
      if (!page) break;
      EXPECT_EQ(page->status, 200) << page->body;
      sizes->push_back(Lines(page->body).size());
      all += page->body;
      // cpp-httplib hands the header's value percent-decoded: the cursor.
      after = page->get_header_value(kNextAfterHeader);
      if (after.empty() || page->body.empty()) break;
    }
    return all;
  }

  // The store's projections of `entity` ("": all), as `eventfold list`
  // prints them.
  std::string Listed(const std::string& entity) {
    std::string text;
    EXPECT_TRUE(store_
                    ->List(entity,
                           [&](const Projection& p) {
                             text += ProjectionToJson(p) + "\n";
                             return true;
                           })
                    .ok());
    return text;
  }
  // Three refusals in the quarantine, told apart by their reasons.
  void AddRefusals() {
    for (int i = 0; i < 3; ++i) {
      RefusedDelivery r;
      r.status = 400;
      r.reason = "event_id: missing " + std::to_string(i);
      r.body_prefix = "{}";
      r.body_bytes = 2;
      ASSERT_TRUE(store_->quarantine().Add(r).ok());
    }
  }
  // The quarantine, as `eventfold refused` prints it.
  std::string RefusedLines() {
    std::string text;
    EXPECT_TRUE(store_->quarantine()
                    .List([&](const RefusedDelivery& r) {
                      text += RefusedLine(r);
                      return true;
                    })
                    .ok());
    return text;
  }

  ManualClock clock_{1764411330000000};
  ScratchDir dir_{"admin-api"};
  std::unique_ptr<Store> store_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Receiver> api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(AdminApiTest, RefusesMissingOrWrongToken) {
  for (const std::string target : {"/v1/status", "/v1/projections/receipt/rcp_1", "/v1/feed"}) {
    auto none = Get(target, "");
    ASSERT_TRUE(none) << target;
    EXPECT_EQ(none->status, 401) << target;
    EXPECT_EQ(none->body.find("rcp_1"), std::string::npos);
    auto wrong = Get(target, kToken + "x");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << target;
    auto prefix = Get(target, kToken.substr(0, kToken.size() - 1));
    ASSERT_TRUE(prefix);
    EXPECT_EQ(prefix->status, 401) << target;
  }
  httplib::Client client("127.0.0.1", server_->port());
  auto basic = client.Get("/v1/status", {{"Authorization", "Basic " + kToken}});
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->status, 401);
  auto ok = Get("/v1/status");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  // RFC 9110 §11.4: the scheme's name in any case, one or more spaces.
  for (const std::string scheme : {"bearer ", "BEARER ", "Bearer   "}) {
    auto r = client.Get("/v1/status", {{"Authorization", scheme + kToken}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << scheme;
  }
  for (const std::string& glued :
       {"Bearer" + kToken, "Bearerx " + kToken, "Bearer " + kToken + "x"}) {
    auto r = client.Get("/v1/status", {{"Authorization", glued}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << glued;
  }
  // A 401 names the scheme it wants.
  auto none = Get("/v1/status", "");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  // Two Authorization fields, the right token in either: refused, so which
  // one counts is nobody's choice.
  for (const bool right_first : {true, false}) {
    test_util::RawClient c(server_->port());
    const std::string right = "Authorization: Bearer " + kToken + "\r\n";
    const std::string wrong = "Authorization: Bearer nope\r\n";
    ASSERT_TRUE(c.Send("GET /v1/status HTTP/1.1\r\nHost: t\r\n" +
                       (right_first ? right + wrong : wrong + right) + "\r\n"));
    EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{401}) << right_first;
  }
}

// A body declared over the limit is refused from the header alone; the
// token is still checked first, so a client without it learns nothing of
// the API, not even that it takes no body.
TEST_F(AdminApiTest, OversizedBodyIs401WithoutTheTokenAnd413WithIt) {
  const std::string declared = "Content-Length: " + std::to_string(64 << 20) + "\r\n";
  for (const bool with_token : {false, true}) {
    test_util::RawClient c(server_->port());
    const std::string auth = with_token ? "Authorization: Bearer " + kToken + "\r\n" : "";
    ASSERT_TRUE(c.Send("GET /v1/status HTTP/1.1\r\nHost: t\r\n" + auth + declared + "\r\n"));
    EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{with_token ? 413 : 401}) << with_token;
    // /metrics counts the 413 it sent, not one the 401 stood in for.
    auto metrics = Get("/metrics");
    ASSERT_TRUE(metrics);
    const std::string count = with_token ? "1" : "0";
    EXPECT_NE(metrics->body.find("eventfold_http_refused_total{reason=\"body_too_large\"} " +
                                 count + "\n"),
              std::string::npos)
        << with_token << "\n"
        << metrics->body;
  }
}

// The admin listener counts what its HTTP layer refuses, on its own
// /metrics (behind the token like every other path).
TEST_F(AdminApiTest, MetricsCountThisListenersHttpRefusals) {
  EXPECT_EQ(Get("/metrics", "")->status, 401);
  {
    test_util::RawClient c(server_->port());
    ASSERT_TRUE(c.Send("GET /v1/status HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n"));
    EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{400});
  }
  // A query changes nothing, as for /healthz.
  for (const std::string target : {"/metrics", "/metrics?x=1"}) {
    auto metrics = Get(target);
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200) << target;
    EXPECT_NE(metrics->body.find("eventfold_http_refused_total{reason=\"bad_framing\"} 1"),
              std::string::npos)
        << metrics->body;
  }
}

// Each endpoint takes its own parameters: one it does not take, one given
// twice or an empty entity is 400 naming it, not silently ignored.
TEST_F(AdminApiTest, RefusesParametersAnEndpointDoesNotTake) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"/v1/feed?bogus=1", "bogus"},
      {"/v1/feed?after=1&after=2", "after"},
      {"/v1/feed?after=0&wait_ms=10&wait_ms=20", "wait_ms"},
      {"/v1/projections?entity=", "entity"},
      {"/v1/projections?entity=receipt&entity=product", "entity"},
      {"/v1/projections?wait_ms=5", "wait_ms"},
      {"/v1/refused?entity=receipt", "entity"},
      {"/v1/status?verbose=1", "verbose"},
      {"/v1/projections/receipt/rcp_1?limit=1", "limit"},
      {"/v1/subscriptions?after=1", "after"},
  };
  for (const auto& [target, name] : refused) {
    auto r = Get(target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 400) << target << " " << r->body;
    EXPECT_NE(r->body.find(name), std::string::npos) << target << " " << r->body;
  }
  for (const std::string target :
       {"/v1/feed?after=0&limit=5&wait_ms=0", "/v1/projections?entity=receipt&limit=2&after=a",
        "/v1/refused?after=0&limit=3", "/v1/status", "/v1/projections/receipt/rcp_1"}) {
    auto r = Get(target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 200) << target << " " << r->body;
  }
}

TEST_F(AdminApiTest, HeadIsAnsweredWithHeadersOnly) {
  auto get = Get("/v1/projections/receipt/rcp_1");
  ASSERT_TRUE(get);
  ASSERT_EQ(get->status, 200);
  // HEAD then GET in one write, raw: the HEAD's answer is a header stating
  // the GET's length and no body; the GET's answer follows directly.
  test_util::RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string auth = "Authorization: Bearer " + kToken + "\r\n\r\n";
  ASSERT_TRUE(c.Send("HEAD /v1/projections/receipt/rcp_1 HTTP/1.1\r\nHost: t\r\n" + auth +
                     "GET /v1/projections/receipt/rcp_1 HTTP/1.1\r\nHost: t\r\n" + auth));
  const std::string got = c.ReadUntil([&](const std::string& r) {
    const size_t end = r.find("\r\n\r\n");
    return end != std::string::npos && r.size() >= 2 * (end + 4) + get->body.size();
  });
  const size_t head_end = got.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << got;
  const std::string head = got.substr(0, head_end + 4);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(get->body.size()) + "\r\n"),
            std::string::npos)
      << head;
  // The same header again, then the GET's body: no byte of a body after the HEAD's.
  EXPECT_EQ(got, head + head + get->body);
  EXPECT_FALSE(c.closed());
}

TEST_F(AdminApiTest, RefusesWritesAndUnknownPaths) {
  httplib::Client client("127.0.0.1", server_->port());
  auto post = client.Post("/v1/status", {{"Authorization", "Bearer " + kToken}}, "", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  auto get_backup = Get("/v1/backup?to=x");
  ASSERT_TRUE(get_backup);
  EXPECT_EQ(get_backup->status, 405);
  EXPECT_EQ(get_backup->get_header_value("Allow"), "POST");
  auto unknown = Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto unknown_with_query = Get("/v1/nothing?x=1");
  ASSERT_TRUE(unknown_with_query);
  EXPECT_EQ(unknown_with_query->status, 404);
  auto malformed = Get("/v1/projections/receipt/rcp%2");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  // Health needs no token and shows nothing stored; it is a GET too.
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, R"({"status":"ok"})");
  auto post_health = client.Post("/healthz", "", "text/plain");
  ASSERT_TRUE(post_health);
  EXPECT_EQ(post_health->status, 405);
}

TEST_F(AdminApiTest, ShowAndLogAnswerTheCliBytes) {
  auto show = Get("/v1/projections/receipt/rcp_2");
  ASSERT_TRUE(show);
  ASSERT_EQ(show->status, 200);
  EXPECT_EQ(show->body, ProjectionToJson(*store_->Get("receipt", "rcp_2")) + "\n");
  // Percent-encoded ids with a slash and a space.
  auto encoded = Get("/v1/projections/product/" + PercentEncode("prd/1 x"));
  ASSERT_TRUE(encoded);
  ASSERT_EQ(encoded->status, 200);
  EXPECT_EQ(encoded->body, ProjectionToJson(*store_->Get("product", "prd/1 x")) + "\n");
  auto log = Get("/v1/log/receipt/rcp_2");
  ASSERT_TRUE(log);
  ASSERT_EQ(log->status, 200);
  EXPECT_EQ(log->body, EntityLogToJson(*store_->Log("receipt", "rcp_2")) + "\n");
  auto missing = Get("/v1/projections/receipt/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto missing_log = Get("/v1/log/receipt/nope");
  ASSERT_TRUE(missing_log);
  EXPECT_EQ(missing_log->status, 404);
}

TEST_F(AdminApiTest, ListPagesByEntityAndAcrossEntities) {
  const std::string all_receipts = Listed("receipt");
  std::vector<size_t> sizes;
  const std::string paged = AllPages("/v1/projections?entity=receipt&", 2, &sizes);
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(paged, all_receipts);

  // Across entities the cursor is ENTITY/ID (sent percent-encoded).
  auto first = Get("/v1/projections?limit=1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->get_header_value(kNextAfterHeader), "product/prd/1 x");
  auto second = Get("/v1/projections?limit=1&after=" + PercentEncode("product/prd/1 x"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->body, ProjectionToJson(*store_->Get("receipt", "rcp_1")) + "\n");

  for (const std::string bad : {"limit=0", "limit=abc", "limit=10abc", "limit=99999999"}) {
    auto r = Get("/v1/projections?" + bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_NE(r->body.find("limit"), std::string::npos) << r->body;
  }
  auto no_entity = Get("/v1/projections?entity=ghost");
  ASSERT_TRUE(no_entity);
  EXPECT_EQ(no_entity->status, 404);
}

// An id may hold any byte, a line break too; the cursor naming it must not
// end its header line and start another (response splitting), and must
// lead to the next page exactly.
TEST_F(AdminApiTest, AListCursorIsOneHeaderWhateverTheIdHolds) {
  const std::string odd = "a%41\r\nX-Injected: 1 ";
  ASSERT_EQ(store_->Ingest(Created("evt_p2", "a%41\\r\\nX-Injected: 1 ")).outcome,
            Outcome::kAccepted);
  ASSERT_TRUE(store_->Get("product", odd).ok());
  // On the wire: one header line, percent-encoded.
  test_util::RawClient c(server_->port());
  ASSERT_TRUE(
      c.Send("GET /v1/projections?entity=product&limit=1 HTTP/1.1\r\nHost: t\r\n"
             "Authorization: Bearer " +
             kToken + "\r\n\r\n"));
  ASSERT_EQ(c.ReadAnswers(1), std::vector<int>{200});
  const std::string head = c.received().substr(0, c.received().find("\r\n\r\n"));
  EXPECT_EQ(head.find("\r\nX-Injected"), std::string::npos) << head;
  EXPECT_NE(head.find(std::string("\r\n") + kNextAfterHeader + ": " + PercentEncode(odd) + "\r\n"),
            std::string::npos)
      << head;
  // Through the client the commands use, as they page: the cursor's bytes,
  // and from them exactly the next page.
  auto first = Get("/v1/projections?entity=product&limit=1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->get_header_value(kNextAfterHeader), odd);
  auto next = Get("/v1/projections?entity=product&limit=1&after=" +
                  PercentEncode(first->get_header_value(kNextAfterHeader)));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, ProjectionToJson(*store_->Get("product", "prd/1 x")) + "\n");
}

TEST_F(AdminApiTest, StatusRefusedAndSubscriptionsAnswerTheCliBytes) {
  ASSERT_NO_FATAL_FAILURE(AddRefusals());
  ASSERT_TRUE(store_->feed().SetCheckpoint("mailer", 2).ok());
  clock_.Advance(5000000);

  auto status = Get("/v1/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->body, *StatusView(*store_));

  const std::string refused_all = RefusedLines();
  auto page1 = Get("/v1/refused?limit=2");
  ASSERT_TRUE(page1);
  const std::string next = page1->get_header_value(kNextAfterHeader);
  ASSERT_FALSE(next.empty());
  auto page2 = Get("/v1/refused?limit=2&after=" + next);
  ASSERT_TRUE(page2);
  EXPECT_TRUE(page2->get_header_value(kNextAfterHeader).empty());
  EXPECT_EQ(page1->body + page2->body, refused_all);

  auto subs = Get("/v1/subscriptions");
  ASSERT_TRUE(subs);
  EXPECT_EQ(subs->body, *SubscriptionsView(*store_, &clock_));
  EXPECT_NE(subs->body.find("\"name\":\"mailer\""), std::string::npos);
}

// A page also ends at AdminApiOptions::max_page_bytes, after the item that
// reaches it, whatever `limit` allows: with a budget of one byte each page
// holds one item, and the cursor leads through every one of them, for
// projections, refusals and the feed alike (the feed's last page is an
// empty one).
TEST_F(AdminApiTest, APageEndsAtItsByteBudget) {
  ASSERT_NO_FATAL_FAILURE(AddRefusals());
  AdminApiOptions ao;
  ao.token = kToken;
  ao.clock = &clock_;
  ao.stopping = &stopping_;
  ao.max_page_bytes = 1;
  Result<std::unique_ptr<Receiver>> api = MakeAdminApi(store_.get(), ao);
  ASSERT_TRUE(api.ok());
  HttpServerOptions so;
  so.pass_query = true;
  so.workers = 2;
  HttpServer server(api->get(), so);
  ASSERT_TRUE(server.Start().ok());
  std::vector<size_t> sizes;
  EXPECT_EQ(AllPages("/v1/projections?", 1000, &sizes, server.port()), Listed(""));
  EXPECT_EQ(sizes, std::vector<size_t>(6, 1));

  sizes.clear();
  EXPECT_EQ(AllPages("/v1/refused?", 1000, &sizes, server.port()), RefusedLines());
  EXPECT_EQ(sizes, std::vector<size_t>(3, 1));

  std::vector<Change> changes;
  ASSERT_TRUE(store_->feed().Read(0, 1000, AppendTo<Change>(&changes)).ok());
  std::string feed;
  for (const Change& c : changes) feed += ChangeToJson(c) + "\n";
  sizes.clear();
  EXPECT_EQ(AllPages("/v1/feed?", 1000, &sizes, server.port()), feed);
  std::vector<size_t> want(changes.size(), 1);
  want.push_back(0);
  EXPECT_EQ(sizes, want);
  server.Stop();
}

TEST_F(AdminApiTest, FeedReadsFromASequenceNumber) {
  const uint64_t last = store_->feed().LastSeq();
  ASSERT_EQ(last, 6u);
  auto page = Get("/v1/feed?after=4&limit=10");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  std::vector<Change> expected;
  ASSERT_TRUE(store_->feed().Read(4, 10, AppendTo<Change>(&expected)).ok());
  std::string text;
  for (const Change& c : expected) text += ChangeToJson(c) + "\n";
  EXPECT_EQ(page->body, text);
  EXPECT_EQ(page->get_header_value(kNextAfterHeader), "6");
  // Nothing follows the largest seq (its successor would wrap to 0).
  auto beyond = Get("/v1/feed?after=18446744073709551615");
  ASSERT_TRUE(beyond);
  EXPECT_EQ(beyond->status, 200);
  EXPECT_EQ(beyond->body, "");
  EXPECT_EQ(beyond->get_header_value(kNextAfterHeader), "18446744073709551615");
  auto too_long = Get("/v1/feed?after=6&wait_ms=999999");
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400);
  EXPECT_NE(too_long->body.find("wait_ms"), std::string::npos);
}

TEST_F(AdminApiTest, BoundedLongPollAnswersEmpty) {
  auto r = Get("/v1/feed?after=6&wait_ms=50");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_EQ(r->get_header_value(kNextAfterHeader), "6");
}

TEST_F(AdminApiTest, LongPollWakesOnIngest) {
  // The poll asks for up to 30 s; an ingest must end it with the new change.
  // Whether the ingest lands before or during the wait, the answer is the
  // same, so the test has no timing race; the elapsed bound shows it woke.
  const auto started = std::chrono::steady_clock::now();
  std::optional<httplib::Result> polled;
  std::thread poller([&] { polled.emplace(Get("/v1/feed?after=6&wait_ms=30000")); });
  ASSERT_EQ(store_->Ingest(Issued("evt_r9", "rcp_9")).outcome, Outcome::kAccepted);
  poller.join();
  ASSERT_TRUE(polled && *polled);
  const httplib::Response& answer = **polled;
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(answer.body.find("\"id\":\"rcp_9\""), std::string::npos) << answer.body;
  EXPECT_EQ(answer.get_header_value(kNextAfterHeader), "7");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(25));
}

TEST_F(AdminApiTest, StoppingEndsALongPoll) {
  const auto started = std::chrono::steady_clock::now();
  std::optional<httplib::Result> polled;
  std::thread poller([&] { polled.emplace(Get("/v1/feed?after=6&wait_ms=30000")); });
  stopping_.store(true);
  poller.join();
  ASSERT_TRUE(polled && *polled);
  EXPECT_EQ((*polled)->body, "");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(25));
}

// A backup asked of a receiver that is stopping (or running when it
// begins to stop) is abandoned: 503 saying so, nothing left in `to`, and
// no long copy holds the shutdown. Asked again of a running one, it runs.
TEST_F(AdminApiTest, AStoppingReceiverAbandonsABackup) {
  ScratchDir scratch("admin-api-bk");
  const std::string to = scratch.path() + "/bk";
  const auto post = [&] {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(std::chrono::seconds(60));
    const httplib::Headers h = {{"Authorization", "Bearer " + kToken}};
    return client.Post("/v1/backup?to=" + PercentEncode(to), h, "", "application/json");
  };
  stopping_.store(true);
  httplib::Result abandoned = post();
  ASSERT_TRUE(abandoned);
  EXPECT_EQ(abandoned->status, 503) << abandoned->body;
  EXPECT_NE(abandoned->body.find("abandoned"), std::string::npos) << abandoned->body;
  EXPECT_FALSE(std::filesystem::exists(to)) << "the abandoned backup left " << to;
  stopping_.store(false);
  httplib::Result whole = post();
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200) << whole->body;
  EXPECT_TRUE(std::filesystem::exists(to + "/CURRENT"));
}

// Forwards to the admin API and counts the feed reads the event loop's
// path took (parked, since the API answers nothing else there but health
// and refusals).
class ParkCounter final : public Receiver {
 public:
  explicit ParkCounter(Receiver* inner) : inner_(inner) {}

  HttpResponse Handle(std::string_view method, std::string_view path, const Headers& headers,
                      std::string_view body) override {
    return inner_->Handle(method, path, headers, body);
  }
  void HandleAsync(std::string_view method, std::string_view path, Headers headers,
                   std::string body, AnswerCallback done) override {
    inner_->HandleAsync(method, path, std::move(headers), std::move(body), std::move(done));
  }
  bool TryHandleWithoutBlocking(std::string_view method, std::string_view path, Headers& headers,
                                std::string& body, AnswerCallback& done) override {
    if (!inner_->TryHandleWithoutBlocking(method, path, headers, body, done)) return false;
    if (path.substr(0, 8) == "/v1/feed") {
      std::lock_guard<std::mutex> lock(mu_);
      ++parked_;
      cv_.notify_all();
    }
    return true;
  }
  HttpResponse RefuseOversized(std::string_view method, std::string_view path,
                               const Headers& headers, uint64_t body_bytes) override {
    return inner_->RefuseOversized(method, path, headers, body_bytes);
  }
  HttpResponse RefuseOverloaded(std::string_view why) override {
    return inner_->RefuseOverloaded(why);
  }
  std::string MetricsText() override { return inner_->MetricsText(); }

  // Waits (bounded) until `n` feed reads were parked.
  bool WaitForParked(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return parked_ >= n; });
  }

 private:
  Receiver* const inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  int parked_ = 0;
};

// With one worker and a queue of one, three followers waiting on the feed hold
// no worker: reads of the store are answered meanwhile, and one ingest
// answers all three with the new change.
TEST_F(AdminApiTest, LongPollsHoldNoWorker) {
  ParkCounter counter(api_.get());
  HttpServerOptions so;
  so.pass_query = true;
  // A queue of one: the worker may still be finishing the previous read
  // when the next arrives. Three polls held on the workers would fill both.
  so.workers = 1;
  so.worker_queue = 1;
  HttpServer busy(&counter, so);
  ASSERT_TRUE(busy.Start().ok());
  const auto get = [&](const std::string& target) {
    httplib::Client client("127.0.0.1", busy.port());
    client.set_read_timeout(std::chrono::seconds(60));
    return client.Get(target, {{"Authorization", "Bearer " + kToken}});
  };
  const uint64_t last = store_->feed().LastSeq();
  const std::string poll = "/v1/feed?after=" + std::to_string(last) + "&wait_ms=30000";
  std::vector<std::optional<httplib::Result>> polled(3);
  std::vector<std::thread> pollers;
  for (auto& p : polled) pollers.emplace_back([&] { p.emplace(get(poll)); });
  ASSERT_TRUE(counter.WaitForParked(3));
  for (int i = 0; i < 5; ++i) {
    auto status = get("/v1/status");
    ASSERT_TRUE(status);
    EXPECT_EQ(status->status, 200) << status->body;
    auto show = get("/v1/projections/receipt/rcp_1");
    ASSERT_TRUE(show);
    EXPECT_EQ(show->status, 200) << show->body;
  }
  ASSERT_EQ(store_->Ingest(Issued("evt_r9", "rcp_9")).outcome, Outcome::kAccepted);
  for (std::thread& t : pollers) t.join();
  for (const auto& p : polled) {
    ASSERT_TRUE(p && *p);
    EXPECT_EQ((*p)->status, 200);
    EXPECT_NE((*p)->body.find("\"id\":\"rcp_9\""), std::string::npos) << (*p)->body;
    EXPECT_EQ((*p)->get_header_value(kNextAfterHeader), std::to_string(last + 1));
  }
  busy.Stop();
}

// From a raw socket: two long-polls pipelined on one connection are
// answered in order, the first (parked) by the ingest, the second after it
// with the same change; the connection stays open.
TEST_F(AdminApiTest, PipelinedLongPollsAreAnsweredInOrder) {
  const uint64_t last = store_->feed().LastSeq();
  const auto poll = [&](int wait_ms) {
    return "GET /v1/feed?after=" + std::to_string(last) + "&wait_ms=" + std::to_string(wait_ms) +
           " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + kToken + "\r\n\r\n";
  };
  test_util::RawClient c(server_->port());
  ASSERT_TRUE(c.Send(poll(30000) + poll(300)));
  ASSERT_EQ(store_->Ingest(Issued("evt_r9", "rcp_9")).outcome, Outcome::kAccepted);
  ASSERT_EQ(c.ReadAnswers(2, std::chrono::milliseconds(30000)), (std::vector<int>{200, 200}));
  const std::string& got = c.received();
  const size_t first = got.find("\"id\":\"rcp_9\"");
  ASSERT_NE(first, std::string::npos) << got;
  EXPECT_NE(got.find("\"id\":\"rcp_9\"", first + 1), std::string::npos) << got;
  EXPECT_FALSE(c.WaitForClose(std::chrono::milliseconds(200)));
}

// The event loop's path, called directly: what needs no store is answered
// before it returns; a read of the store is left for a worker; a feed read
// with nothing to answer yet is parked and answered by the next change.
TEST_F(AdminApiTest, LoopAnswersOrParksOnlyWhatNeedsNoWorker) {
  struct Call {
    bool taken = false;
    std::optional<HttpResponse> answer;
  };
  std::mutex mu;
  std::condition_variable cv;
  const auto call = [&](std::string_view method, std::string_view target, const std::string& token,
                        std::shared_ptr<Call> out) {
    Headers headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    std::string body;
    Receiver::AnswerCallback done = [&, out](HttpResponse r) {
      std::lock_guard<std::mutex> lock(mu);
      out->answer = std::move(r);
      cv.notify_all();
    };
    out->taken = api_->TryHandleWithoutBlocking(method, target, headers, body, done);
    EXPECT_EQ(out->taken, done == nullptr) << target << ": done is taken exactly when true";
  };
  const auto answered_now = [&](std::string_view method, std::string_view target,
                                const std::string& token) {
    auto out = std::make_shared<Call>();
    call(method, target, token, out);
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(out->taken) << target;
    return out->answer ? out->answer->status : 0;
  };
  EXPECT_EQ(answered_now("GET", "/healthz", ""), 200);
  EXPECT_EQ(answered_now("GET", "/v1/status", ""), 401);
  EXPECT_EQ(answered_now("POST", "/v1/status", kToken), 405);

  const uint64_t last = store_->feed().LastSeq();
  for (const std::string& target :
       {std::string("/v1/status"), std::string("/v1/feed?after=0&wait_ms=1000"),
        "/v1/feed?after=" + std::to_string(last), std::string("/v1/feed?wait_ms=nope")}) {
    auto out = std::make_shared<Call>();
    call("GET", target, kToken, out);
    EXPECT_FALSE(out->taken) << target << " should go to a worker";
  }

  auto parked = std::make_shared<Call>();
  call("GET", "/v1/feed?after=" + std::to_string(last) + "&wait_ms=30000", kToken, parked);
  EXPECT_TRUE(parked->taken);
  ASSERT_EQ(store_->Ingest(Issued("evt_r9", "rcp_9")).outcome, Outcome::kAccepted);
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(
      cv.wait_for(lock, std::chrono::seconds(60), [&] { return parked->answer.has_value(); }));
  EXPECT_EQ(parked->answer->status, 200);
  EXPECT_NE(parked->answer->body.find("\"id\":\"rcp_9\""), std::string::npos);
}

TEST(AdminApiMake, RefusesAnEmptyToken) {
  EXPECT_FALSE(MakeAdminApi(nullptr, AdminApiOptions{}).ok());
}

TEST(PercentCoding, RoundTripsAndRejectsMalformed) {
  const std::string raw = std::string("a/b c%d\xff~._-", 12);
  EXPECT_EQ(PercentDecode(PercentEncode(raw)), raw);
  EXPECT_EQ(PercentEncode("a/b"), "a%2Fb");
  EXPECT_FALSE(PercentDecode("%4"));
  EXPECT_FALSE(PercentDecode("%zz"));
  EXPECT_FALSE(PercentDecode("abc%"));
}

}  // namespace
}  // namespace eventfold::cli
