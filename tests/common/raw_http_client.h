// RawClient: a blocking client socket to 127.0.0.1:port for raw-socket HTTP
// tests. It writes exact bytes and reads with every wait bounded, so a test
// can assert status lines, header bytes and whether the server closed.
// Not thread-safe: one test thread per client.

#ifndef EVENTFOLD_TESTS_COMMON_RAW_HTTP_CLIENT_H_
#define EVENTFOLD_TESTS_COMMON_RAW_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace eventfold::test_util {

using std::chrono::milliseconds;

// A client socket to 127.0.0.1:port; every read waits at most `limit`.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until `done(received)` holds, the peer closes (closed() turns
  // true) or `limit` passes.
  template <typename Done>
  std::string ReadUntil(Done done, milliseconds limit = milliseconds(3000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done(received_) && !closed_) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now())
              .count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      char buf[16384];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  // Reads until `count` complete answers (status line, headers, body by
  // Content-Length) have arrived.
  std::vector<int> ReadAnswers(size_t count, milliseconds limit = milliseconds(3000)) {
    ReadUntil([&](const std::string& r) { return Statuses(r).size() >= count; }, limit);
    return Statuses(received_);
  }
  // Reads until the peer closes; true if it did within `limit`.
  bool WaitForClose(milliseconds limit = milliseconds(3000)) {
    ReadUntil([](const std::string&) { return false; }, limit);
    return closed_;
  }
  bool closed() const { return closed_; }
  const std::string& received() const { return received_; }

  // The statuses of the complete answers in `bytes`, in order.
  static std::vector<int> Statuses(const std::string& bytes) {
    std::vector<int> out;
    size_t at = 0;
    while (true) {
      if (bytes.compare(at, 9, "HTTP/1.1 ") != 0) break;
      const size_t end = bytes.find("\r\n\r\n", at);
      if (end == std::string::npos) break;
      const int status = std::atoi(bytes.c_str() + at + 9);
      size_t length = 0;
      const std::string head = bytes.substr(at, end - at);
      const size_t cl = head.find("Content-Length: ");
      if (cl != std::string::npos) length = std::strtoul(head.c_str() + cl + 16, nullptr, 10);
      if (bytes.size() < end + 4 + length) break;
      out.push_back(status);
      at = end + 4 + length;
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_RAW_HTTP_CLIENT_H_
