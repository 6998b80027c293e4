// The simulated sender's threads (tools/sender.h) against an HTTP server
// that counts what arrives: paced sends keep their schedule, every
// delivery is sent until it is settled, a lost answer is sent again, and the
// run ends (no thread waits for a wake-up that never comes).

#include "tools/sender.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/http_server.h"
#include "eventfold/receiver.h"

namespace eventfold::sim {
namespace {

// Answers every POST 200 and counts each body. The project's own HTTP
// server, so that its threads are instrumented under ThreadSanitizer.
class CountingReceiver final : public Receiver {
 public:
  HttpResponse Handle(std::string_view, std::string_view, const Headers&,
                      std::string_view body) override {
    std::lock_guard lock(mu_);
    ++seen_[std::string(body)];
    return HttpResponse{200, "application/json", "{}"};
  }
  HttpResponse RefuseOversized(std::string_view, std::string_view, const Headers&,
                               uint64_t) override {
    return HttpResponse{413, "application/json", "{}"};
  }
  HttpResponse RefuseOverloaded(std::string_view) override {
    return HttpResponse{429, "application/json", "{}"};
  }
  std::string MetricsText() override { return ""; }

  std::map<std::string, int> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> seen_;
};

TEST(SenderThreads, PacedSendSettlesEveryDeliveryOnScheduleAndResendsLostAnswers) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  CountingReceiver receiver;
  HttpServer server(&receiver, HttpServerOptions{});
  ASSERT_TRUE(server.Start().ok());

  constexpr int kDeliveries = 300;
  constexpr double kRate = 1500;  // per second
  std::vector<Outgoing> outgoing(kDeliveries);
  int lost = 0;
  for (int i = 0; i < kDeliveries; ++i) {
    outgoing[i].delivery.body = "{\"n\":" + std::to_string(i) + "}";
    outgoing[i].lose_first_ack = rng() % 4 == 0;
    lost += outgoing[i].lose_first_ack ? 1 : 0;
  }
  SenderOptions o;
  o.port = server.port();
  o.path = "/hook";
  o.secret = "sender-test-secret";
  o.connections = static_cast<int>(2 + rng() % 15);
  o.rate_per_second = kRate;
  o.backoff_seconds = {0.005};  // one retry, 5 ms after a lost answer
  o.time_scale = 1;
  o.seed = seed;
  SCOPED_TRACE("connections " + std::to_string(o.connections));

  const SendReport r = Send(outgoing, o);

  EXPECT_EQ(r.delivered, static_cast<uint64_t>(kDeliveries));
  EXPECT_EQ(r.dead_letters, 0u);
  EXPECT_EQ(r.lost_acks, static_cast<uint64_t>(lost));
  EXPECT_EQ(r.retries, static_cast<uint64_t>(lost));
  EXPECT_EQ(r.attempts, static_cast<uint64_t>(kDeliveries + lost));
  server.Stop();
  const std::map<std::string, int> seen = receiver.seen();
  ASSERT_EQ(seen.size(), outgoing.size());
  for (const Outgoing& out : outgoing) {
    auto it = seen.find(out.delivery.body);
    ASSERT_NE(it, seen.end()) << out.delivery.body;
    EXPECT_EQ(it->second, out.lose_first_ack ? 2 : 1) << out.delivery.body;
  }
  // The last first attempt is due (n - 1) / rate after the start: a pacer
  // that sends early would finish sooner. (Later is no failure: a busy
  // machine may run behind.)
  EXPECT_GE(r.seconds, (kDeliveries - 1) / kRate);
}

}  // namespace
}  // namespace eventfold::sim
