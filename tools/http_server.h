// HttpServer: eventfold::Receiver served over HTTP/1.1 with cpp-httplib.
//
// One worker thread per open connection (keep-alive), up to `threads`; a
// connection beyond them is answered 429 at once, never queued
// (tools/connection_pool.h); oversized bodies are refused from their Content-Length before reading;
// one access-log line per request, without bodies or secrets. Start() binds
// and serves on a background thread; Stop() stops accepting, lets in-flight
// requests finish and joins. Used by `eventfold serve`, the demo and the
// benchmarks. Start/Stop from one thread; requests are served concurrently.

#ifndef EVENTFOLD_TOOLS_HTTP_SERVER_H_
#define EVENTFOLD_TOOLS_HTTP_SERVER_H_

#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "eventfold/receiver.h"
#include "eventfold/status.h"

namespace httplib {
class Server;
}

namespace eventfold::cli {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;      // 0: any free port (see port())
  int threads = 64;  // worker threads: one per open connection
  size_t max_body_bytes = 1 << 20;
  std::ostream* access_log = nullptr;  // nullptr: no access log
};

class HttpServer {
 public:
  HttpServer(Receiver* receiver, HttpServerOptions options);
  ~HttpServer();

  // Binds and starts serving; kIOError when the address cannot be bound.
  Status Start();
  // The bound port, after Start().
  int port() const { return port_; }
  // Stops accepting, waits for in-flight requests, joins. Idempotent.
  void Stop();

 private:
  Receiver* receiver_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_HTTP_SERVER_H_
