// IngestSink: where a Receiver puts the deliveries it has verified.
//
// A Receiver (eventfold/receiver.h) owns the HTTP semantics: method, body
// size, admission, signatures. Everything after that - decoding, storing,
// keeping refusals - is the sink's. A Store is the sink of one node
// (Receiver::Make(Store*, ...) wraps it); cluster mode's sink publishes to
// NATS JetStream instead (eventfold/cluster.h), so both answer the same
// 400/401/413 and differ only in where an accepted delivery goes.
//
// Thread-safety: implementations must accept calls from many threads.

#ifndef EVENTFOLD_INGEST_SINK_H_
#define EVENTFOLD_INGEST_SINK_H_

#include <cstdint>
#include <functional>

#include "eventfold/ingest.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold {

class IngestSink {
 public:
  virtual ~IngestSink() = default;

  // Decodes, validates and durably keeps one delivery whose signature the
  // receiver has checked. The outcome decides the HTTP answer: kAccepted or
  // kDuplicate (200) only once the delivery is durable; kInvalid (400),
  // kConflict (409) refused and kept; kStorageError (503) when it could not
  // be kept, so the sender retries.
  virtual IngestResult Ingest(const Delivery& delivery) = 0;

  // Gets a delivery's outcome, exactly once.
  using IngestCallback = std::function<void(IngestResult)>;

  // Ingest() for callers that must not wait for the store (an event loop):
  // `done` gets the same outcome with the same promise (a kAccepted or
  // kDuplicate only once durable). A sink that stores in the background runs
  // `done` on a thread of its own, after IngestAsync has returned; this
  // default stores on the calling thread and runs `done` before returning.
  // `done` must not block.
  virtual void IngestAsync(Delivery delivery, IngestCallback done) { done(Ingest(delivery)); }

  // True when neither IngestAsync() nor Quarantine() ever waits (for a lock
  // held across a write, a disk or a network), so an event loop's thread
  // may call them. This default, which stores on the calling thread, says
  // false.
  virtual bool NeverBlocks() const { return false; }

  // Keeps a delivery the receiver refused itself (401, 413); best effort.
  virtual Status Quarantine(RefusedDelivery refused) = 0;

  // Bytes the sink holds, for metrics; 0 when it cannot tell cheaply.
  virtual uint64_t ApproximateBytes() = 0;

  // Memory the sink holds that grows with what it stores (a store's filters
  // of stored keys: StoreStats::key_filter_bytes), for metrics; 0 when
  // there is none (cluster mode: the fold workers hold the stores).
  virtual uint64_t MemoryBytes() { return 0; }

  // The outcome counts of the store behind the sink, for metrics; zeros
  // when there is none (cluster mode: the fold workers count).
  virtual Counters counters() { return Counters{}; }
};

}  // namespace eventfold

#endif  // EVENTFOLD_INGEST_SINK_H_
