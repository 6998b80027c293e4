// Receiver: the webhook endpoint logic, independent of any HTTP server.
//
// Given a request's method, path, headers and raw body, a Receiver answers
// with the status and small JSON body docs/SPEC.md §3 prescribes, applying in order:
// method (POST ingests; GET /healthz and GET /metrics), body size (413,
// before any parsing), admission (429 when max_in_flight deliveries are
// already being stored), signature (401), decoding (400), ingest (200
// accepted or duplicate, 409 conflict) and storage failure (503). It never
// answers 3xx. Refused deliveries (400, 401, 409, 413) go to the store's
// quarantine. Applications embed it in their own server; `eventfold serve`
// is one such embedding.
//
// Thread-safety: every method (Handle, HandleAsync, TryHandleWithoutBlocking,
// RefuseOversized, RefuseOverloaded, MetricsText) may be called from any
// number of threads at once; an HttpServer calls them from its I/O threads
// and workers.

#ifndef EVENTFOLD_RECEIVER_H_
#define EVENTFOLD_RECEIVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eventfold/clock.h"
#include "eventfold/ingest.h"
#include "eventfold/ingest_sink.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold {

struct ReceiverOptions {
  // Signing secrets; any may sign (rotation). "whsec_<base64>" secrets also
  // verify Standard Webhooks. Each must be at least 16 bytes.
  std::vector<std::string> secrets;

  // Accept deliveries without a signature. Only for a receiver behind a
  // trusted proxy that verified them already; Make() refuses an empty
  // `secrets` otherwise.
  bool allow_unsigned = false;

  // Largest |now - t| accepted for a signature's timestamp.
  int64_t tolerance_seconds = 300;

  // Bodies above this are answered 413 unread. Make() refuses 0.
  size_t max_body_bytes = 1 << 20;

  // Deliveries being verified and stored at once; more are answered 429
  // immediately instead of queueing without bound; 0 answers every one 429
  // (a receiver that takes nothing for now).
  size_t max_in_flight = 256;

  // Source of time for the signature tolerance; nullptr: SystemClock(). (The
  // latencies in /metrics are measured on the steady clock: they report how
  // long a request really took, not a time to decide by.)
  Clock* clock = nullptr;

  // A receiver made over a Store: the threads that store the deliveries
  // HandleAsync() passes on, each taking every delivery queued so far (at
  // most `max_store_batch`) into one IngestBatch, so one write and one sync
  // serve a group. Started at the first HandleAsync(). Two: one group is
  // staged while the other's write syncs. Make() refuses 0 for either.
  size_t store_threads = 2;
  size_t max_store_batch = 256;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // The delivery's event_id when its body had a readable one (for access
  // logs); not part of the answer sent.
  std::string event_id = {};
  // Further response header fields (e.g. a paging cursor); the server sets
  // Content-Type, Content-Length and Connection itself.
  std::vector<std::pair<std::string, std::string>> headers = {};
};

class Receiver {
 public:
  // Fails with kInvalidArgument for an empty, short or malformed secret, a
  // negative tolerance, or a max_body_bytes or store option of 0 (each
  // message names the option), and with kUnavailable when OpenSSL cannot
  // set up HMAC-SHA256. `store` must outlive the receiver.
  static Result<std::unique_ptr<Receiver>> Make(Store* store, const ReceiverOptions& options);

  // The checks Make() applies to `options`, without a store: OK, or
  // kInvalidArgument naming the option and the reason (kUnavailable when
  // OpenSSL cannot set up HMAC-SHA256). Lets a command
  // refuse bad flags before it touches the disk.
  [[nodiscard]] static Status ValidateOptions(const ReceiverOptions& options);

  // The same over any sink (cluster mode publishes instead of storing):
  // the receiver checks method, size, admission and signature, the sink
  // does the rest. `sink` must outlive the receiver.
  static Result<std::unique_ptr<Receiver>> Make(IngestSink* sink, const ReceiverOptions& options);

  virtual ~Receiver() = default;

  // Answers one request. Never throws.
  [[nodiscard]] virtual HttpResponse Handle(std::string_view method, std::string_view path,
                                            const Headers& headers, std::string_view body) = 0;

  // Gets an answer, exactly once.
  using AnswerCallback = std::function<void(HttpResponse)>;

  // Handle() for an event loop, which must not wait for the store: the same
  // checks and the same answer, given to `done`. A POST that passes the
  // receiver's own checks goes to IngestSink::IngestAsync and is answered
  // from the sink's thread once durable (over a Store: a thread of
  // `store_threads`, storing in groups); every other answer, including the
  // receiver's refusals (which quarantine), is given before HandleAsync
  // returns. `done` must not block. This default runs Handle().
  virtual void HandleAsync(std::string_view method, std::string_view path, Headers headers,
                           std::string body, AnswerCallback done) {
    done(Handle(method, path, headers, body));
  }

  // HandleAsync() from an event loop's own thread, when the receiver can
  // do the request's work there without waiting on anything. Then it takes
  // `headers`, `body` and `done` (moves from them), returns true, and `done`
  // gets the answer exactly once, later or before this returns; `done` must
  // not block. It returns false and leaves the three as they were when the
  // request needs a thread that may wait; the caller then calls
  // HandleAsync() on such a thread. This default always returns false. The
  // built-in receiver takes every POST with a body of at most 64 KiB over a
  // sink that never blocks (IngestSink::NeverBlocks: a Store), refusals
  // included (its quarantine only queues); GETs and larger bodies return
  // false.
  [[nodiscard]] virtual bool TryHandleWithoutBlocking(std::string_view method,
                                                      std::string_view path, Headers& headers,
                                                      std::string& body, AnswerCallback& done) {
    (void)method, (void)path, (void)headers, (void)body, (void)done;
    return false;
  }

  // For servers that stop reading an oversized body themselves: answers
  // 413 for the request `method` `path` with `headers`. A POST is recorded
  // and quarantined like an oversized delivery in Handle(); any other
  // method is no delivery, so its 413 is neither (the server counts it
  // among its own refusals). `body_bytes` is the declared Content-Length,
  // or 0 when the body is only known to exceed the limit (a chunked body
  // cut off while read).
  virtual HttpResponse RefuseOversized(std::string_view method, std::string_view path,
                                       const Headers& headers, uint64_t body_bytes) = 0;

  // True when RefuseOversized() never waits, so an event loop's thread may
  // call it. This default says false; the built-in receiver says true over
  // a sink that never blocks (IngestSink::NeverBlocks: a Store).
  virtual bool RefusesOversizedWithoutBlocking() const { return false; }

  // For servers that refuse a request before reading it because they are
  // out of capacity (e.g. no worker left for a new connection): records and
  // answers 429 like an over-admission in Handle(); `why` ends up in the
  // answer's error text.
  virtual HttpResponse RefuseOverloaded(std::string_view why) = 0;

  // Prometheus text exposition: deliveries by outcome and status, an
  // acknowledgement latency histogram, in-flight count, store size.
  virtual std::string MetricsText() = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_RECEIVER_H_
