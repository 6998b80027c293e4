// The client side of the idle keep-alive figure, run as a child process of
// the driver (so its descriptors do not count against the server's): opens
// N connections to 127.0.0.1:port, has each served one GET /healthz, prints
// "RESULT held=... answered=...", holds them idle for a while, prints how
// many the server still keeps open, and closes them.

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/driver/driver.h"

namespace eventfold::benchdrv {
namespace {

// One answer's status, read whole (header, then Content-Length bytes); -1 on
// a close, an error or a timeout (SO_RCVTIMEO) first.
int ReadOneAnswer(int fd) {
  std::string got;
  char buf[4096];
  while (true) {
    const size_t end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t cl = got.find("Content-Length: ");
      const size_t length = cl == std::string::npos || cl > end
                                ? 0
                                : std::strtoul(got.c_str() + cl + 16, nullptr, 10);
      if (got.size() >= end + 4 + length) {
        return got.compare(0, 9, "HTTP/1.1 ") == 0 ? std::atoi(got.c_str() + 9) : -1;
      }
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return -1;
    got.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

void RaiseFdLimit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int ChildIdle(int port, uint64_t connections, double hold_seconds) {
  RaiseFdLimit();
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fds;
  fds.reserve(connections);
  uint64_t connect_errors = 0;
  const auto start = SteadyClock::now();
  for (uint64_t i = 0; i < connections; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      ++connect_errors;
      break;  // out of descriptors: report what is held
    }
    const timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
      ++connect_errors;
      ::close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  uint64_t answered = 0;
  for (int fd : fds) answered += ReadOneAnswer(fd) == 200 ? 1 : 0;
  std::printf("RESULT held=%zu answered=%" PRIu64 " connect_errors=%" PRIu64 " open_seconds=%.2f\n",
              fds.size(), answered, connect_errors,
              std::chrono::duration<double>(SteadyClock::now() - start).count());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(hold_seconds));
  // Still open: nothing to read and no end of stream.
  // The others, by what the server did: answered something (its status
  // line is printed), closed (end of stream), or reset.
  uint64_t still_open = 0, closed_answered = 0, closed_eof = 0, closed_error = 0;
  std::string first_unasked;
  for (int fd : fds) {
    char b[64];
    const ssize_t n = ::recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ++still_open;
    } else if (n > 0) {
      if (closed_answered++ == 0) {
        first_unasked.assign(b, static_cast<size_t>(n));
        first_unasked = first_unasked.substr(0, first_unasked.find('\r'));
        for (char& c : first_unasked) c = c == ' ' ? '_' : c;
      }
    } else if (n == 0) {
      ++closed_eof;
    } else {
      ++closed_error;
    }
  }
  std::printf("RESULT still_open=%" PRIu64 " closed_answered=%" PRIu64 " closed_eof=%" PRIu64
              " closed_error=%" PRIu64 " first_unasked=%s\n",
              still_open, closed_answered, closed_eof, closed_error,
              first_unasked.empty() ? "-" : first_unasked.c_str());
  std::fflush(stdout);
  for (int fd : fds) ::close(fd);
  return 0;
}

}  // namespace eventfold::benchdrv
