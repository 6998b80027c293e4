#include "eventfold/receiver.h"

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "core/field_values.h"
#include "core/json_writer.h"
#include "core/signature.h"
#include "receiver/ingest_batcher.h"

namespace eventfold {
namespace {

// Upper bounds (seconds) of the acknowledgement latency histogram.
constexpr std::array<double, 14> kLatencyBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                    0.1,    0.25,  0.5,    1,     2.5,  5,     10};

constexpr size_t kOutcomes = kOutcomeCount;

HttpResponse Json(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body)};
}

HttpResponse Answer(const IngestResult& r) {
  HttpResponse answer = Json(r.http_status(), r.ResponseBody());
  answer.event_id = r.event_id;
  return answer;
}

// A Store as a sink: what one node does. Asynchronous deliveries are stored
// in groups by a batcher, started when the first one comes.
class StoreSink final : public IngestSink {
 public:
  StoreSink(Store* store, size_t threads, size_t max_batch)
      : store_(store), threads_(threads), max_batch_(max_batch) {}
  IngestResult Ingest(const Delivery& delivery) override { return store_->Ingest(delivery); }
  void IngestAsync(Delivery delivery, IngestCallback done) override {
    std::call_once(started_, [this] {
      batcher_ = std::make_unique<receiver::IngestBatcher>(store_, threads_, max_batch_);
    });
    batcher_->Submit(std::move(delivery), std::move(done));
  }
  // Submit() holds the batcher's queue lock only to push, and the batchers
  // hold it only to take a group, never across a write. (The first call
  // starts the batcher's threads.) A store's quarantine only trims and
  // queues a refusal for a writer thread of its own (or drops it, counted).
  bool NeverBlocks() const override { return true; }
  Status Quarantine(RefusedDelivery refused) override {
    return store_->quarantine().Add(std::move(refused));
  }
  uint64_t ApproximateBytes() override { return store_->maintenance().ApproximateBytes(); }
  uint64_t MemoryBytes() override { return store_->Stats().key_filter_bytes; }
  Counters counters() override { return store_->counters(); }

 private:
  Store* store_;
  const size_t threads_;
  const size_t max_batch_;
  std::once_flag started_;
  std::unique_ptr<receiver::IngestBatcher> batcher_;  // set once, under started_
};

class ReceiverImpl final : public Receiver {
 public:
  ReceiverImpl(IngestSink* sink, std::unique_ptr<IngestSink> owned, const ReceiverOptions& options,
               std::optional<SignatureVerifier> verifier)
      : owned_(std::move(owned)),
        sink_(sink),
        options_(options),
        clock_(options.clock ? options.clock : SystemClock()),
        verifier_(std::move(verifier)) {}

  // The owned sink's batcher runs its last callbacks while it is destroyed;
  // they count into this receiver, so it goes first.
  ~ReceiverImpl() override { owned_.reset(); }

  HttpResponse Handle(std::string_view method, std::string_view path, const Headers& headers,
                      std::string_view body) override {
    if (method == "GET" || method == "HEAD") {
      if (path == "/healthz") return Json(200, R"({"status":"ok"})");
      if (path == "/metrics") return HttpResponse{200, "text/plain; version=0.0.4", MetricsText()};
      return Json(404, R"({"status":"not_found","error":"GET serves /healthz and /metrics"})");
    }
    if (method != "POST") {
      HttpResponse r =
          Json(405, R"({"status":"method_not_allowed","error":"deliveries are POSTed"})");
      r.headers.emplace_back("Allow", "POST, GET, HEAD");
      return r;
    }
    const auto start = std::chrono::steady_clock::now();
    std::optional<IngestResult> r = Admit(headers, body);
    if (!r) {
      r = sink_->Ingest(Delivery{headers, std::string(body)});
      in_flight_.fetch_sub(1);
    }
    Record(r->outcome, SecondsSince(start));
    return Answer(*r);
  }

  void HandleAsync(std::string_view method, std::string_view path, Headers headers,
                   std::string body, AnswerCallback done) override {
    if (method != "POST") return done(Handle(method, path, headers, body));
    const auto start = std::chrono::steady_clock::now();
    if (std::optional<IngestResult> refused = Admit(headers, body)) {
      Record(refused->outcome, SecondsSince(start));
      return done(Answer(*refused));
    }
    ToSink(start, std::move(headers), std::move(body), std::move(done));
  }

  // HandleAsync() itself for a POST, when the sink never blocks: then
  // every step of it - the checks, the quarantine of a refusal, the
  // hand-off to the sink - is work an event loop's thread may do.
  bool TryHandleWithoutBlocking(std::string_view method, std::string_view path, Headers& headers,
                                std::string& body, AnswerCallback& done) override {
    if (method != "POST" || !sink_->NeverBlocks() || body.size() > kLoopBodyBytes) return false;
    HandleAsync(method, path, std::move(headers), std::move(body), std::exchange(done, nullptr));
    return true;
  }

  // Its only wait could be the sink's quarantine.
  bool RefusesOversizedWithoutBlocking() const override { return sink_->NeverBlocks(); }

  HttpResponse RefuseOversized(std::string_view method, std::string_view /*path*/,
                               const Headers& headers, uint64_t body_bytes) override {
    IngestResult r = TooLarge(body_bytes);
    // A GET of /healthz with a body declared too large is no delivery:
    // quarantining it would let any client fill the quarantine with what
    // was never a webhook.
    if (method != "POST") return Json(413, r.ResponseBody());
    Keep(r, headers, {}, body_bytes);
    Record(r.outcome, 0);
    return Answer(r);
  }

  HttpResponse RefuseOverloaded(std::string_view why) override {
    IngestResult r = Overloaded(why);
    Record(r.outcome, 0);
    return Answer(r);
  }

  std::string MetricsText() override {
    std::string out;
    out += "# HELP eventfold_deliveries_total Deliveries answered, by outcome and status.\n";
    out += "# TYPE eventfold_deliveries_total counter\n";
    for (size_t i = 0; i < kOutcomes; ++i) {
      const auto o = static_cast<Outcome>(i);
      out += "eventfold_deliveries_total{outcome=\"" + std::string(OutcomeName(o)) +
             "\",status=\"" + std::to_string(HttpStatus(o)) + "\"} " +
             std::to_string(outcomes_[i].load()) + "\n";
    }
    out += "# HELP eventfold_ack_latency_seconds Time from request to answer for POSTs.\n";
    out += "# TYPE eventfold_ack_latency_seconds histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
      cumulative += buckets_[i].load();
      out += "eventfold_ack_latency_seconds_bucket{le=\"" + Format(kLatencyBuckets[i]) + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    cumulative += buckets_[kLatencyBuckets.size()].load();
    out += "eventfold_ack_latency_seconds_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    out += "eventfold_ack_latency_seconds_sum " +
           Format(static_cast<double>(latency_sum_ns_.load()) / 1e9) + "\n";
    out += "eventfold_ack_latency_seconds_count " + std::to_string(cumulative) + "\n";
    out += "# HELP eventfold_in_flight Deliveries being verified and stored now.\n";
    out += "# TYPE eventfold_in_flight gauge\n";
    out += "eventfold_in_flight " + std::to_string(in_flight_.load()) + "\n";
    const Counters c = sink_->counters();
    out +=
        "# HELP eventfold_quarantine_dropped_total Refused deliveries not kept (rate, size, "
        "failed write).\n";
    out += "# TYPE eventfold_quarantine_dropped_total counter\n";
    out += "eventfold_quarantine_dropped_total " + std::to_string(c.quarantine_dropped) + "\n";
    out +=
        "# HELP eventfold_quarantine_headers_dropped_total Headers of refused deliveries not "
        "kept.\n";
    out += "# TYPE eventfold_quarantine_headers_dropped_total counter\n";
    out += "eventfold_quarantine_headers_dropped_total " +
           std::to_string(c.quarantine_headers_dropped) + "\n";
    out +=
        "# HELP eventfold_unrouted_total Accepted events no entity of the profile routes "
        "(stored, in no projection; `eventfold unrouted` lists them).\n";
    out += "# TYPE eventfold_unrouted_total counter\n";
    out += "eventfold_unrouted_total " + std::to_string(c.unrouted) + "\n";
    out += "# HELP eventfold_store_bytes Approximate size of the store on disk.\n";
    out += "# TYPE eventfold_store_bytes gauge\n";
    out += "eventfold_store_bytes " + std::to_string(sink_->ApproximateBytes()) + "\n";
    out +=
        "# HELP eventfold_store_memory_bytes Memory the store holds that grows with what it "
        "stores (its filters of stored keys).\n";
    out += "# TYPE eventfold_store_memory_bytes gauge\n";
    out += "eventfold_store_memory_bytes " + std::to_string(sink_->MemoryBytes()) + "\n";
    return out;
  }

 private:
  static std::string Format(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
  }

  static double SecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // A body verified on an event loop's thread is at most this long, so one
  // large delivery cannot hold up the loop's other connections for long
  // (SHA-256 runs at about 1.6 GB/s on the bench's host: 64 KiB takes
  // about 40 microseconds).
  static constexpr size_t kLoopBodyBytes = 64 * 1024;

  // The receiver's own checks of a POST: size (413), admission (429),
  // signature (401) and a compressed body (400). Returns the refusal
  // (quarantined unless it is 429), or nullopt when the delivery goes on to
  // the sink; it then counts in in_flight_ until its outcome is known.
  std::optional<IngestResult> Admit(const Headers& headers, std::string_view body) {
    if (body.size() > options_.max_body_bytes) {
      IngestResult r = TooLarge(body.size());
      Keep(r, headers, body, body.size());
      return r;
    }
    if (std::optional<IngestResult> refused = TakeInFlightSlot()) return refused;
    if (Status st = VerifySignature(headers, body); !st.ok()) {
      IngestResult r;
      r.outcome = Outcome::kUnauthorized;
      r.message = st.message();
      Keep(r, headers, body, body.size());
      in_flight_.fetch_sub(1);
      return r;
    }
    if (std::optional<std::string> coding = UnsupportedCoding(headers)) {
      IngestResult r;
      r.outcome = Outcome::kInvalid;
      r.message = "Content-Encoding: \"" + *coding +
                  "\" is not supported; the body must be sent uncompressed";
      Keep(r, headers, body, body.size());
      in_flight_.fetch_sub(1);
      return r;
    }
    return std::nullopt;
  }

  // The Content-Encoding of a delivery whose body was compressed (gzip,
  // br, a list naming one...), or nullopt. The receiver decompresses
  // nothing: the sender is told so by name, instead of a "body: not JSON"
  // about bytes it never meant as JSON. Any other label (identity, none, a
  // charset sent by mistake) leaves the body as it came: it is refused only
  // if it is not JSON, as before. Checked after the signature, so an
  // unauthenticated client learns nothing from it.
  static std::optional<std::string> UnsupportedCoding(const Headers& headers) {
    std::optional<std::string_view> value = FindHeader(headers, "Content-Encoding");
    if (!value) return std::nullopt;
    static constexpr std::string_view kCompressions[] = {
        "gzip", "x-gzip", "deflate", "compress", "x-compress", "br", "zstd"};
    bool compressed = false;
    ForEachPart(*value, ',', [&](std::string_view coding) {
      for (std::string_view c : kCompressions) compressed |= EqualsIgnoringCase(coding, c);
    });
    if (compressed) return std::string(value->substr(0, 64));
    return std::nullopt;
  }

  // Admission: bounded work in flight; past it the sender retries later.
  // Counts one more in in_flight_ and returns nullopt, or returns the 429.
  std::optional<IngestResult> TakeInFlightSlot() {
    if (in_flight_.fetch_add(1) >= options_.max_in_flight) {
      in_flight_.fetch_sub(1);
      return Overloaded(std::to_string(options_.max_in_flight) + " deliveries in flight");
    }
    return std::nullopt;
  }

  // OK without a verifier (unsigned deliveries allowed).
  Status VerifySignature(const Headers& headers, std::string_view body) {
    if (!verifier_) return Status::OK();
    return verifier_->Verify(headers, body, clock_->NowMicros(), nullptr);
  }

  // Hands an admitted delivery to the sink; its answer goes to `done`.
  void ToSink(std::chrono::steady_clock::time_point start, Headers headers, std::string body,
              AnswerCallback done) {
    sink_->IngestAsync(Delivery{std::move(headers), std::move(body)},
                       [this, start, done = std::move(done)](IngestResult r) {
                         in_flight_.fetch_sub(1);
                         Record(r.outcome, SecondsSince(start));
                         done(Answer(r));
                       });
  }

  // Quarantines a delivery refused before it reached the store.
  void Keep(const IngestResult& r, const Headers& headers, std::string_view body,
            uint64_t body_bytes) {
    RefusedDelivery refused;
    refused.outcome = r.outcome;
    refused.reason = r.message;
    refused.headers = headers;
    refused.body_prefix = body.substr(0, kQuarantineBodyBytes);
    refused.body_bytes = body_bytes;
    (void)sink_->Quarantine(std::move(refused));
  }

  static IngestResult Overloaded(std::string_view why) {
    IngestResult r;
    r.outcome = Outcome::kOverloaded;
    r.message = "overloaded: " + std::string(why) + "; retry later";
    return r;
  }

  // `bytes` 0: a size not known, only that it exceeds the limit.
  IngestResult TooLarge(uint64_t bytes) const {
    IngestResult r;
    r.outcome = Outcome::kTooLarge;
    const std::string limit = std::to_string(options_.max_body_bytes);
    r.message = bytes == 0
                    ? "body: exceeds the limit of " + limit + " bytes"
                    : "body: " + std::to_string(bytes) + " bytes exceeds the limit of " + limit;
    return r;
  }

  void Record(Outcome outcome, double seconds) {
    const auto index = static_cast<size_t>(outcome);
    if (index < outcomes_.size()) outcomes_[index].fetch_add(1, std::memory_order_relaxed);
    size_t b = 0;
    while (b < kLatencyBuckets.size() && seconds > kLatencyBuckets[b]) ++b;
    buckets_[b].fetch_add(1, std::memory_order_relaxed);
    latency_sum_ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  }

  std::unique_ptr<IngestSink> owned_;  // the StoreSink when made over a Store
  IngestSink* sink_;
  ReceiverOptions options_;
  Clock* clock_;
  std::optional<SignatureVerifier> verifier_;
  std::atomic<size_t> in_flight_{0};
  std::array<std::atomic<uint64_t>, kOutcomes> outcomes_{};
  std::array<std::atomic<uint64_t>, kLatencyBuckets.size() + 1> buckets_{};
  std::atomic<uint64_t> latency_sum_ns_{0};
};

}  // namespace

namespace {

// The verifier `options` asks for (nullopt: unsigned deliveries allowed), or
// why the options are refused.
Result<std::optional<SignatureVerifier>> VerifierFor(const ReceiverOptions& options) {
  if (options.secrets.empty()) {
    if (options.allow_unsigned) return std::optional<SignatureVerifier>();
    return Status::InvalidArgument(
        "secrets: none configured (set allow_unsigned only behind a verifying proxy)");
  }
  Result<SignatureVerifier> v = SignatureVerifier::Make(options.secrets, options.tolerance_seconds);
  if (!v.ok()) return v.status();
  return std::optional<SignatureVerifier>(std::move(*v));
}

// A body limit of zero would refuse every delivery as 413, which the sender
// does not retry. (max_in_flight 0 refuses every one as 429, which it does:
// a receiver that takes nothing for now.)
Status CheckLimits(const ReceiverOptions& options) {
  if (options.max_body_bytes == 0) {
    return Status::InvalidArgument("max_body_bytes: must be at least 1");
  }
  return Status::OK();
}

Result<std::unique_ptr<Receiver>> MakeOver(IngestSink* sink, std::unique_ptr<IngestSink> owned,
                                           const ReceiverOptions& options) {
  if (Status st = CheckLimits(options); !st.ok()) return st;
  Result<std::optional<SignatureVerifier>> verifier = VerifierFor(options);
  if (!verifier.ok()) return verifier.status();
  return std::unique_ptr<Receiver>(
      new ReceiverImpl(sink, std::move(owned), options, std::move(*verifier)));
}

// A receiver over a Store needs a thread and room for a delivery: zero
// would store nothing (and was silently taken as one before).
Status CheckStoreSinkOptions(const ReceiverOptions& options) {
  if (options.store_threads == 0) {
    return Status::InvalidArgument("store_threads: must be at least 1");
  }
  if (options.max_store_batch == 0) {
    return Status::InvalidArgument("max_store_batch: must be at least 1");
  }
  return Status::OK();
}

}  // namespace

Status Receiver::ValidateOptions(const ReceiverOptions& options) {
  if (Status st = CheckLimits(options); !st.ok()) return st;
  Result<std::optional<SignatureVerifier>> v = VerifierFor(options);
  if (!v.ok()) return v.status();
  return CheckStoreSinkOptions(options);
}

Result<std::unique_ptr<Receiver>> Receiver::Make(Store* store, const ReceiverOptions& options) {
  if (Status st = CheckStoreSinkOptions(options); !st.ok()) return st;
  auto sink = std::make_unique<StoreSink>(store, options.store_threads, options.max_store_batch);
  IngestSink* raw = sink.get();
  return MakeOver(raw, std::move(sink), options);
}

Result<std::unique_ptr<Receiver>> Receiver::Make(IngestSink* sink, const ReceiverOptions& options) {
  return MakeOver(sink, nullptr, options);
}

}  // namespace eventfold
