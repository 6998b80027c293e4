// HttpServer: an eventfold::Receiver served over strict HTTP/1.1 on an event
// loop (Boost.Beast on Asio), with a fixed number of I/O threads and no thread
// per connection.
//
// The I/O threads only read and write. Each request's header is read first,
// under a deadline and a byte limit, and checked before any of its body is
// read: a declared body over the limit is answered 413 and the connection
// closed unread (never "100 Continue"); conflicting or malformed framing
// (Content-Length with Transfer-Encoding, a duplicate or malformed
// Content-Length, a bad chunk, Transfer-Encoding in HTTP/1.0, an invalid
// Host, a target that is neither a path nor an http(s) URI) is answered 400
// and closed; an absolute-form target is served as its path. Bodies are
// read under a byte limit that applies while reading (chunked bodies too,
// trailers allowed), a memory budget for all connections' bodies together
// (503 beyond it) and a minimum rate; their bytes go to the receiver
// whatever the Content-Type. A request goes first to
// Receiver::TryHandleWithoutBlocking on the I/O thread that read it: the
// built-in receiver over a Store checks a POST there and hands it to the
// store's threads, which answer once it is durable, or refuses it there.
// Whatever the receiver does not take there (a GET, a body over 64 KiB, any
// request of an application's receiver that may block) runs on a bounded
// worker pool through Receiver::HandleAsync; when the pool's queue is full
// the answer is 503 with Retry-After. No thread sleeps through a write. A
// connection serves its requests one at a time, so pipelined requests are
// answered in order. A HEAD request is handed to the receiver as a GET and answered with
// that answer's header alone (its Content-Length included, no body bytes).
// Connections over `max_connections` are answered 503 and closed at once.
// Every refusal of the HTTP layer itself is counted and appended to the
// receiver's GET /metrics.
//
// Stop() stops accepting, closes connections waiting for a request at once,
// lets requests being read or served finish (their answer says
// "Connection: close") for at most `drain_timeout`, then closes the rest.
//
// Thread-safety: Start() and Stop() from one thread; requests are served
// concurrently by the I/O threads and workers, so the receiver must take
// concurrent calls.

#ifndef EVENTFOLD_HTTP_SERVER_H_
#define EVENTFOLD_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "eventfold/receiver.h"
#include "eventfold/status.h"

namespace eventfold {

struct HttpServerOptions {
  // The address to listen on, an IP address; loopback by default.
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see port())

  // Threads each running an event loop of its own (read and write; the
  // first also accepts). Connections are dealt to them round robin, and a
  // connection stays on its thread.
  int io_threads = 2;
  // Threads running what the receiver does not take on the I/O threads
  // (Receiver::TryHandleWithoutBlocking): GETs, bodies over 64 KiB, and
  // every request and 413 of a receiver that may block (the store ingest
  // too, for one that cannot hand it on); and how many requests may wait
  // for one before the answer is 503.
  int workers = 64;
  size_t worker_queue = 1024;

  // Open connections beyond this are answered 503 and closed.
  size_t max_connections = 16384;

  // Request line plus header fields, in bytes (431 beyond; 414 when the
  // request line alone does not fit), the number of header fields (431) and
  // the request target's length (414).
  size_t max_header_bytes = 16 * 1024;
  size_t max_header_fields = 100;
  size_t max_url_bytes = 4096;
  // Largest body (413); 1 MiB like ReceiverOptions::max_body_bytes.
  size_t max_body_bytes = 1 << 20;
  // The memory of request bodies being read or served, all connections
  // together: a body's buffer counts as it grows with the bytes that come
  // (doubling, never past the declared length), before each growth, until
  // its answer is written; a declared length costs nothing until its bytes
  // arrive. A request whose body would pass this is answered 503 with
  // Retry-After and closed. At least max_body_bytes.
  size_t max_body_memory = 64 << 20;
  // The same for request headers, all connections together: a connection
  // whose request line and header fields outgrow 4 KiB (a webhook's are far
  // smaller) holds 2 * max_header_bytes + 8 KiB of this (its read buffer and
  // the parser's copy of the fields, at most) until it is between requests
  // again or closed. One that would pass this is answered 503 with
  // Retry-After and closed. The first 4 KiB of each header are not counted:
  // they are bounded by max_connections. At least one connection's share.
  size_t max_header_memory = 32 << 20;

  // A request's header must arrive whole within this (408 and close).
  std::chrono::milliseconds header_timeout{10000};
  // A kept-alive connection may stay idle this long between requests.
  std::chrono::milliseconds idle_timeout{30000};
  // Slowloris on the body: each `body_grace` of a body, the first from the
  // header's end, must bring `min_body_bytes_per_second` on average, and no
  // read may stall longer than `body_grace` (408 and close).
  std::chrono::milliseconds body_grace{5000};
  uint64_t min_body_bytes_per_second = 4096;
  // Writing an answer may take this long before the connection is dropped.
  std::chrono::milliseconds write_timeout{10000};
  // Stop(): the longest wait for in-flight requests before closing them.
  std::chrono::milliseconds drain_timeout{10000};

  // Hand Handle() the request target whole, query string included (a read
  // API pages with it); false: the path only, as the webhook receiver wants.
  bool pass_query = false;

  // While the receiver works on a request, notice a client that hangs up
  // and close its connection at once (counted in /metrics as
  // eventfold_http_hung_up_total); the answer, when it comes, is dropped.
  // For a listener whose answers may wait long (a read API's long-polls):
  // each request then costs one more readiness wait, so false (the
  // default) leaves a webhook listener, whose answers come in
  // milliseconds, without it.
  bool close_on_hang_up = false;

  // The Server field of every answer the server formats (a read API names
  // itself, so that a client pointed at another port can tell); empty (the
  // default): none. Must not hold a line break (Start() refuses it).
  std::string server_header;

  // One line per request (no bodies, no secrets); nullptr (the default): no
  // access log. Each line is written whole by one write() under this
  // server's own lock; a stream that two servers share must take concurrent
  // writes, as std::cerr and std::clog do.
  std::ostream* access_log = nullptr;
};

class HttpServer {
 public:
  // `receiver` must outlive the server.
  HttpServer(Receiver* receiver, HttpServerOptions options);
  ~HttpServer();  // Stop()

  // OK when `options` can be used: thread counts and max_connections at
  // least 1, host an IP address; else kInvalidArgument naming the option.
  // Start() checks the same; a caller can check before it creates anything.
  [[nodiscard]] static Status ValidateOptions(const HttpServerOptions& options);

  // Binds, listens and starts the I/O threads and workers. kIOError when the
  // address cannot be bound or an event loop cannot be made (no descriptor
  // left); kInvalidArgument for an unusable option or a second Start();
  // kUnavailable when the system refuses a thread. On failure nothing is
  // left running or listening.
  [[nodiscard]] Status Start();
  // The bound port, after a successful Start().
  int port() const;
  // The graceful shutdown described above; returns when every thread has
  // been joined. Idempotent.
  void Stop();

  // The HTTP layer's own counters in Prometheus text (also appended to
  // GET /metrics).
  std::string MetricsText() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_HTTP_SERVER_H_
