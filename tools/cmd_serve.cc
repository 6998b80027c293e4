// eventfold serve --data DIR --listen HOST:PORT --secret S... : the HTTP
// receiver, an embedding of eventfold::Receiver in cpp-httplib.

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

#include "eventfold/receiver.h"
#include "tools/cli_common.h"
#include "tools/secrets.h"

namespace eventfold::cli {
namespace {

struct ServeArgs {
  std::string dir;
  std::string listen = "127.0.0.1:8080";
  std::vector<std::string> secrets, secret_files;
  bool allow_unsigned = false;
  int64_t tolerance = 300;
  size_t max_in_flight = 256;
  size_t max_body = 1 << 20;
  int threads = 64;
};

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

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    *port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return false;
  }
  return *port >= 0 && *port <= 65535 && !host->empty();
}

// Start time of the request a worker thread is serving, for the access log.
thread_local std::chrono::steady_clock::time_point request_start;

int Serve(const ServeArgs& a) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.listen, &host, &port)) {
    std::cerr << "eventfold: --listen wants HOST:PORT, got " << a.listen << "\n";
    return kExitError;
  }
  Result<std::vector<std::string>> secrets = CollectSecrets(a.secrets, a.secret_files);
  if (!secrets.ok()) {
    std::cerr << "eventfold: " << secrets.status().message() << "\n";
    return kExitError;
  }
  if (secrets->empty() && !a.allow_unsigned) {
    std::cerr << "eventfold: serve needs --secret, --secret-file or " << kSecretsEnv
              << " (or --allow-unsigned behind a verifying proxy)\n";
    return kExitError;
  }

  // Block the stop signals before any thread starts; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/true);
  if (!store) return kExitError;
  ReceiverOptions ro;
  ro.secrets = *secrets;
  ro.allow_unsigned = a.allow_unsigned;
  ro.tolerance_seconds = a.tolerance;
  ro.max_in_flight = a.max_in_flight;
  ro.max_body_bytes = a.max_body;
  Result<std::unique_ptr<Receiver>> receiver = Receiver::Make(store.get(), ro);
  if (!receiver.ok()) {
    std::cerr << "eventfold: " << receiver.status().message() << "\n";
    return kExitError;
  }
  Receiver* rx = receiver->get();

  httplib::Server server;
  const int threads = a.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(a.max_body);
  server.set_keep_alive_max_count(1000);
  server.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    request_start = std::chrono::steady_clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto handle = [rx](const httplib::Request& req, httplib::Response& res) {
    HttpResponse r = rx->Handle(req.method, req.path, ToHeaders(req.headers), req.body);
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  };
  for (const char* pattern : {".*"}) {
    server.Post(pattern, handle);
    server.Get(pattern, handle);
    server.Put(pattern, handle);
    server.Patch(pattern, handle);
    server.Delete(pattern, handle);
  }
  // httplib refuses an oversized body from its Content-Length before reading
  // it; answer that the receiver's way (JSON, metrics, quarantine).
  server.set_error_handler([rx](const httplib::Request& req, httplib::Response& res) {
    if (res.status != 413) return;
    uint64_t declared = 0;
    try {
      declared = std::stoull(req.get_header_value("Content-Length"));
    } catch (...) {
    }
    HttpResponse r = rx->RefuseOversized(ToHeaders(req.headers), declared);
    res.set_content(r.body, r.content_type.c_str());
  });
  std::mutex log_mu;
  server.set_logger([&log_mu](const httplib::Request& req, const httplib::Response& res) {
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - request_start)
                          .count();
    char latency[32];
    std::snprintf(latency, sizeof(latency), "%.3fms", ms);
    std::string id = req.get_header_value("X-RR-Event-Id");
    if (id.empty()) id = req.get_header_value("webhook-id");
    std::lock_guard lock(log_mu);
    std::cerr << FormatTimestamp(SystemClock()->NowMicros()) << " " << req.remote_addr << " "
              << req.method << " " << req.path << " " << res.status << " "
              << req.body.size() << "B " << latency << (id.empty() ? "" : " " + id) << "\n";
  });

  if (port == 0) {
    port = server.bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!server.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::cerr << "eventfold: cannot listen on " << a.listen << "\n";
    return kExitError;
  }
  std::cerr << "eventfold: listening on " << host << ":" << port << " (store " << a.dir
            << ", " << secrets->size() << " secret(s))" << std::endl;

  std::thread stopper([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "eventfold: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
              << ": draining in-flight requests" << std::endl;
    server.stop();
  });
  const bool ok = server.listen_after_bind();
  // listen_after_bind returns once stop() closed the socket and the worker
  // pool finished its requests; wake the signal thread if it still waits.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  store.reset();
  std::cerr << "eventfold: stopped; store closed" << std::endl;
  return ok ? kExitOk : kExitError;
}

}  // namespace

void AddServeCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("serve", "run the HTTP webhook receiver");
  auto a = std::make_shared<ServeArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any)")
      ->capture_default_str();
  cmd->add_option("--secret", a->secrets, "signing secret (repeat for rotation)");
  cmd->add_option("--secret-file", a->secret_files, "file of secrets, one per line");
  cmd->add_flag("--allow-unsigned", a->allow_unsigned,
                "accept unsigned deliveries (only behind a verifying proxy)");
  cmd->add_option("--tolerance", a->tolerance, "signature timestamp window, seconds")
      ->capture_default_str();
  cmd->add_option("--max-in-flight", a->max_in_flight, "deliveries stored at once before 429")
      ->capture_default_str();
  cmd->add_option("--max-body", a->max_body, "largest body in bytes before 413")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "HTTP worker threads (one per open connection)")
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Serve(*a); }; });
}

}  // namespace eventfold::cli
