// The HTTP front end byte for byte: each test starts an HttpServer (with a
// real Store and an unsigned-delivery Receiver) on a loopback ephemeral port,
// writes raw bytes to a socket and asserts the exact status lines and whether
// the server closed. Timeouts are short options; every read is bounded.

#include "eventfold/http_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/signature.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "tests/common/quarantined.h"
#include "tests/common/raw_http_client.h"
#include "tests/receiver/receiver_test_util.h"

namespace eventfold {
namespace {

using receiver_test::Issued;
using receiver_test::TempDir;
using std::chrono::milliseconds;
using test_util::Quarantined;
using test_util::RawClient;
using SteadyClock = std::chrono::steady_clock;

std::string Post(const std::string& body, const std::string& content_type = "application/json") {
  return "POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Type: " + content_type + "\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path() + "/store", Options{});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ReceiverOptions ro;
    ro.allow_unsigned = true;
    ro.max_body_bytes = kMaxBody;
    Result<std::unique_ptr<Receiver>> r = Receiver::Make(store_.get(), ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    rx_ = std::move(*r);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // Options small enough for a test to reach every limit quickly. The
  // timeouts are generous, so that a client descheduled on a busy machine
  // (sanitizers, two cores) is not cut off; a test of a timeout shortens
  // its own (Short()).
  static HttpServerOptions TestOptions() {
    HttpServerOptions o;
    o.io_threads = 2;
    o.workers = 4;
    o.max_body_bytes = kMaxBody;
    o.max_header_bytes = 4096;
    o.max_header_fields = 20;
    o.max_url_bytes = 1024;
    o.header_timeout = milliseconds(10000);
    o.body_grace = milliseconds(10000);
    o.idle_timeout = milliseconds(30000);
    o.drain_timeout = milliseconds(2000);
    return o;
  }
  // TestOptions with the header and body timeouts a test waits out.
  static HttpServerOptions Short() {
    HttpServerOptions o = TestOptions();
    o.header_timeout = milliseconds(400);
    o.body_grace = milliseconds(400);
    return o;
  }

  // Whether the server's gauge of request memory of `kind` ("header" or
  // "body") reads `bytes`, waiting for it up to 30 s: the reads that change
  // it are events on the server's loops, not timers.
  bool MemoryHeld(const std::string& kind, size_t bytes) {
    const std::string line = "eventfold_http_request_memory_bytes{kind=\"" + kind + "\"} " +
                             std::to_string(bytes) + "\n";
    const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
    while (server_->MetricsText().find(line) == std::string::npos &&
           SteadyClock::now() < deadline) {
      std::this_thread::yield();
    }
    return server_->MetricsText().find(line) != std::string::npos;
  }

  void StartServer(HttpServerOptions o = TestOptions()) {
    server_ = std::make_unique<HttpServer>(rx_.get(), o);
    ASSERT_TRUE(server_->Start().ok());
  }

  // Sends `request` on a new connection; the first answer's status and
  // whether the server then closed.
  std::pair<int, bool> AnswerAndClose(const std::string& request) {
    RawClient c(server_->port());
    EXPECT_TRUE(c.connected());
    c.Send(request);
    std::vector<int> statuses = c.ReadAnswers(1);
    const bool closed = c.WaitForClose();
    return {statuses.empty() ? -1 : statuses[0], closed};
  }

  static constexpr size_t kMaxBody = 4096;
  TempDir dir_{"http-server"};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Receiver> rx_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, PipelinedRequestsAnsweredInOrderOnOneKeptAliveConnection) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  // Three requests in one write: accepted, a 400 the receiver decides, a GET.
  ASSERT_TRUE(c.Send(Post(Issued("evt_p1", "r1")) + Post("{not json") +
                     "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(3), (std::vector<int>{200, 400, 200}));
  EXPECT_NE(c.received().find("\"status\":\"ok\""), std::string::npos);
  // Still open: a fourth request on the same connection.
  ASSERT_TRUE(c.Send(Post(Issued("evt_p1", "r1"))));
  EXPECT_EQ(c.ReadAnswers(4), (std::vector<int>{200, 400, 200, 200}));
  EXPECT_FALSE(c.closed());
}

TEST_F(HttpServerTest, ConcurrentConnectionsAreAnsweredInOrderOnceDurable) {
  StartServer();
  // Each connection pipelines new deliveries, each followed by its own
  // redelivery. The answers come back from the store threads, grouped
  // across connections, yet each connection's are in its request order:
  // accepted, then duplicate (the redelivery is served only after the
  // first is durable).
  constexpr int kConnections = 8, kEvents = 10;
  std::vector<std::string> received(kConnections);
  std::vector<std::vector<int>> statuses(kConnections);
  std::vector<std::thread> clients;
  for (int c = 0; c < kConnections; ++c) {
    clients.emplace_back([&, c] {
      RawClient client(server_->port());
      std::string requests;
      for (int i = 0; i < kEvents; ++i) {
        const std::string id = std::to_string(c) + "_" + std::to_string(i);
        const std::string delivery = Post(Issued("evt_cc" + id, "r_cc" + id));
        requests += delivery + delivery;
      }
      client.Send(requests);
      statuses[c] = client.ReadAnswers(2 * kEvents, milliseconds(60000));
      received[c] = client.received();
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kConnections; ++c) {
    SCOPED_TRACE("connection " + std::to_string(c));
    EXPECT_EQ(statuses[c], std::vector<int>(2 * kEvents, 200));
    size_t at = 0;
    for (int i = 0; i < 2 * kEvents; ++i) {
      const char* want = i % 2 == 0 ? R"({"status":"accepted"})" : R"({"status":"duplicate"})";
      const size_t found = received[c].find(want, at);
      ASSERT_NE(found, std::string::npos) << "answer " << i << " should be " << want;
      at = found + 1;
    }
    for (int i = 0; i < kEvents; ++i) {
      const std::string id = std::to_string(c) + "_" + std::to_string(i);
      EXPECT_TRUE(store_->Get("receipt", "r_cc" + id).ok()) << id;
    }
  }
  EXPECT_EQ(store_->counters().accepted, static_cast<uint64_t>(kConnections * kEvents));
}

TEST_F(HttpServerTest, HeadIsAnsweredWithHeadersOnly) {
  StartServer();
  RawClient get(server_->port());
  ASSERT_TRUE(get.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_EQ(get.ReadAnswers(1), std::vector<int>{200});
  const std::string get_head = get.received().substr(0, get.received().find("\r\n\r\n") + 4);

  // HEAD then GET in one write: the HEAD's answer is its header alone (the
  // GET's Content-Length, no body bytes), the GET's answer follows at once.
  RawClient c(server_->port());
  ASSERT_TRUE(
      c.Send("HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
             "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string& got = c.ReadUntil(
      [&](const std::string& r) { return r.size() >= get_head.size() + get.received().size(); });
  ASSERT_EQ(got.size(), get_head.size() + get.received().size()) << got;
  EXPECT_EQ(got.substr(0, get_head.size()), get_head);
  EXPECT_EQ(got.substr(get_head.size()), get.received());
  // Nothing more arrives, and the connection stays open.
  EXPECT_EQ(c.ReadUntil([](const std::string&) { return false; }, milliseconds(200)).size(),
            got.size());
  EXPECT_FALSE(c.closed());
}

TEST_F(HttpServerTest, ChunkedBodyWithTrailerIsAccepted) {
  StartServer();
  const std::string body = Issued("evt_c1", "r2");
  const std::string half = body.substr(0, 10), rest = body.substr(10);
  char h1[16], h2[16];
  std::snprintf(h1, sizeof(h1), "%zx", half.size());
  std::snprintf(h2, sizeof(h2), "%zx", rest.size());
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     std::string(h1) + "\r\n" + half + "\r\n" + h2 + "\r\n" + rest +
                     "\r\n0\r\nX-Checksum: abc\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{200});
  EXPECT_NE(c.received().find("accepted"), std::string::npos) << c.received();
}

// RFC 9112 §7.1: a chunked body's framing lines end in CRLF. One that ends
// in a bare LF (a chunk size, the line after data, the last chunk, a
// trailer field) is malformed: 400 and close at once, not the 408 of a
// stall after body_grace, waiting for a CR that is not coming.
TEST_F(HttpServerTest, ABareLfInChunkedFramingIs400AtOnce) {
  HttpServerOptions o = TestOptions();
  o.body_grace = std::chrono::seconds(30);  // a wait for more would show
  StartServer(o);
  const std::string head = "POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& framing :
       {std::string("5\nhello\r\n0\r\n\r\n"), std::string("5\r\nhello\n0\r\n\r\n"),
        std::string("5\r\nhello\r\n0\n\n"), std::string("5\r\nhello\r\n0\r\n\n"),
        std::string("5\r\nhello\r\n0\r\nX: y\n\r\n")}) {
    SCOPED_TRACE(framing);
    const auto start = SteadyClock::now();
    EXPECT_EQ(AnswerAndClose(head + framing), std::make_pair(400, true));
    EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(20)) << "answered at once";
  }
}

// A trailer's fields are not the request's header (RFC 9110 §6.5.1): one
// naming another event id, or asking to close, changes nothing; more than
// max_header_fields of them is 431.
TEST_F(HttpServerTest, TrailerFieldsAreNeverTakenForHeaderFields) {
  StartServer();  // max_header_fields 20
  const auto chunked = [](const std::string& body, const std::string& trailer) {
    char size[16];
    std::snprintf(size, sizeof(size), "%zx", body.size());
    return "POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
           std::string(size) + "\r\n" + body + "\r\n0\r\n" + trailer + "\r\n";
  };
  RawClient c(server_->port());
  // The event id a header would have to match, then a close; a GET behind.
  ASSERT_TRUE(c.Send(chunked(Issued("evt_t1", "r_t1"), "X-RR-Event-Id: evt_other\r\n") +
                     chunked(Issued("evt_t2", "r_t2"), "Connection: close\r\n") +
                     "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(3), (std::vector<int>{200, 200, 200})) << c.received();
  EXPECT_EQ(c.received().find("Connection: close"), std::string::npos) << c.received();
  EXPECT_FALSE(c.closed());
  for (const char* id : {"r_t1", "r_t2"}) {
    EXPECT_TRUE(store_->Get("receipt", id).ok()) << id;
  }

  std::string many;
  for (int i = 0; i < 21; ++i) many += "X-T" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(AnswerAndClose(chunked(Issued("evt_t3", "r_t3"), many)), std::make_pair(431, true));
  std::string enough;
  for (int i = 0; i < 20; ++i) enough += "X-T" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(AnswerAndClose(chunked(Issued("evt_t4", "r_t4"), enough)).first, 200);
}

// RFC 9112 §3.2: an HTTP/1.1 request without Host, or with two, is 400 and
// closes; HTTP/1.0 needs none. §2.2: empty lines before the request line
// are ignored. RFC 9110 §10.1.1: an HTTP/1.0 request's Expect is ignored.
TEST_F(HttpServerTest, HostEmptyLinesAndHttp10Expectations) {
  StartServer();
  EXPECT_EQ(AnswerAndClose("GET /healthz HTTP/1.1\r\n\r\n"), std::make_pair(400, true));
  EXPECT_EQ(AnswerAndClose("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            std::make_pair(400, true));
  EXPECT_EQ(AnswerAndClose("GET /healthz HTTP/1.0\r\n\r\n").first, 200);

  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("\r\n\r\n\r"));
  ASSERT_TRUE(c.Send("\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{200}) << c.received();
  EXPECT_FALSE(c.closed());

  const std::string body = Issued("evt_h10", "r_h10");
  RawClient old(server_->port());
  ASSERT_TRUE(old.Send("POST /hooks HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n"));
  old.ReadUntil([](const std::string& r) { return !r.empty(); }, milliseconds(300));
  EXPECT_EQ(old.received(), "") << "no 100 Continue to an HTTP/1.0 client";
  ASSERT_TRUE(old.Send(body));
  EXPECT_EQ(old.ReadAnswers(1), std::vector<int>{200}) << old.received();

  // RFC 9112 §9.3: an HTTP/1.0 client that asked to keep the connection is
  // told it is kept (else it would wait for a close), and it is; one that
  // did not ask is told it closes.
  RawClient kept(server_->port());
  ASSERT_TRUE(kept.Send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_EQ(kept.ReadAnswers(1), std::vector<int>{200}) << kept.received();
  EXPECT_NE(kept.received().find("\r\nConnection: keep-alive\r\n"), std::string::npos)
      << kept.received();
  ASSERT_TRUE(kept.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(kept.ReadAnswers(2), (std::vector<int>{200, 200})) << kept.received();
  EXPECT_NE(kept.received().rfind("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_TRUE(kept.WaitForClose());
}

// RFC 9112 §2.3: a higher minor version of HTTP/1 is served as HTTP/1.1
// (kept alive, answered "HTTP/1.1"); another major version is 505 and
// close; a version that is not DIGIT "." DIGIT is malformed, 400.
TEST_F(HttpServerTest, HigherMinorVersionsAreServedAsHttp11AndOtherMajorsAre505) {
  StartServer();
  const std::string body = Issued("evt_v12", "r_v12");
  RawClient c(server_->port());
  ASSERT_TRUE(
      c.Send("GET /healthz HTTP/1.2\r\nHost: t\r\n\r\n"
             "POST /hooks HTTP/1.9\r\nHost: t\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body +
             "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(3), (std::vector<int>{200, 200, 200})) << c.received();
  EXPECT_NE(c.received().find("accepted"), std::string::npos) << c.received();
  EXPECT_EQ(c.received().rfind("HTTP/1.1 200", 0), 0u) << c.received();
  EXPECT_FALSE(c.closed());

  const std::pair<const char*, int> refused[] = {
      {"HTTP/2.0", 505},
      {"HTTP/0.9", 505},
      {"HTTP/3.1", 505},
      {"HTTP/1.10", 400},
      {"HTTP/1", 400},
      {"HTTP/1.x", 400},
      {"HTTQ/1.2", 400},
      // A bare LF ends the request line: the version a later line names is
      // not the request's.
      {"HTTP/1.2\nX: HTTP/1.2", 400},
  };
  for (const auto& [version, status] : refused) {
    EXPECT_EQ(AnswerAndClose(std::string("GET /healthz ") + version + "\r\nHost: t\r\n\r\n"),
              std::make_pair(status, true))
        << version;
  }
  RawClient m(server_->port());
  ASSERT_TRUE(m.Send("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"));
  m.ReadAnswers(1);
  EXPECT_NE(
      m.received().find("eventfold_http_refused_total{reason=\"http_version_not_supported\"} 3"),
      std::string::npos)
      << m.received();
}

// RFC 9112 §3.2: a Host that is not host[:port] is 400; a target is a path
// or an absolute URI, which a server must accept (§3.2.2) and which is
// served as its path; anything else, a fragment or a byte outside ASCII
// included, is 400. §6.1: Transfer-Encoding in an HTTP/1.0 request is
// faulty framing (400 and close, never read as chunked).
TEST_F(HttpServerTest, HostAndTargetFormsAndHttp10TransferEncoding) {
  StartServer();
  for (const char* host : {"a b", "x/y", "[::1", "u@x", "x:abc"}) {
    EXPECT_EQ(AnswerAndClose(std::string("GET /healthz HTTP/1.1\r\nHost: ") + host + "\r\n\r\n"),
              std::make_pair(400, true))
        << host;
  }
  for (const char* target : {"healthz", "/healthz#f", "/healthz\xff", "ftp://x/healthz"}) {
    EXPECT_EQ(AnswerAndClose(std::string("GET ") + target + " HTTP/1.1\r\nHost: t\r\n\r\n"),
              std::make_pair(400, true))
        << target;
  }
  const std::string body = Issued("evt_te10", "r_te10");
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  EXPECT_EQ(AnswerAndClose("POST /hooks HTTP/1.0\r\nConnection: keep-alive\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n" +
                           std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n"),
            std::make_pair(400, true));

  // Valid hosts, and absolute-form targets, on one kept-alive connection:
  // a delivery posted to an absolute URI is stored like any other.
  RawClient c(server_->port());
  ASSERT_TRUE(
      c.Send("GET /healthz HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"
             "GET /healthz HTTP/1.1\r\nHost: \r\n\r\n"
             "GET http://example.com/healthz HTTP/1.1\r\nHost: t\r\n\r\n"
             "GET HTTP://example.com:80/metrics?x=1 HTTP/1.1\r\nHost: t\r\n\r\n"
             "POST http://example.com/hooks HTTP/1.1\r\nHost: t\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body));
  EXPECT_EQ(c.ReadAnswers(5), (std::vector<int>{200, 200, 200, 200, 200})) << c.received();
  EXPECT_NE(c.received().find("eventfold_http_refused_total"), std::string::npos)
      << "/metrics with a query is /metrics";
  EXPECT_NE(c.received().find("accepted"), std::string::npos) << c.received();
  EXPECT_FALSE(c.closed());
}

TEST_F(HttpServerTest, BodyIsTheBodyWhateverTheContentType) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send(Post(Issued("evt_m1", "r3"), "multipart/form-data; boundary=x") +
                     Post(Issued("evt_m2", "r4"), "application/x-www-form-urlencoded")));
  EXPECT_EQ(c.ReadAnswers(2), (std::vector<int>{200, 200})) << c.received();
}

TEST_F(HttpServerTest, OversizedContentLengthIs413AndCloseWithoutReadingOrContinue) {
  StartServer();
  RawClient c(server_->port());
  // No body follows: the answer must come from the header alone.
  ASSERT_TRUE(
      c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
             "Content-Length: 1000000000\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{413});
  EXPECT_EQ(c.received().rfind("HTTP/1.1 413", 0), 0u) << "no 100 Continue first";
  EXPECT_TRUE(c.WaitForClose());
}

TEST_F(HttpServerTest, ExpectContinueWithinLimitGets100ThenTheAnswer) {
  StartServer();
  const std::string body = Issued("evt_e1", "r5");
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  c.ReadUntil([](const std::string& r) { return r.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(c.received(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send(body));
  c.ReadUntil([](const std::string& r) { return r.find("accepted") != std::string::npos; });
  EXPECT_NE(c.received().find("HTTP/1.1 200 OK"), std::string::npos) << c.received();
}

TEST_F(HttpServerTest, AmbiguousOrMalformedFramingIs400AndClose) {
  StartServer();
  const std::string head = "POST /hooks HTTP/1.1\r\nHost: t\r\n";
  const std::vector<std::string> requests = {
      head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
      head + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
      head + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
      head + "Content-Length: 2, 2\r\n\r\n{}",
      head + "Content-Length: abc\r\n\r\n",
      head + "Content-Length: 10abc\r\n\r\n",
      head + "Content-Length: -1\r\n\r\n",
      head + "Content-Length: 99999999999999999999999\r\n\r\n",
      head + "Transfer-Encoding: gzip\r\n\r\n",
      head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      head + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
      head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      "POST /hooks HTTP/1.1\nHost: t\r\n\r\n",
      "NOT A REQUEST\r\n\r\n",
  };
  for (const std::string& r : requests) {
    const auto [status, closed] = AnswerAndClose(r);
    EXPECT_EQ(status, 400) << r;
    EXPECT_TRUE(closed) << r;
  }
  std::string metrics;
  {
    RawClient c(server_->port());
    c.Send("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    c.ReadAnswers(1);
    metrics = c.received();
  }
  EXPECT_NE(metrics.find("eventfold_http_refused_total{reason=\"bad_framing\"} " +
                         std::to_string(requests.size())),
            std::string::npos)
      << metrics;
}

TEST_F(HttpServerTest, HeaderAndUrlLimits) {
  StartServer();
  std::string many = "POST /hooks HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 30; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(AnswerAndClose(many + "Content-Length: 0\r\n\r\n"), std::make_pair(431, true));
  EXPECT_EQ(AnswerAndClose("POST /hooks HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(5000, 'a') +
                           "\r\n\r\n"),
            std::make_pair(431, true));
  // The limit is the whole request line and header, to the byte, however
  // the bytes arrive: the largest that fits is served, one more is 431.
  const std::string line = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: ";
  const std::string fits = line + std::string(4096 - line.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), 4096u);
  EXPECT_EQ(AnswerAndClose(fits).first, 200);
  const std::string over = line + std::string(4096 - line.size() - 3, 'p') + "\r\n\r\n";
  EXPECT_EQ(AnswerAndClose(over), std::make_pair(431, true));
  // A target over max_url_bytes inside the header limit, and one past it.
  EXPECT_EQ(AnswerAndClose("GET /" + std::string(2000, 'u') + " HTTP/1.1\r\nHost: t\r\n\r\n"),
            std::make_pair(414, true));
  EXPECT_EQ(AnswerAndClose("GET /" + std::string(10000, 'u') + " HTTP/1.1\r\nHost: t\r\n\r\n"),
            std::make_pair(414, true));
}

TEST_F(HttpServerTest, OneHeaderLineWithoutNewlineIsBoundedWhileReading) {
  StartServer();
  RawClient c(server_->port());
  // Far more than the header limit, never a newline: refused once the limit
  // is passed, long before the client stops sending.
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nX: "));
  std::string filler(64 * 1024, 'a');
  c.Send(filler);
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{431});
  EXPECT_TRUE(c.WaitForClose());
}

TEST_F(HttpServerTest, AHeaderLongerThanOneReadIsReadWhole) {
  HttpServerOptions o = TestOptions();
  o.max_header_bytes = 16 * 1024;
  StartServer(o);
  // The server reads at most 4 KiB at a time, so the first read holds the
  // request line and part of the fields. The parser takes the line at once;
  // fed to it again with the rest, it read as a malformed field (400).
  const std::string body = Issued("evt_long", "r_long");
  const std::string pad(10000, 'p');
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nX-Pad: " + pad +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                     "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: " + pad + "\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(2), (std::vector<int>{200, 200}));
  EXPECT_TRUE(store_->Get("receipt", "r_long").ok());
  // Past the limit in pieces: still 431, not 414 (the request line ended).
  RawClient big(server_->port());
  ASSERT_TRUE(big.connected());
  big.Send("POST /hooks HTTP/1.1\r\nX: " + std::string(64 * 1024, 'a'));
  EXPECT_EQ(big.ReadAnswers(1), std::vector<int>{431});
  EXPECT_TRUE(big.WaitForClose());
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIs413WhileReading) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
  // Chunks of 1 KiB: the fifth passes the 4 KiB limit; the client would go on.
  for (int i = 0; i < 5; ++i) c.Send("400\r\n" + std::string(1024, 'x') + "\r\n");
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{413});
  EXPECT_TRUE(c.WaitForClose());
  // Its size is not known, only that it exceeds the limit: the answer and
  // the quarantine say no more.
  EXPECT_NE(c.received().find("body: exceeds the limit of 4096 bytes"), std::string::npos)
      << c.received();
  const std::vector<RefusedDelivery> kept = Quarantined(store_.get());
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].status, 413);
  EXPECT_EQ(kept[0].reason, "body: exceeds the limit of 4096 bytes");
}

TEST_F(HttpServerTest, AccessLogLinesNameOnlyTheirOwnRequest) {
  std::ostringstream log;
  HttpServerOptions o = TestOptions();
  o.access_log = &log;
  StartServer(o);
  RawClient c(server_->port());
  const std::string body = Issued("evt_log1", "r1");
  // A delivery naming its event id, then a request the HTTP layer refuses
  // before it has a body: its line must not carry the delivery's.
  ASSERT_TRUE(
      c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nX-RR-Event-Id: evt_log1\r\n"
             "Content-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body +
             "POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(2), (std::vector<int>{200, 400}));
  EXPECT_TRUE(c.WaitForClose());
  server_->Stop();  // every line written
  std::vector<std::string> lines;
  std::istringstream in(log.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << log.str();
  EXPECT_NE(lines[0].find(" POST /hooks 200 " + std::to_string(body.size()) + "B "),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find(" evt_log1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" 400 0B "), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("evt_log1"), std::string::npos) << lines[1];
}

// The event id a line names comes from the client's header, before any
// signature is checked: a space, tab or backslash in it is written \xNN, so
// an unauthenticated client cannot make fields of its own in the line.
TEST_F(HttpServerTest, AccessLogEscapesTheClientsEventId) {
  std::ostringstream log;
  HttpServerOptions o = TestOptions();
  o.access_log = &log;
  StartServer(o);
  RawClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nX-RR-Event-Id: evt_1 200 0B\tforged\\x\r\n"
             "Content-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{400});
  server_->Stop();  // every line written
  EXPECT_NE(log.str().find(" evt_1\\x20200\\x200B\\x09forged\\x5cx\n"), std::string::npos)
      << log.str();
}

TEST_F(HttpServerTest, SlowHeaderTimesOutWith408) {
  StartServer(Short());  // header_timeout 400 ms
  RawClient c(server_->port());
  const auto start = SteadyClock::now();
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHo"));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{408});
  EXPECT_TRUE(c.WaitForClose());
  EXPECT_LT(SteadyClock::now() - start, milliseconds(2500));
}

// The header clock starts with a request's first byte, not with the idle
// wait: a kept-alive connection that sends nothing after its answers gets
// no 408 at the header timeout, however its earlier requests arrived (whole,
// cut into pieces, two in one write), and is closed without an answer at the
// idle timeout.
TEST_F(HttpServerTest, AKeptAliveConnectionThatSendsNothingGetsNo408AndClosesWhenIdle) {
  HttpServerOptions o = Short();  // header_timeout 400 ms
  o.idle_timeout = milliseconds(5000);
  StartServer(o);
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  const std::string post = Post(Issued("evt_idle", "r_idle"));
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(std::make_unique<RawClient>(server_->port()));
  // Whole; a header cut mid-line; a body sent after its header; two in one write.
  ASSERT_TRUE(clients[0]->Send(get));
  ASSERT_TRUE(clients[1]->Send(get.substr(0, 7)));
  ASSERT_TRUE(clients[1]->Send(get.substr(7)));
  ASSERT_TRUE(clients[2]->Send(post.substr(0, post.find("\r\n\r\n") + 4)));
  ASSERT_TRUE(clients[2]->Send(post.substr(post.find("\r\n\r\n") + 4)));
  ASSERT_TRUE(clients[3]->Send(get + post));
  const std::vector<size_t> answers = {1, 1, 1, 2};
  for (size_t i = 0; i < clients.size(); ++i) {
    ASSERT_EQ(clients[i]->ReadAnswers(answers[i]), std::vector<int>(answers[i], 200))
        << "client " << i;
  }
  // Three header timeouts of silence: nothing arrives, nothing closes.
  const auto silent_until = SteadyClock::now() + milliseconds(1200);
  for (size_t i = 0; i < clients.size(); ++i) {
    const std::string before = clients[i]->received();
    const auto left = std::chrono::duration_cast<milliseconds>(silent_until - SteadyClock::now());
    clients[i]->ReadUntil([&](const std::string& r) { return r.size() > before.size(); },
                          std::max(left, milliseconds(1)));
    EXPECT_EQ(clients[i]->received(), before) << "client " << i;
    EXPECT_FALSE(clients[i]->closed()) << "client " << i;
  }
  // Still served; then closed at the idle timeout, with no answer.
  for (size_t i = 0; i < clients.size(); ++i) {
    ASSERT_TRUE(clients[i]->Send(get));
    EXPECT_EQ(clients[i]->ReadAnswers(answers[i] + 1), std::vector<int>(answers[i] + 1, 200))
        << "client " << i;
  }
  const std::string before = clients[0]->received();
  EXPECT_TRUE(clients[0]->WaitForClose(milliseconds(10000)));
  EXPECT_EQ(clients[0]->received(), before);
}

// A connection that never sends a byte holds its place under the
// connection cap no longer than a header may take: it is closed, with no
// answer (it asked nothing), at the header timeout, not the idle timeout.
TEST_F(HttpServerTest, AConnectionThatNeverSendsIsClosedAtTheHeaderTimeout) {
  HttpServerOptions o = Short();  // header_timeout 400 ms
  o.idle_timeout = milliseconds(60000);
  StartServer(o);
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  EXPECT_TRUE(c.WaitForClose(milliseconds(20000)));
  EXPECT_EQ(c.received(), "");
}

TEST_F(HttpServerTest, SlowBodyIs408) {
  StartServer(Short());  // body_grace 400 ms
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"a\""));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{408});
  EXPECT_TRUE(c.WaitForClose());
}

// Slowloris with a head start: bytes sent at once buy no time later. Each
// body_grace window must bring the minimum rate; on the body's average,
// 3,500 bytes sent at once would have paid for 3.5 s of trickling.
TEST_F(HttpServerTest, ABodyMustKeepItsRateInEveryWindowNotJustOnAverage) {
  HttpServerOptions o = Short();  // body_grace 400 ms
  o.min_body_bytes_per_second = 1000;
  StartServer(o);
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: 4000\r\n\r\n" +
                     std::string(3500, ' ')));
  int trickled = 0;
  const auto answered = [](const std::string& r) { return !r.empty(); };
  while (trickled < 60 && c.received().empty() && !c.closed()) {
    ASSERT_TRUE(c.Send(" "));
    ++trickled;
    c.ReadUntil(answered, milliseconds(100));  // one byte every 100 ms at most
  }
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{408}) << c.received();
  EXPECT_LT(trickled, 25) << "cut in its second or third window, not after 3.5 s";
  EXPECT_TRUE(c.WaitForClose());
}

// The bodies of all connections together are bounded while they are read,
// and what counts is what came: a body's buffer, charged before it grows
// (doubling, never past its declared length). A declared length costs
// nothing until its bytes arrive, so connections that declare bodies and
// send none (64 of them refused every sender while a declaration counted
// whole) hold nothing from anyone. A request whose body does not fit is
// answered 503 (Retry-After, close); a body's memory is given back once its
// request is answered.
TEST_F(HttpServerTest, BodiesOfAllConnectionsTogetherAreBoundedWhileRead) {
  HttpServerOptions o = TestOptions();  // max_body_bytes 4096
  o.max_body_memory = 10000;
  o.body_grace = std::chrono::seconds(60);  // the unfinished bodies wait
  o.min_body_bytes_per_second = 0;
  StartServer(o);
  const auto header = [](size_t length) {
    return "POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(length) +
           "\r\n\r\n";
  };
  const auto held = [&](size_t bytes) { return MemoryHeld("body", bytes); };
  // Declarations with no body: nothing held, whatever they declare.
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(idle.back()->Send(header(4000)));
  }
  // Two bodies part sent: 3,500 bytes each held, 7,000 of 10,000.
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Send(header(4000) + std::string(3500, ' ')));
  ASSERT_TRUE(b.Send(header(4000) + std::string(3500, ' ')));
  ASSERT_TRUE(held(7000)) << server_->MetricsText();
  // A small body still fits beside them all (answered: it is not JSON).
  RawClient small(server_->port());
  ASSERT_TRUE(small.Send(header(100) + std::string(100, ' ')));
  EXPECT_EQ(small.ReadAnswers(1), std::vector<int>{400}) << small.received();

  // 4,000 more do not fit: 503 with Retry-After, and a close.
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send(header(4000) + std::string(4000, ' ')));
  EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{503}) << c.received();
  EXPECT_NE(c.received().find("Retry-After: 1"), std::string::npos) << c.received();
  EXPECT_TRUE(c.WaitForClose());

  // A chunked body passes the 3,000 bytes left as it doubles (1,000, 2,000,
  // then 4,000 for its third chunk).
  RawClient d(server_->port());
  const std::string chunk = "3e8\r\n" + std::string(1000, ' ') + "\r\n";
  ASSERT_TRUE(d.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunk + chunk + chunk));
  EXPECT_EQ(d.ReadAnswers(1), std::vector<int>{503}) << d.received();
  EXPECT_TRUE(d.WaitForClose());

  // a's body ends and is answered, and a's next request read, so its 3,500
  // bytes are free: room for one more whole body.
  ASSERT_TRUE(a.Send(std::string(500, ' ') + "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(a.ReadAnswers(2), (std::vector<int>{400, 200})) << a.received();
  ASSERT_TRUE(held(3500)) << server_->MetricsText();
  RawClient e(server_->port());
  ASSERT_TRUE(e.Send(header(4000) + std::string(4000, ' ')));
  EXPECT_EQ(e.ReadAnswers(1), std::vector<int>{400}) << e.received();

  RawClient m(server_->port());
  m.Send("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  m.ReadAnswers(1);
  EXPECT_NE(m.received().find("eventfold_http_refused_total{reason=\"body_memory_full\"} 2"),
            std::string::npos)
      << m.received();
}

// Headers past their first 4 KiB hold a share of the budget for all
// connections' headers (2 * 16 KiB + 8 KiB each here, room for two) while
// they are read: a third connection whose header outgrows 4 KiB is answered
// 503 with Retry-After and closed; a share comes back when its connection
// closes or is between requests. Small headers count for nothing.
TEST_F(HttpServerTest, LargeHeadersOfAllConnectionsTogetherAreBoundedWhileRead) {
  HttpServerOptions o = TestOptions();
  o.max_header_bytes = 16 * 1024;
  const size_t share = 2 * o.max_header_bytes + 8 * 1024;
  o.max_header_memory = 2 * share;
  o.header_timeout = std::chrono::seconds(60);  // the unfinished headers wait
  HttpServerOptions too_small = o;
  too_small.max_header_memory = share - 1;
  EXPECT_TRUE(HttpServer::ValidateOptions(too_small).IsInvalidArgument());
  StartServer(o);
  const auto held = [&](size_t bytes) { return MemoryHeld("header", bytes); };
  const std::string big_start =
      "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: " + std::string(5000, 'p');
  RawClient small(server_->port());
  ASSERT_TRUE(small.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n"));  // unfinished, small
  {
    RawClient a(server_->port()), b(server_->port());
    ASSERT_TRUE(a.Send(big_start));
    ASSERT_TRUE(b.Send(big_start));
    ASSERT_TRUE(held(2 * share)) << server_->MetricsText();

    RawClient c(server_->port());
    ASSERT_TRUE(c.Send(big_start));
    EXPECT_EQ(c.ReadAnswers(1), std::vector<int>{503}) << c.received();
    EXPECT_NE(c.received().find("Retry-After: 1"), std::string::npos) << c.received();
    EXPECT_TRUE(c.WaitForClose());

    // b's header ends and is answered: between requests it holds nothing.
    ASSERT_TRUE(b.Send("\r\n\r\n"));
    EXPECT_EQ(b.ReadAnswers(1), std::vector<int>{200}) << b.received();
    ASSERT_TRUE(held(share)) << server_->MetricsText();
  }  // a hangs up
  ASSERT_TRUE(held(0)) << server_->MetricsText();
  RawClient d(server_->port());
  ASSERT_TRUE(d.Send(big_start + "\r\n\r\n"));
  EXPECT_EQ(d.ReadAnswers(1), std::vector<int>{200}) << d.received();
  ASSERT_TRUE(small.Send("\r\n"));
  EXPECT_EQ(small.ReadAnswers(1), std::vector<int>{200}) << small.received();
  EXPECT_TRUE(held(0)) << server_->MetricsText();

  // A big header pipelined behind a body arrives with it, whole, and needs
  // no read of its own: it takes its share all the same.
  RawClient e(server_->port()), f(server_->port());
  ASSERT_TRUE(e.Send(big_start));
  ASSERT_TRUE(f.Send(big_start));
  ASSERT_TRUE(held(2 * share)) << server_->MetricsText();
  RawClient g(server_->port());
  ASSERT_TRUE(g.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}" + big_start +
                     "\r\n\r\n"));
  EXPECT_EQ(g.ReadAnswers(2), (std::vector<int>{400, 503})) << g.received();
  EXPECT_TRUE(g.WaitForClose());
  EXPECT_NE(server_->MetricsText().find(
                "eventfold_http_refused_total{reason=\"header_memory_full\"} 2\n"),
            std::string::npos)
      << server_->MetricsText();
}

TEST_F(HttpServerTest, ConnectionsOverTheCapGet503AndAClose) {
  HttpServerOptions o = TestOptions();
  o.max_connections = 2;
  StartServer(o);
  RawClient a(server_->port()), b(server_->port());
  // Both held: each has been answered once.
  a.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  b.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_EQ(a.ReadAnswers(1), std::vector<int>{200});
  ASSERT_EQ(b.ReadAnswers(1), std::vector<int>{200});
  RawClient over(server_->port());
  EXPECT_EQ(over.ReadAnswers(1), std::vector<int>{503});
  EXPECT_TRUE(over.WaitForClose());
  EXPECT_NE(over.received().find("Connection: close"), std::string::npos);
}

// No room in the workers' queue (a queue of 0 refuses every request): the
// HTTP layer answers 503 itself, with Retry-After, and keeps the connection.
// The answer's bytes are asserted whole: the server writes its heads by hand,
// and this one is the only answer with a Retry-After field.
TEST_F(HttpServerTest, FullWorkerQueueIs503WithRetryAfterAndKeepsTheConnection) {
  HttpServerOptions o = TestOptions();
  o.worker_queue = 0;
  StartServer(o);
  const std::string body = "{\"status\":\"overloaded\",\"error\":\"all workers busy, retry\"}";
  const std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  // A GET needs a worker (the receiver may read the store for it).
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_EQ(c.ReadAnswers(1), std::vector<int>{503});
  ASSERT_TRUE(c.Send("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_EQ(c.ReadAnswers(2), (std::vector<int>{503, 503}));
  EXPECT_EQ(c.received(), answer + answer);
  EXPECT_FALSE(c.WaitForClose(milliseconds(200)));
  // A request that asks for a close gets it, 503 or not (RFC 9112 §9.6).
  RawClient closing(server_->port());
  ASSERT_TRUE(closing.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  ASSERT_EQ(closing.ReadAnswers(1), std::vector<int>{503});
  EXPECT_NE(closing.received().find("Connection: close"), std::string::npos);
  EXPECT_TRUE(closing.WaitForClose());
}

TEST_F(HttpServerTest, DeliveriesTheReceiverTakesOnTheLoopNeedNoWorker) {
  // No worker can take anything: what the receiver does on the event loop's
  // thread (a delivery for the store, one the store then refuses, a forged
  // signature, a compressed body or a declared size it refuses and
  // quarantines itself, a GET's declared size it refuses without a
  // quarantine) is still answered; what needs a worker gets the 503.
  const std::string secret = "loop_test_secret_0123456789";
  ReceiverOptions ro;
  ro.secrets = {secret};
  ro.max_body_bytes = kMaxBody;
  Result<std::unique_ptr<Receiver>> signed_rx = Receiver::Make(store_.get(), ro);
  ASSERT_TRUE(signed_rx.ok()) << signed_rx.status().ToString();
  rx_ = std::move(*signed_rx);
  HttpServerOptions o = TestOptions();
  o.worker_queue = 0;
  StartServer(o);
  const auto post = [](const std::string& key, const std::string& body) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    return "POST /hooks HTTP/1.1\r\nHost: t\r\nX-RR-Signature: " + SignRr(key, now, body) +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(post(secret, Issued("evt_l1", "r1")) +
                     post("not_the_secret_0000000000", Issued("evt_l2", "r2")) +
                     post(secret, "{not json") + post(secret, Issued("evt_l1", "r1")) +
                     "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(c.ReadAnswers(5), (std::vector<int>{200, 401, 400, 200, 503}));
  // A body declared over the limit: 413 from the header, quarantined there.
  RawClient oversized(server_->port());
  ASSERT_TRUE(oversized.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n"));
  EXPECT_EQ(oversized.ReadAnswers(1), std::vector<int>{413});
  EXPECT_NE(oversized.received().find("body: 1000000 bytes exceeds the limit"), std::string::npos)
      << oversized.received();
  // The same declared size on a GET: 413 and close, but no delivery, so
  // nothing quarantined.
  RawClient get_oversized(server_->port());
  ASSERT_TRUE(
      get_oversized.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n"));
  EXPECT_EQ(get_oversized.ReadAnswers(1), std::vector<int>{413});
  EXPECT_TRUE(get_oversized.WaitForClose());
  // A signed, compressed body: 400 naming Content-Encoding, quarantined.
  RawClient gzipped(server_->port());
  const std::string gz_body = Issued("evt_l3", "r3");
  std::string gz = post(secret, gz_body);
  gz.insert(gz.find("Content-Length:"), "Content-Encoding: gzip\r\n");
  ASSERT_TRUE(gzipped.Send(gz));
  EXPECT_EQ(gzipped.ReadAnswers(1), std::vector<int>{400});
  EXPECT_NE(gzipped.received().find("Content-Encoding"), std::string::npos) << gzipped.received();
  EXPECT_NE(c.received().find("\"status\":\"duplicate\""), std::string::npos);
  EXPECT_TRUE(store_->Get("receipt", "r1").ok());
  EXPECT_FALSE(store_->Get("receipt", "r2").ok());
  EXPECT_EQ(store_->counters().accepted, 1u);
  std::vector<int> refused;
  for (const RefusedDelivery& r : Quarantined(store_.get())) refused.push_back(r.status);
  std::sort(refused.begin(), refused.end());
  EXPECT_EQ(refused, (std::vector<int>{400, 400, 401, 413}));
  EXPECT_FALSE(c.WaitForClose(milliseconds(200)));
}

// Keeps every answer until told, as a read API keeps a parked long-poll's.
class ParkingReceiver final : public Receiver {
 public:
  HttpResponse Handle(std::string_view, std::string_view, const Headers&,
                      std::string_view) override {
    return HttpResponse{200, "text/plain", "now\n"};
  }
  void HandleAsync(std::string_view, std::string_view, Headers, std::string,
                   AnswerCallback done) override {
    std::lock_guard lock(mu_);
    parked_.push_back(std::move(done));
    cv_.notify_all();
  }
  HttpResponse RefuseOversized(std::string_view, std::string_view, const Headers&,
                               uint64_t) override {
    return HttpResponse{413, "text/plain", "too large\n"};
  }
  HttpResponse RefuseOverloaded(std::string_view) override {
    return HttpResponse{503, "text/plain", "busy\n"};
  }
  std::string MetricsText() override { return ""; }

  // Waits (bounded) until `n` answers are parked.
  bool WaitForParked(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return parked_.size() >= n; });
  }
  void AnswerAll() {
    std::vector<AnswerCallback> parked;
    {
      std::lock_guard lock(mu_);
      parked.swap(parked_);
    }
    for (AnswerCallback& done : parked) done(HttpResponse{200, "text/plain", "later\n"});
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<AnswerCallback> parked_;
};

// With close_on_hang_up, a client that hangs up while its answer is parked
// has its connection closed at once (counted), and the answer, when it
// comes, goes nowhere; a client still there gets its answer. Without it,
// nothing is counted.
TEST_F(HttpServerTest, AClientThatHangsUpWhileItsAnswerIsParkedIsClosedAtOnce) {
  for (const bool watch : {true, false}) {
    SCOPED_TRACE(watch ? "close_on_hang_up" : "default");
    ParkingReceiver parking;
    HttpServerOptions o = TestOptions();
    o.close_on_hang_up = watch;
    HttpServer server(&parking, o);
    ASSERT_TRUE(server.Start().ok());
    RawClient stays(server.port());
    ASSERT_TRUE(stays.Send("GET /feed HTTP/1.1\r\nHost: t\r\n\r\n"));
    {
      RawClient leaves(server.port());
      ASSERT_TRUE(leaves.Send("GET /feed HTTP/1.1\r\nHost: t\r\n\r\n"));
      ASSERT_TRUE(parking.WaitForParked(2));
    }  // hangs up
    const std::string counted = "eventfold_http_hung_up_total 1\n";
    if (watch) {
      // Bounded: the close is an event on the server's loop, not a timer.
      const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
      while (server.MetricsText().find(counted) == std::string::npos &&
             SteadyClock::now() < deadline) {
        std::this_thread::yield();
      }
      EXPECT_NE(server.MetricsText().find(counted), std::string::npos) << server.MetricsText();
    }
    parking.AnswerAll();
    EXPECT_EQ(stays.ReadAnswers(1), std::vector<int>{200});
    EXPECT_NE(stays.received().find("later"), std::string::npos) << stays.received();
    EXPECT_FALSE(stays.WaitForClose(milliseconds(200))) << "kept alive";
    if (!watch) {
      EXPECT_EQ(server.MetricsText().find("hung_up"), std::string::npos) << server.MetricsText();
    }
    server.Stop();
  }
}

TEST_F(HttpServerTest, StopClosesIdleKeepAliveAtOnceAndFinishesBodiesInFlight) {
  HttpServerOptions o = TestOptions();  // idle_timeout 30 s
  o.drain_timeout = milliseconds(10000);
  StartServer(o);
  RawClient idle(server_->port());
  idle.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_EQ(idle.ReadAnswers(1), std::vector<int>{200});
  // A request whose body is still on its way when Stop() begins.
  const std::string body = Issued("evt_s1", "r9");
  RawClient busy(server_->port());
  busy.Send("POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n\r\n" + body.substr(0, 5));
  busy.ReadUntil([](const std::string&) { return false; }, milliseconds(100));
  const auto start = SteadyClock::now();
  std::thread stopper([&] { server_->Stop(); });
  // At once: long before the idle timeout, and before the busy request ends.
  EXPECT_TRUE(idle.WaitForClose(milliseconds(5000)));
  busy.Send(body.substr(5));
  EXPECT_EQ(busy.ReadAnswers(1), std::vector<int>{200});
  EXPECT_NE(busy.received().find("Connection: close"), std::string::npos);
  stopper.join();
  // Once the request in flight is answered, not at the drain timeout.
  EXPECT_LT(SteadyClock::now() - start, milliseconds(9000));
  // Stopped: nobody accepts any more.
  RawClient after(server_->port());
  EXPECT_FALSE(after.connected() && after.Send("GET /healthz HTTP/1.1\r\n\r\n") &&
               !after.ReadAnswers(1).empty());
}

}  // namespace
}  // namespace eventfold
