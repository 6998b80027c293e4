// eventfold-http-attack: the attack run of docs/RELIABILITY.md against a
// real `eventfold serve` it starts on 127.0.0.1 (loopback only).
//
// For --seconds, at once:
//   - slowloris: --slowloris connections, each sending a request line and
//     then one header byte at a time, never a newline (reconnected when the
//     server closes them);
//   - --uploads parallel unsigned chunked uploads of --upload-mib MiB each
//     (64 KiB chunks; started again when the server refuses and closes);
//   - a stream of requests with --header-count header fields each;
//   - a signing ReceiptRoller sender (tools/sender.h) at --rate deliveries/s
//     over 16 keep-alive connections, each delivery a new event.
// The server's RSS is sampled every 100 ms; its peak is VmHWM from
// /proc/PID/status, read just before SIGTERM. Prints a summary and one
// "RESULT k=v ..." line; exits 1 when a target is missed (answered >= 99%
// with 200, p99 < 50 ms, peak RSS < 256 MiB), 2 when the run failed.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/history.h"
#include "tools/sender.h"

namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kSecret = "attack-run-signing-secret";
constexpr const char* kPath = "/webhooks/receiptroller";

struct Config {
  std::string cli;
  double seconds = 30;
  double rate = 500;
  int slowloris = 1000;
  int uploads = 8;
  uint64_t upload_mib = 256;
  int header_count = 100000;
  std::vector<std::string> serve_args;
};

// --- the server ----------------------------------------------------------

struct Serve {
  pid_t pid = -1;
  int port = 0;
  fs::path dir;
};

Serve StartServe(const Config& c) {
  Serve s;
  s.dir = fs::temp_directory_path() / ("eventfold-attack-" + std::to_string(::getpid()));
  fs::remove_all(s.dir);
  fs::create_directories(s.dir);
  const std::string log = (s.dir / "serve.log").string();
  std::vector<std::string> args = {c.cli,      "serve",       "--data",   (s.dir / "data").string(),
                                   "--listen", "127.0.0.1:0", "--secret", kSecret};
  args.insert(args.end(), c.serve_args.begin(), c.serve_args.end());
  s.pid = ::fork();
  if (s.pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen(log.c_str(), "w", stderr);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  const std::string marker = "listening on 127.0.0.1:";
  for (int i = 0; i < 200 && s.port == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(marker);
    if (at != std::string::npos) s.port = std::atoi(text.c_str() + at + marker.size());
  }
  return s;
}

// kB of "VmRSS:" or "VmHWM:" in /proc/PID/status; -1 when unreadable.
long StatusKib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0)
      return std::strtol(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return -1;
}

int StopServe(Serve& s) {
  ::kill(s.pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 300; ++i) {  // 30 s at most, then SIGKILL
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) return status;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ::kill(s.pid, SIGKILL);
  ::waitpid(s.pid, &status, 0);
  return status;
}

// --- sockets ---------------------------------------------------------------

int Connect(int port, int timeout_seconds) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const timeval tv{timeout_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// The status of the answer waiting on `fd` (its first line only); 0 when
// none arrives before the receive timeout or a close.
int ReadStatus(int fd) {
  char buf[512];
  const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
  if (n < 12) return 0;
  buf[n] = '\0';
  return std::strncmp(buf, "HTTP/1.1 ", 9) == 0 ? std::atoi(buf + 9) : 0;
}

// --- the attackers -----------------------------------------------------------

struct Counts {
  std::atomic<uint64_t> slow_opened{0}, slow_closed{0}, slow_408{0};
  std::atomic<uint64_t> uploads_started{0}, upload_mib_sent{0}, upload_413{0};
  std::atomic<uint64_t> header_requests{0}, header_431{0};
  std::atomic<long> peak_rss_sampled_kib{0};
};

void Slowloris(int port, int n, SteadyClock::time_point end, Counts* k) {
  const std::string start = "POST /webhooks/receiptroller HTTP/1.1\r\nHost: a\r\nX-Slow: ";
  std::vector<int> fds(static_cast<size_t>(n), -1);
  auto open = [&](size_t i) {
    fds[i] = Connect(port, 2);
    if (fds[i] >= 0 && SendAll(fds[i], start.data(), start.size())) {
      k->slow_opened.fetch_add(1);
    } else if (fds[i] >= 0) {
      ::close(fds[i]);
      fds[i] = -1;
    }
  };
  for (size_t i = 0; i < fds.size(); ++i) open(i);
  // Each connection gets one byte a second, in ten slices a second.
  size_t slice = 0;
  while (SteadyClock::now() < end) {
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back(pollfd{fd, POLLIN, 0});
    ::poll(p.data(), p.size(), 0);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) {
        open(i);
        continue;
      }
      if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      // An answer or a close: the server is done with this one.
      char buf[1024];
      const ssize_t got = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
      if (got >= 12 && std::strncmp(buf, "HTTP/1.1 408", 12) == 0) k->slow_408.fetch_add(1);
      ::close(fds[i]);
      fds[i] = -1;
      k->slow_closed.fetch_add(1);
      open(i);
    }
    for (size_t i = slice; i < fds.size(); i += 10) {
      if (fds[i] >= 0) ::send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    slice = (slice + 1) % 10;
    std::this_thread::sleep_for(milliseconds(100));
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
}

void ChunkedUploads(int port, uint64_t mib, SteadyClock::time_point end, Counts* k) {
  const std::string head =
      "POST /webhooks/receiptroller HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "10000\r\n" + std::string(64 * 1024, 'x') + "\r\n";
  while (SteadyClock::now() < end) {
    const int fd = Connect(port, 5);
    if (fd < 0) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    k->uploads_started.fetch_add(1);
    bool open = SendAll(fd, head.data(), head.size());
    bool answered = false;
    uint64_t sent = 0;
    // Like an attacker, go on sending after the answer, until the server
    // closes; look for the answer once a MiB.
    for (uint64_t i = 0; open && i < mib * 16 && SteadyClock::now() < end; ++i) {
      open = SendAll(fd, chunk.data(), chunk.size());
      if (open && ++sent % 16 == 0) {
        k->upload_mib_sent.fetch_add(1);
        char buf[64];
        if (!answered && ::recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK) >= 12) {
          answered = true;
          if (std::strncmp(buf, "HTTP/1.1 413", 12) == 0) k->upload_413.fetch_add(1);
        }
      }
    }
    if (open) SendAll(fd, "0\r\n\r\n", 5);
    if (!answered && ReadStatus(fd) == 413) k->upload_413.fetch_add(1);
    ::close(fd);
  }
}

void ManyHeaders(int port, int count, SteadyClock::time_point end, Counts* k) {
  std::string request = "POST /webhooks/receiptroller HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < count; ++i) request += "X-H" + std::to_string(i) + ": v\r\n";
  request += "Content-Length: 0\r\n\r\n";
  while (SteadyClock::now() < end) {
    const int fd = Connect(port, 5);
    if (fd < 0) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    k->header_requests.fetch_add(1);
    SendAll(fd, request.data(), request.size());  // the server may close early
    if (ReadStatus(fd) == 431) k->header_431.fetch_add(1);
    ::close(fd);
  }
}

std::string EventIdOf(const std::string& body) {
  const std::string needle = "\"event_id\":\"";
  const size_t at = body.find(needle);
  if (at == std::string::npos) return "";
  const size_t start = at + needle.size();
  return body.substr(start, body.find('"', start) - start);
}

std::vector<eventfold::sim::Outgoing> SignedDeliveries(size_t n) {
  eventfold::sim::HistoryOptions ho;
  ho.seed = 20261201;
  ho.receipts = static_cast<int>(n / 1.2) + 100;
  ho.duplicate_rate = 0;
  ho.impossible_rate = 0;
  ho.malformed = 0;
  ho.conflicts = 0;
  eventfold::sim::History h = eventfold::sim::GenerateHistory(ho);
  std::vector<eventfold::sim::Outgoing> out;
  for (size_t i = 0; i < n && i < h.events.size(); ++i) {
    const std::string& body = h.events[i];
    out.push_back(
        eventfold::sim::Outgoing{eventfold::Delivery{{{"X-RR-Event-Id", EventIdOf(body)}}, body}});
  }
  return out;
}

int Run(const Config& c) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  const std::vector<eventfold::sim::Outgoing> deliveries =
      SignedDeliveries(static_cast<size_t>(c.rate * c.seconds));
  Serve serve = StartServe(c);
  if (serve.port == 0) {
    std::fprintf(stderr, "eventfold-http-attack: serve did not start (log in %s)\n",
                 serve.dir.c_str());
    if (serve.pid > 0) StopServe(serve);
    return 2;
  }
  const long rss_start = StatusKib(serve.pid, "VmRSS:");
  std::printf("serve pid %d on 127.0.0.1:%d, RSS at start %.1f MiB\n", serve.pid, serve.port,
              static_cast<double>(rss_start) / 1024);

  Counts k;
  // The attack starts first and runs one second past the signed sender.
  const auto end = SteadyClock::now() + milliseconds(static_cast<int64_t>(c.seconds * 1000) + 3000);
  std::vector<std::thread> attackers;
  attackers.emplace_back(Slowloris, serve.port, c.slowloris, end, &k);
  for (int i = 0; i < c.uploads; ++i) {
    attackers.emplace_back(ChunkedUploads, serve.port, c.upload_mib, end, &k);
  }
  attackers.emplace_back(ManyHeaders, serve.port, c.header_count, end, &k);
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      const long rss = StatusKib(serve.pid, "VmRSS:");
      if (rss > k.peak_rss_sampled_kib) k.peak_rss_sampled_kib = rss;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  std::this_thread::sleep_for(milliseconds(2000));  // the attack in full swing

  eventfold::sim::SenderOptions so;
  so.port = serve.port;
  so.path = kPath;
  so.secret = kSecret;
  so.connections = 16;
  so.rate_per_second = c.rate;
  so.timeout_seconds = 10;
  const eventfold::sim::SendReport r = eventfold::sim::Send(deliveries, so);

  for (std::thread& t : attackers) t.join();
  sampling = false;
  sampler.join();
  const long hwm = StatusKib(serve.pid, "VmHWM:");
  const int exit_status = StopServe(serve);
  std::error_code ec;
  fs::remove_all(serve.dir, ec);

  const auto it = r.attempts_by_status.find(200);
  const uint64_t ok = it == r.attempts_by_status.end() ? 0 : it->second;
  const double answered = r.attempts > 0 ? 100.0 * static_cast<double>(ok) / r.attempts : 0;
  const double p50 = eventfold::sim::Quantile(r.latencies, 0.5) * 1e3;
  const double p99 = eventfold::sim::Quantile(r.latencies, 0.99) * 1e3;
  const double peak_mib = static_cast<double>(hwm) / 1024;
  std::string statuses;
  for (const auto& [status, n] : r.attempts_by_status) {
    statuses += " " + std::to_string(status) + ":" + std::to_string(n);
  }
  std::printf("signed sender: %zu deliveries at %.0f/s, %" PRIu64
              " attempts (status:count%s), %.2f%% "
              "answered 200, p50 %.2f ms, p99 %.2f ms, over %.1f s\n",
              deliveries.size(), c.rate, r.attempts, statuses.c_str(), answered, p50, p99,
              r.seconds);
  std::printf("slowloris: %" PRIu64 " connections opened, %" PRIu64
              " closed by the server (%" PRIu64 " with 408)\n",
              k.slow_opened.load(), k.slow_closed.load(), k.slow_408.load());
  std::printf("chunked uploads: %" PRIu64 " started, %" PRIu64 " MiB sent, %" PRIu64
              " answered 413\n",
              k.uploads_started.load(), k.upload_mib_sent.load(), k.upload_413.load());
  std::printf("%d-header requests: %" PRIu64 " sent, %" PRIu64 " answered 431\n", c.header_count,
              k.header_requests.load(), k.header_431.load());
  std::printf("server RSS: start %.1f MiB, sampled peak %.1f MiB, VmHWM %.1f MiB; exit status %d\n",
              static_cast<double>(rss_start) / 1024,
              static_cast<double>(k.peak_rss_sampled_kib.load()) / 1024, peak_mib, exit_status);
  std::printf("RESULT answered_pct=%.3f p50_ms=%.3f p99_ms=%.3f peak_rss_mib=%.1f attempts=%" PRIu64
              " ok=%" PRIu64 " slow_opened=%" PRIu64 " upload_mib=%" PRIu64
              " header_requests=%" PRIu64 "\n",
              answered, p50, p99, peak_mib, r.attempts, ok, k.slow_opened.load(),
              k.upload_mib_sent.load(), k.header_requests.load());
  const bool met = answered >= 99.0 && p99 < 50.0 && peak_mib < 256.0;
  std::printf("targets (>= 99%% answered 200, p99 < 50 ms, peak RSS < 256 MiB): %s\n",
              met ? "met" : "NOT MET");
  return met ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  c.cli = EVENTFOLD_ATTACK_CLI;
  CLI::App app{
      "eventfold-http-attack: slowloris, chunked uploads and huge headers against "
      "`eventfold serve` on 127.0.0.1, with a signing sender measured under them"};
  app.add_option("--cli", c.cli, "the eventfold command")->capture_default_str();
  app.add_option("--seconds", c.seconds, "length of the signed run")->capture_default_str();
  app.add_option("--rate", c.rate, "signed deliveries per second")->capture_default_str();
  app.add_option("--slowloris", c.slowloris, "slowloris connections")->capture_default_str();
  app.add_option("--uploads", c.uploads, "parallel chunked uploads")->capture_default_str();
  app.add_option("--upload-mib", c.upload_mib, "size of each upload")->capture_default_str();
  app.add_option("--header-count", c.header_count, "header fields per request")
      ->capture_default_str();
  app.add_option("--serve-arg", c.serve_args, "extra argument for `eventfold serve` (repeat)");
  CLI11_PARSE(app, argc, argv);
  return Run(c);
}
