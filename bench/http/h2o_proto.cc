// eventfold-h2o-proto: the second candidate for the HTTP front end, measured
// against eventfold::HttpServer (docs/RECEIVER.md). A minimal prototype, not
// a server to run: h2o's own event loop on `--threads` threads (one listener
// each, SO_REUSEPORT), the receiver's blocking calls on the same bounded
// worker pool the Beast server uses, answers handed back to the loop through
// h2o's multithread queue. h2o reads each body whole before the handler runs
// (bounded by max_request_entity_size); none of the hardening of
// http/server.cc is here.
//
//   eventfold-h2o-proto --data DIR --secret S [--port 0] [--threads 2]
//                       [--workers 64]
// Prints "listening on 127.0.0.1:PORT"; SIGTERM or SIGINT stops it.

#define H2O_USE_LIBUV 0
#include <h2o.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "http/worker_pool.h"

namespace {

using namespace eventfold;

std::atomic<bool> g_stop{false};
Receiver* g_receiver = nullptr;
http::WorkerPool* g_pool = nullptr;

struct Loop {
  h2o_evloop_t* loop = nullptr;
  h2o_context_t ctx{};
  h2o_accept_ctx_t accept{};
  h2o_multithread_queue_t* queue = nullptr;
  h2o_multithread_receiver_t done{};
};
thread_local Loop* t_loop = nullptr;

// One request on its way to a worker and back; `msg` first, so the queue's
// message is the job.
struct Job {
  h2o_multithread_message_t msg{};
  h2o_req_t* req = nullptr;
  std::string method, path, body;
  Headers headers;
  HttpResponse response;
};

std::string Str(h2o_iovec_t v) { return std::string(v.base, v.len); }

void OnDone(h2o_multithread_receiver_t*, h2o_linklist_t* messages) {
  while (!h2o_linklist_is_empty(messages)) {
    h2o_multithread_message_t* m =
        H2O_STRUCT_FROM_MEMBER(h2o_multithread_message_t, link, messages->next);
    h2o_linklist_unlink(&m->link);
    std::unique_ptr<Job> job(reinterpret_cast<Job*>(m));
    h2o_req_t* req = job->req;
    req->res.status = job->response.status;
    req->res.reason = job->response.status == 200 ? "OK" : "Error";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, nullptr,
                   job->response.content_type.data(), job->response.content_type.size());
    h2o_send_inline(req, job->response.body.data(), job->response.body.size());
  }
}

int OnRequest(h2o_handler_t*, h2o_req_t* req) {
  auto job = std::make_unique<Job>();
  job->req = req;
  job->method = Str(req->method);
  job->path = Str(req->path_normalized);
  job->body = Str(req->entity);
  for (size_t i = 0; i < req->headers.size; ++i) {
    const h2o_header_t& h = req->headers.entries[i];
    job->headers.emplace_back(Str(*h.name), Str(h.value));
  }
  Loop* loop = t_loop;
  Job* raw = job.get();
  const bool queued = g_pool->TrySubmit([raw, loop] {
    raw->response = g_receiver->Handle(raw->method, raw->path, raw->headers, raw->body);
    h2o_multithread_send_message(&loop->done, &raw->msg);
  });
  if (!queued) {
    static const char kBusy[] = "{\"status\":\"overloaded\"}";
    req->res.status = 503;
    req->res.reason = "Service Unavailable";
    h2o_send_inline(req, kBusy, sizeof(kBusy) - 1);
    return 0;
  }
  job.release();  // OnDone owns it now
  return 0;
}

void OnAccept(h2o_socket_t* listener, const char* err) {
  if (err != nullptr) return;
  if (h2o_socket_t* sock = h2o_evloop_socket_accept(listener)) {
    h2o_accept(static_cast<h2o_accept_ctx_t*>(listener->data), sock);
  }
}

int Listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("h2o prototype of the HTTP front end (benchmark only)");
  std::string dir, secret;
  int port = 0, threads = 2, workers = 64;
  app.add_option("--data", dir)->required();
  app.add_option("--secret", secret)->required();
  app.add_option("--port", port);
  app.add_option("--threads", threads);
  app.add_option("--workers", workers);
  CLI11_PARSE(app, argc, argv);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<Store>> store = Store::Open(dir, Options{});
  if (!store.ok()) {
    std::cerr << store.status().ToString() << "\n";
    return 2;
  }
  ReceiverOptions ro;
  ro.secrets = {secret};
  Result<std::unique_ptr<Receiver>> rx = Receiver::Make(store->get(), ro);
  if (!rx.ok()) {
    std::cerr << rx.status().ToString() << "\n";
    return 2;
  }
  g_receiver = rx->get();
  http::WorkerPool pool(1024);
  if (Status st = pool.Start(static_cast<size_t>(workers)); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  g_pool = &pool;

  h2o_globalconf_t config;
  h2o_config_init(&config);
  config.max_request_entity_size = 1 << 20;
  h2o_hostconf_t* host =
      h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t* path = h2o_config_register_path(host, "/", 0);
  h2o_handler_t* handler = h2o_create_handler(path, sizeof(*handler));
  handler->on_req = OnRequest;

  const int first = Listen(port);
  if (first < 0) {
    std::cerr << "cannot listen\n";
    return 2;
  }
  port = BoundPort(first);
  std::vector<std::unique_ptr<Loop>> loops;
  std::vector<std::thread> running;
  for (int i = 0; i < threads; ++i) {
    auto loop = std::make_unique<Loop>();
    const int fd = i == 0 ? first : Listen(port);
    running.emplace_back([l = loop.get(), fd, &config] {
      t_loop = l;
      l->loop = h2o_evloop_create();
      h2o_context_init(&l->ctx, l->loop, &config);
      l->accept.ctx = &l->ctx;
      l->accept.hosts = config.hosts;
      l->queue = h2o_multithread_create_queue(l->loop);
      h2o_multithread_register_receiver(l->queue, &l->done, OnDone);
      h2o_socket_t* sock = h2o_evloop_socket_create(l->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
      sock->data = &l->accept;
      h2o_socket_read_start(sock, OnAccept);
      while (!g_stop.load() && h2o_evloop_run(l->loop, 100) == 0) {
      }
    });
    loops.push_back(std::move(loop));
  }
  std::cerr << "listening on 127.0.0.1:" << port << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  g_stop = true;
  for (std::thread& t : running) t.join();
  // Answers still owed go nowhere: the loops are gone (a benchmark's stop).
  pool.Shutdown();
  return 0;
}
