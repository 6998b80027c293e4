#include "tools/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <mutex>

#include "tools/connection_pool.h"

namespace eventfold::cli {
namespace {

Headers ToHeaders(const httplib::Headers& h) {
  Headers out;
  out.reserve(h.size());
  for (const auto& [k, v] : h) {
    // httplib files the peer's addresses among the headers; they are not.
    if (k == "REMOTE_ADDR" || k == "REMOTE_PORT" || k == "LOCAL_ADDR" || k == "LOCAL_PORT") {
      continue;
    }
    out.emplace_back(k, v);
  }
  return out;
}

// Start time of the request a worker thread is serving, for the access log.
thread_local std::chrono::steady_clock::time_point request_start;
// The event_id of the delivery it answered (from the body), for the same.
thread_local std::string request_event_id;

// Debian's cpp-httplib is compiled with a listen backlog of 5: a burst of
// new connections (a load generator opening 64 at once) overflows it and the
// dropped SYNs come back a full second later. Linux lets listen() be called
// again on a listening socket to enlarge its backlog; httplib does not expose
// the socket, so find it among our descriptors by its bound port.
void EnlargeListenBacklog(int port) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (...) {
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) {
      bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    }
    int listening = 0;
    socklen_t optlen = sizeof(listening);
    if (bound == port && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) == 0 &&
        listening) {
      listen(fd, SOMAXCONN);
    }
  }
}

std::mutex& LogMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

HttpServer::HttpServer(Receiver* receiver, HttpServerOptions options)
    : receiver_(receiver), options_(std::move(options)), server_(new httplib::Server) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  httplib::Server& server = *server_;
  Receiver* rx = receiver_;
  const int threads = options_.threads;
  server.new_task_queue = [threads] { return new ConnectionPool(threads); };
  server.set_payload_max_length(options_.max_body_bytes);
  server.set_keep_alive_max_count(100000);
  // Answers are small: without TCP_NODELAY, Nagle's algorithm and delayed
  // ACKs hold each one back by tens of milliseconds.
  server.set_tcp_nodelay(true);
  server.set_pre_routing_handler([rx, threads](const httplib::Request&, httplib::Response& res) {
    request_start = std::chrono::steady_clock::now();
    request_event_id.clear();
    if (!ConnectionPool::RunningOverflow()) return httplib::Server::HandlerResponse::Unhandled;
    // Every worker holds a connection: refuse at once rather than queue.
    HttpResponse r =
        rx->RefuseOverloaded("all " + std::to_string(threads) + " connection workers are busy");
    res.status = r.status;
    res.set_header("Connection", "close");
    res.set_content(r.body, r.content_type.c_str());
    return httplib::Server::HandlerResponse::Handled;
  });
  auto handle = [rx](const httplib::Request& req, httplib::Response& res) {
    HttpResponse r = rx->Handle(req.method, req.path, ToHeaders(req.headers), req.body);
    request_event_id = std::move(r.event_id);
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  };
  server.Post(".*", handle);
  server.Get(".*", handle);
  server.Put(".*", handle);
  server.Patch(".*", handle);
  server.Delete(".*", handle);
  // httplib refuses an oversized body from its Content-Length before reading
  // it; answer that the receiver's way (JSON, metrics, quarantine).
  server.set_error_handler([rx](const httplib::Request& req, httplib::Response& res) {
    // Only httplib's own refusal (Content-Length over the limit: no handler
    // ran, no body yet). A 413 the receiver answered itself (e.g. a chunked
    // body, which httplib reads whole) is already recorded and quarantined.
    if (res.status != 413 || !res.body.empty()) return;
    uint64_t declared = 0;
    try {
      declared = std::stoull(req.get_header_value("Content-Length"));
    } catch (...) {
      declared = 0;  // no usable Content-Length: the size stays unknown
    }
    HttpResponse r = rx->RefuseOversized(ToHeaders(req.headers), declared);
    res.set_content(r.body, r.content_type.c_str());
  });
  if (std::ostream* log = options_.access_log) {
    server.set_logger([log](const httplib::Request& req, const httplib::Response& res) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                  request_start)
                            .count();
      char latency[32];
      std::snprintf(latency, sizeof(latency), "%.3fms", ms);
      // The body's event_id when it had a readable one, else a header's.
      std::string id = request_event_id;
      if (id.empty()) id = req.get_header_value("X-RR-Event-Id");
      if (id.empty()) id = req.get_header_value("webhook-id");
      std::lock_guard lock(LogMutex());
      *log << FormatTimestamp(SystemClock()->NowMicros()) << " " << req.remote_addr << " "
           << req.method << " " << req.path << " " << res.status << " " << req.body.size() << "B "
           << latency << (id.empty() ? "" : " " + id) << "\n";
    });
  }

  if (options_.port == 0) {
    port_ = server.bind_to_any_port(options_.host);
  } else {
    port_ = server.bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    port_ = 0;
    return Status::IOError("cannot listen on " + options_.host + ":" +
                           std::to_string(options_.port));
  }
  EnlargeListenBacklog(port_);
  thread_ = std::thread([&server] { server.listen_after_bind(); });
  return Status::OK();
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  // stop() closes the listening socket; listen_after_bind() then drains the
  // worker pool (in-flight requests finish) before returning.
  server_->stop();
  thread_.join();
}

}  // namespace eventfold::cli
