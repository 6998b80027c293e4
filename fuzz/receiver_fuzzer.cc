// The whole Receiver path (include/eventfold/receiver.h) on a store in
// memory: any request is answered with one of the statuses of docs/SPEC.md §3 and a
// JSON body, never a crash. The input is "METHOD PATH", header lines, an
// empty line and the body; a request without a signature header is signed
// with X-RR-Signature, so mutated bodies reach decoding and ingest.

#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>

#include "core/signature.h"
#include "eventfold/clock.h"
#include "eventfold/options.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "fuzz/fuzz_input.h"

namespace {

constexpr char kSecret[] = "fuzz-rr-secret-0123456789";
constexpr int64_t kNowSeconds = 1795000000;
// A fresh store every so many requests keeps a long run's memory bounded.
constexpr int kRequestsPerStore = 5000;

struct Harness {
  eventfold::ManualClock clock{kNowSeconds * 1000000};
  std::unique_ptr<leveldb::Env> env;
  std::unique_ptr<eventfold::Store> store;
  std::unique_ptr<eventfold::Receiver> receiver;
  int requests = 0;

  void Reset() {
    receiver.reset();
    store.reset();
    env.reset(leveldb::NewMemEnv(leveldb::Env::Default()));
    eventfold::Options options;
    options.env = env.get();
    options.clock = &clock;
    options.max_body_bytes = 64 << 10;
    store = eventfold::Store::Open("/fuzz-store", options).value();
    eventfold::ReceiverOptions receiver_options;
    receiver_options.secrets = {kSecret};
    receiver_options.clock = &clock;
    receiver_options.max_body_bytes = options.max_body_bytes;
    receiver = eventfold::Receiver::Make(store.get(), receiver_options).value();
    requests = 0;
  }
};

bool IsSpecStatus(int status) {
  constexpr int kStatuses[] = {200, 400, 401, 404, 405, 409, 413, 429, 503};
  return std::find(std::begin(kStatuses), std::end(kStatuses), status) != std::end(kStatuses);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* harness = new Harness();
  if (harness->store == nullptr || ++harness->requests > kRequestsPerStore) {
    harness->Reset();
  }
  auto request = eventfold::fuzz::ParseRequest(data, size, true);
  const std::string_view line = request.first_line;
  const size_t space = line.find(' ');
  const std::string_view method = line.substr(0, space);
  const std::string_view path =
      space == std::string_view::npos ? std::string_view("/") : line.substr(space + 1);
  if (!eventfold::FindHeader(request.headers, "X-RR-Signature") &&
      !eventfold::FindHeader(request.headers, "webhook-signature")) {
    request.headers.emplace_back("X-RR-Signature",
                                 eventfold::SignRr(kSecret, kNowSeconds, request.body));
  }
  const auto response = harness->receiver->Handle(method, path, request.headers, request.body);
  if (!IsSpecStatus(response.status) || response.body.empty()) __builtin_trap();
  return 0;
}
