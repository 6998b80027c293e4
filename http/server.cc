// eventfold::HttpServer on Boost.Beast: one Session per connection. Each I/O
// thread runs an io_context of its own, and a connection lives on one of
// them (round robin at accept), so a session's handlers run on one thread
// and need no strand. A request the receiver takes without blocking
// (Receiver::TryHandleWithoutBlocking) is handed to it on that thread; the
// others run on the WorkerPool. Answers are posted back to the session's
// io_context.
//
// Why not one io_context shared by the I/O threads: its scheduler hands
// ready sockets and posted answers from the thread in epoll_wait to the
// other through a mutex and a condition variable. In the bench's kBuffered
// run the I/O threads made 2.1 futex calls a request that way, and 1.3 with
// a loop each (docs/BENCHMARKS.md, "An event loop per I/O thread").

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/system/system_error.hpp>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "core/field_values.h"
#include "core/start_thread.h"
#include "core/thread_annotations.h"
#include "eventfold/http_server.h"
#include "eventfold/ingest.h"
#include "eventfold/projection.h"
#include "http/growing_body.h"
#include "http/request_target.h"
#include "http/worker_pool.h"

namespace eventfold {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

// What the HTTP layer refuses by itself, before the receiver sees a request.
enum Refusal : size_t {
  kHeaderTooLarge,
  kTooManyFields,
  kUrlTooLong,
  kBadFraming,
  kBodyTooLarge,
  kHeaderTimeout,
  kBodyTooSlow,
  kConnectionLimit,
  kQueueFull,
  kBodyMemoryFull,
  kHeaderMemoryFull,
  kBadVersion,
  kRefusalCount
};
constexpr const char* kRefusalNames[kRefusalCount] = {
    "header_too_large", "too_many_header_fields", "url_too_long",
    "bad_framing",      "body_too_large",         "header_timeout",
    "body_too_slow",    "connection_limit",       "worker_queue_full",
    "body_memory_full", "header_memory_full",     "http_version_not_supported"};

// After an answer that closes the connection, unread request bytes would
// turn our close into a reset that can destroy the answer in flight; read
// and drop at most this much, for at most this long, before closing.
// (A client that sends its whole body before reading, like most, then still
// gets the 413; the bytes are dropped into a fixed buffer, never held.)
constexpr size_t kLingerBytes = 8 << 20;
constexpr std::chrono::milliseconds kLingerTime{2000};

// The most one read of a body takes from the socket.
constexpr size_t kBodyReadBytes = 16 << 10;

// A header's bytes up to this are not counted against max_header_memory;
// past it, a connection holds HeaderShare() of it.
constexpr size_t kUncountedHeaderBytes = 4096;
// The most a connection's header holds: its read buffer (the limit plus a
// margin) and the parser's copy of the fields.
inline size_t HeaderShare(const HttpServerOptions& o) { return 2 * o.max_header_bytes + 8 * 1024; }

// Sent (non-blocking, best effort) on a connection over max_connections;
// made once per server, with its Server field.
std::string ConnectionLimitAnswer(const std::string& server_header) {
  const std::string body =
      "{\"status\":\"overloaded\",\"error\":\"too many open connections, retry\"}";
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
         (server_header.empty() ? "" : "Server: " + server_header + "\r\n") +
         "Retry-After: 1\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

}  // namespace

class Session;

class HttpServer::Impl {
 public:
  Impl(Receiver* rx, HttpServerOptions options)
      : rx_(rx),
        opt_(std::move(options)),
        connection_limit_answer_(ConnectionLimitAnswer(opt_.server_header)) {}

  Status Start();
  void Stop();
  std::string MetricsText() const;

  void Count(Refusal r) { refused_[r].fetch_add(1, std::memory_order_relaxed); }
  // The memory of request bodies being read or served, all connections
  // together, against max_body_memory: TakeBodyMemory() adds `bytes` when
  // they fit (false, nothing taken, when not); ReturnBodyMemory() gives
  // them back.
  [[nodiscard]] bool TakeBodyMemory(size_t bytes) {
    return Take(&body_memory_, opt_.max_body_memory, bytes);
  }
  void ReturnBodyMemory(size_t bytes) { body_memory_.fetch_sub(bytes, std::memory_order_relaxed); }
  // The same for headers past their first kUncountedHeaderBytes, against
  // max_header_memory.
  [[nodiscard]] bool TakeHeaderMemory(size_t bytes) {
    return Take(&header_memory_, opt_.max_header_memory, bytes);
  }
  void ReturnHeaderMemory(size_t bytes) {
    header_memory_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  void CountHangUp() { hung_up_.fetch_add(1, std::memory_order_relaxed); }
  void Register(const std::shared_ptr<Session>& s);
  void Unregister(Session* s);
  // Answers a receiver owes through HandleAsync (it may give them from its
  // own threads, after the worker that asked is done): Stop() waits for them,
  // as it waits for the workers, before the event loop goes.
  void OweAnswer();
  void PaidAnswer();
  // OweAnswer() for an I/O thread, which may still serve a request after
  // Stop() has waited for the workers: false (nothing owed) once Stop() has
  // begun waiting for the answers owed, so none is owed after that wait.
  [[nodiscard]] bool TryOweAnswer();
  // Appends one whole line to the access log (one write(), under this
  // server's lock, so lines of concurrent requests never interleave).
  void WriteAccessLog(const std::string& line) EXCLUDES(log_mu_);

  Receiver* const rx_;
  const HttpServerOptions opt_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<http::WorkerPool> pool_;
  int port_ = 0;

 private:
  // Adds `bytes` to `*budget` when the sum stays within `limit`.
  static bool Take(std::atomic<size_t>* budget, size_t limit, size_t bytes);
  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  // Posts `fn` to every open session's loop.
  void ForEachSession(void (Session::*fn)());
  bool WaitForNoConnections(std::chrono::milliseconds timeout);
  void WaitForNoAnswersOwed();

  const std::string connection_limit_answer_;
  std::array<std::atomic<uint64_t>, kRefusalCount> refused_{};
  std::atomic<uint64_t> hung_up_{0};  // connections closed by close_on_hang_up
  std::atomic<size_t> connections_{0};
  std::atomic<size_t> body_memory_{0};    // see TakeBodyMemory
  std::atomic<size_t> header_memory_{0};  // see TakeHeaderMemory
  Mutex log_mu_;                          // serializes writes to opt_.access_log
  Mutex mu_;
  std::condition_variable cv_;  // with mu_: sessions_ or answers_owed_ reached zero
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_ GUARDED_BY(mu_);
  size_t answers_owed_ GUARDED_BY(mu_) = 0;
  bool answers_closed_ GUARDED_BY(mu_) = false;  // set by Stop()
  std::vector<std::thread> threads_;
  // The loop of the next accepted connection. Accept() runs before the
  // threads start, then only on loops_[0], where accepts complete.
  size_t next_loop_ = 0;
  // Last, so they are destroyed first: pending handlers own sessions, whose
  // destructors use the members above. loops_[0] also accepts.
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::optional<tcp::acceptor> acceptor_;
  std::optional<asio::steady_timer> accept_retry_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket)
      : s_(server),
        stream_(std::move(socket)),
        deadline_(stream_.get_executor()),
        buffer_(server.opt_.max_header_bytes + 8 * 1024) {
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string();
  }
  ~Session() {
    ReleaseBody();
    ReleaseHeader();
    s_.Unregister(this);
  }

  void Start() { WaitForRequest(); }

  // Stop(): a connection between requests, still reading a request's header
  // or lingering after its last answer has nothing in flight: close it now.
  void OnStop() {
    if (phase_ == Phase::kIdle || phase_ == Phase::kHeader || phase_ == Phase::kClosing) Close();
  }
  // Stop() after the drain time: close whatever is left.
  void ForceClose() { Close(); }

 private:
  enum class Phase { kIdle, kHeader, kBody, kServing, kClosing };
  using Parser = bhttp::request_parser<http::GrowingBody>;

  // Deadlines: Beast's own stream timeout closes the socket when it fires,
  // which leaves no way to answer 408; this timer only cancels the pending
  // operation, whose handler then sees TimedOut(). A generation number keeps
  // a timer that fired just as its operation finished from cancelling the
  // next one.
  void Arm(std::chrono::milliseconds limit) {
    const uint64_t generation = ++generation_;
    timed_out_ = false;
    deadline_.expires_after(limit);
    deadline_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->generation_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }
  void Disarm() {
    ++generation_;
    deadline_.cancel();
  }
  bool TimedOut(beast::error_code ec) const {
    return timed_out_ && ec == asio::error::operation_aborted;
  }

  // Between requests: wait for the next one's first byte under the idle
  // timeout (unless pipelined bytes are buffered already). An idle
  // connection holds no buffer and no parser: it waits for readability,
  // not with a read into memory of its own.
  void WaitForRequest() {
    if (s_.stopping_) return Close();
    ReleaseBody();
    ReleaseHeader();
    parser_.reset();
    if (buffer_.size() > 0) return ReadHeader();
    buffer_.shrink_to_fit();
    phase_ = Phase::kIdle;
    // A connection that has asked nothing yet may wait for its first byte
    // only as long as a header may take: otherwise sockets that never send
    // would each hold a place under max_connections for the idle timeout.
    Arm(answered_any_ ? s_.opt_.idle_timeout
                      : std::min(s_.opt_.idle_timeout, s_.opt_.header_timeout));
    AwaitFirstByte();
  }

  // The idle wait itself, under the deadline WaitForRequest armed. The
  // reactor can report a socket readable with nothing to read (an edge left
  // from bytes a previous read already took): starting the header read then
  // would answer a connection that sent nothing 408 at the header timeout,
  // which the bench's 10,000 idle connections showed in half its runs. So
  // the header read starts only once a byte (or the end of the stream) is
  // there to read; otherwise the wait goes on, under the same deadline.
  void AwaitFirstByte() {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          if (ec) return self->Close();
          char byte;
          const ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return self->AwaitFirstByte();
          self->ReadHeader();
        });
  }

  // The header is read by hand rather than with async_read_header: on a
  // refusal the bytes seen are still in the buffer (to tell an overlong
  // request line, 414, from an overlong header, 431).
  void ReadHeader() {
    phase_ = Phase::kHeader;
    head_ = false;
    NewParser();
    request_line_bytes_ = 0;
    Arm(s_.opt_.header_timeout);
    ParseHeader();
  }

  void NewParser() {
    parser_.emplace();
    parser_->eager(false);
    parser_->header_limit(static_cast<std::uint32_t>(s_.opt_.max_header_bytes));
    // No body limit while the header is read: Beast would turn a declared
    // length over it into an error, and its "no limit" (boost::none) compares
    // below every length. OnHeader() answers that 413 itself and sets the
    // limit for the body.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  // What the request line's HTTP-version asks for, once Beast refused it.
  enum class RefusedVersion {
    kServedAs11,  // HTTP/1.2 .. HTTP/1.9: rewritten to say 1.1
    kOtherMajor,  // well formed, not HTTP/1.x: 505
    kMalformed,   // not "HTTP/" DIGIT "." DIGIT before the line's CRLF: 400
  };

  // RFC 9112 §2.3: a request of a higher minor version within HTTP/1 is
  // served as the highest one we implement, 1.1. Beast refuses every
  // version but 1.0 and 1.1, so such a request line (whole at the front of
  // the buffer when Beast refuses it) is rewritten to say 1.1, with a new
  // parser to read it again.
  RefusedVersion ServeHigherMinorAs11() {
    auto* data = static_cast<char*>(buffer_.data().data());
    const std::string_view seen(data, buffer_.size());
    // The request line's own end: a bare LF there is malformed (400).
    const size_t lf = seen.find('\n');
    if (lf == std::string_view::npos || lf == 0 || seen[lf - 1] != '\r') {
      return RefusedVersion::kMalformed;
    }
    const size_t end = lf - 1;
    constexpr std::string_view kName = " HTTP/";
    if (end < kName.size() + 3) return RefusedVersion::kMalformed;
    char* version = data + end - 3;  // "D.D" before the CRLF
    if (seen.substr(end - 3 - kName.size(), kName.size()) != kName || version[1] != '.' ||
        !std::isdigit(static_cast<unsigned char>(version[0])) ||
        !std::isdigit(static_cast<unsigned char>(version[2]))) {
      return RefusedVersion::kMalformed;
    }
    // 1.0 and 1.1 are refused only when the line is otherwise malformed.
    if (version[0] != '1') return RefusedVersion::kOtherMajor;
    if (version[2] < '2') return RefusedVersion::kMalformed;
    version[2] = '1';
    NewParser();
    return RefusedVersion::kServedAs11;
  }

  void ParseHeader() {
    // RFC 9112 §2.2: empty lines before a request line are ignored. They
    // count against the header limit like the request line.
    if (!parser_->got_some()) SkipEmptyLines();
    if (buffer_.size() > 0 && !AwaitingEmptyLineEnd()) {
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      if (ec == bhttp::error::bad_version) {
        switch (ServeHigherMinorAs11()) {
          case RefusedVersion::kServedAs11:
            return ParseHeader();
          case RefusedVersion::kOtherMajor:
            return VersionNotSupported();
          case RefusedVersion::kMalformed:
            break;  // 400, below
        }
      }
      if (ec != bhttp::error::need_more) {
        if (!ec) {
          // Beast's own header limit leaves out bytes it took earlier; this
          // is the whole request line and header, exactly. (Checked before
          // the bytes leave the buffer, where OnHeader looks for a line end.)
          if (request_line_bytes_ + used > s_.opt_.max_header_bytes) {
            return OnHeader(bhttp::error::header_limit);
          }
          // A header that came whole with earlier bytes (pipelined behind a
          // body) was read without the check below; the parser holds it now.
          if (request_line_bytes_ + used >= kUncountedHeaderBytes && !HoldHeader()) {
            return HeaderMemoryFull();
          }
          buffer_.consume(used);
        }
        return OnHeader(ec);
      }
      // Beast takes the request line as soon as it is whole, even while the
      // fields still need more: those bytes are the parser's now and must
      // not be fed again (they would read as a malformed field).
      buffer_.consume(used);
      request_line_bytes_ += used;
    }
    // The limit covers the request line and skipped empty lines too, which
    // Beast no longer sees. It also bounds the buffer, whose room is the
    // limit plus a margin.
    if (request_line_bytes_ + buffer_.size() > s_.opt_.max_header_bytes) {
      return OnHeader(bhttp::error::header_limit);
    }
    // Past its first bytes a header counts against the server's budget for
    // headers, before it may grow the buffer.
    if (request_line_bytes_ + buffer_.size() >= kUncountedHeaderBytes && !HoldHeader()) {
      return HeaderMemoryFull();
    }
    const size_t room = std::min<size_t>(4096, buffer_.max_size() - buffer_.size());
    stream_.async_read_some(buffer_.prepare(room),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnHeader(ec);
                              self->buffer_.commit(n);
                              self->ParseHeader();
                            });
  }

  // close_on_hang_up: while the answer is being made, waits for the socket
  // to turn readable. The end of the stream (or an error) means the client
  // hung up: the connection closes now, and Respond() drops the answer when
  // it comes. Bytes mean a pipelined request, read after this answer: the
  // watch ends. The waits are the same as AwaitFirstByte's.
  void WatchForHangUp() {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          if (ec || self->phase_ != Phase::kServing) return;
          char byte;
          const ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return self->WatchForHangUp();
          if (n > 0) return;
          self->s_.CountHangUp();
          self->Close();
        });
  }

  // Drops whole CRLF pairs from the front of the buffer.
  void SkipEmptyLines() {
    const auto* data = static_cast<const char*>(buffer_.data().data());
    size_t n = 0;
    while (n + 1 < buffer_.size() && data[n] == '\r' && data[n + 1] == '\n') n += 2;
    buffer_.consume(n);
    request_line_bytes_ += n;
  }
  // A lone CR at the front: an empty line's end may follow.
  bool AwaitingEmptyLineEnd() const {
    return !parser_->got_some() && buffer_.size() == 1 &&
           static_cast<const char*>(buffer_.data().data())[0] == '\r';
  }

  void OnHeader(beast::error_code ec) {
    started_ = SteadyClock::now();
    if (TimedOut(ec)) return Refuse(kHeaderTimeout, 408, "request header timeout");
    if (ec == bhttp::error::header_limit) {
      // Over the limit before the request line ended: the URL is the excess.
      const std::string_view seen(static_cast<const char*>(buffer_.data().data()), buffer_.size());
      if (request_line_bytes_ == 0 && seen.find('\n') == std::string_view::npos) {
        return Refuse(kUrlTooLong, 414, "request line too long");
      }
      return Refuse(kHeaderTooLarge, 431, "request header too large");
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec) return Refuse(kBadFraming, 400, "malformed request: " + ec.message());

    const auto& req = parser_->get();
    head_ = req.method() == bhttp::verb::head;
    if (req.target().size() > s_.opt_.max_url_bytes) {
      return Refuse(kUrlTooLong, 414, "request target too long");
    }
    size_t fields = 0, lengths = 0, encodings = 0, hosts = 0;
    for (const auto& f : req) {
      ++fields;
      if (f.name() == bhttp::field::content_length) ++lengths;
      if (f.name() == bhttp::field::transfer_encoding) ++encodings;
      if (f.name() == bhttp::field::host) ++hosts;
    }
    if (fields > s_.opt_.max_header_fields) {
      return Refuse(kTooManyFields, 431, "too many header fields");
    }
    // Fields a chunked body's trailer adds come after these; they are not
    // the request's header (RFC 9110 §6.5.1) and nobody gets them.
    header_fields_ = fields;
    keep_alive_ = req.keep_alive();
    http10_ = req.version() < 11;
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host field.
    if (hosts > 1 || (hosts == 0 && req.version() >= 11)) {
      return Refuse(kBadFraming, 400, hosts == 0 ? "no Host header" : "more than one Host header");
    }
    // ... and one whose value is not a host and port is 400 too.
    if (hosts == 1 && !http::ValidHost(TrimOws(StdView(req[bhttp::field::host])))) {
      return Refuse(kBadFraming, 400, "Host header is not a host[:port]");
    }
    // §3.2: a path, or an absolute URI (which a server must accept: it is
    // served as its path); "*" and an authority only for the methods that
    // take them, which the receiver answers 405.
    const std::string_view target = StdView(req.target());
    if (req.method() == bhttp::verb::connect ||
        (req.method() == bhttp::verb::options && target == "*")) {
      target_ = target;
    } else if (std::optional<std::string> path = http::OriginForm(target)) {
      target_ = std::move(*path);
    } else {
      return Refuse(kBadFraming, 400, "request target is not a path or an http(s) URI");
    }
    // Beast accepts equal duplicates ("5, 5" or two fields); RFC 9112 §6.3
    // lets us refuse them, and a smuggling front end relies on the leniency.
    if (lengths > 1 ||
        (lengths == 1 && req[bhttp::field::content_length].find(',') != beast::string_view::npos)) {
      return Refuse(kBadFraming, 400, "duplicate Content-Length");
    }
    if (encodings > 1 ||
        (encodings == 1 &&
         (!parser_->chunked() ||
          !EqualsIgnoringCase(TrimOws(StdView(req[bhttp::field::transfer_encoding])),
                              "chunked")))) {
      return Refuse(kBadFraming, 400, "Transfer-Encoding must be exactly chunked");
    }
    // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
    // framing (a 1.0 intermediary may have passed it on without knowing it).
    if (encodings == 1 && req.version() < 11) {
      return Refuse(kBadFraming, 400, "Transfer-Encoding in an HTTP/1.0 request");
    }
    if (const auto declared = parser_->content_length();
        declared && *declared > s_.opt_.max_body_bytes) {
      // Refused from the header alone: no body read, no "100 Continue".
      return Oversized(*declared);
    }
    parser_->body_limit(s_.opt_.max_body_bytes);  // chunked bodies: while reading
    if (parser_->is_done()) return Serve();
    declared_ = parser_->content_length().value_or(std::numeric_limits<uint64_t>::max());
    phase_ = Phase::kBody;
    rate_window_start_ = SteadyClock::now();
    rate_window_bytes_ = 0;
    // RFC 9110 §10.1.1: an HTTP/1.0 client's expectation is ignored.
    if (req.version() >= 11 && beast::iequals(req[bhttp::field::expect], "100-continue")) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      Arm(s_.opt_.write_timeout);
      return asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                               [self = shared_from_this()](beast::error_code wec, size_t) {
                                 if (wec) return self->Close();
                                 self->ParseBody();
                               });
    }
    ParseBody();
  }

  // The body is read by hand, as the header is: what it holds of the
  // server's budget is charged before each put of the bytes read (the
  // buffer grows with the bytes that came, http/growing_body.h), and while
  // no bytes come the connection waits for them holding nothing more. So a
  // declared length costs nothing until its bytes arrive.
  void ParseBody() {
    while (buffer_.size() > 0 && !parser_->is_done()) {
      const std::string& body = parser_->get().body();
      if (!HoldBody(
              http::NextBodyCapacity(body.capacity(), body.size() + buffer_.size(), declared_))) {
        return BodyMemoryFull();
      }
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (!SettleBody()) return BodyMemoryFull();
      if (ec == bhttp::error::need_more) break;
      if (ec) return OnBodyError(ec);
      if (used == 0) break;
    }
    // Beast takes a chunked body's data as it comes, so what it leaves
    // unread is the start of a framing line (a chunk size, the CRLF after
    // data, a trailer field). An LF there without its CR ends a line Beast
    // would wait on for a CRLF that is not coming: malformed (RFC 9112
    // §7.1), answered now rather than with 408 at the stall timeout.
    if (parser_->chunked() && !parser_->is_done() && HasBareLf()) {
      return Refuse(kBadFraming, 400, "malformed chunked framing: a line ends in a bare LF");
    }
    if (parser_->is_done()) {
      const auto fields =
          static_cast<size_t>(std::distance(parser_->get().begin(), parser_->get().end()));
      if (fields - header_fields_ > s_.opt_.max_header_fields) {
        return Refuse(kTooManyFields, 431, "too many trailer fields");
      }
      return Serve();
    }
    // The rate is asked of each window of body_grace, not of the body's
    // average: bytes sent fast at first would otherwise buy a connection
    // minutes of holding its buffer while it trickles the rest.
    const SteadyClock::time_point now = SteadyClock::now();
    const double seconds = std::chrono::duration<double>(now - rate_window_start_).count();
    if (seconds * 1000 >= static_cast<double>(s_.opt_.body_grace.count())) {
      const size_t got = parser_->get().body().size();
      if (static_cast<double>(got - rate_window_bytes_) <
          seconds * static_cast<double>(s_.opt_.min_body_bytes_per_second)) {
        return Refuse(kBodyTooSlow, 408, "request body too slow");
      }
      rate_window_start_ = now;
      rate_window_bytes_ = got;
    }
    // No read may stall longer than body_grace. The wait holds no buffer
    // of its own; the read after it finds its bytes there.
    Arm(s_.opt_.body_grace);
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this()](beast::error_code ec) {
                                  if (self->TimedOut(ec)) return self->BodyTooSlow();
                                  if (ec) return self->Close();
                                  self->ReadBodyBytes();
                                });
  }

  void ReadBodyBytes() {
    const size_t room = std::min<size_t>(kBodyReadBytes, buffer_.max_size() - buffer_.size());
    stream_.async_read_some(buffer_.prepare(room),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (self->TimedOut(ec)) return self->BodyTooSlow();
                              if (ec) return self->Close();  // the client went away
                              self->buffer_.commit(n);
                              self->ParseBody();
                            });
  }

  void BodyTooSlow() { Refuse(kBodyTooSlow, 408, "request body too slow"); }

  bool HasBareLf() const {
    const std::string_view unread(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    for (size_t lf = unread.find('\n'); lf != std::string_view::npos;
         lf = unread.find('\n', lf + 1)) {
      if (lf == 0 || unread[lf - 1] != '\r') return true;
    }
    return false;
  }

  void OnBodyError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      // A chunked body is cut off at the limit: its size is not known, only
      // that it exceeds the limit (0 says so to the receiver).
      return Oversized(0);
    }
    Refuse(kBadFraming, 400, "malformed request body: " + ec.message());
  }

  // Hands the request to the receiver on a worker.
  void Serve() {
    phase_ = Phase::kServing;
    Disarm();
    if (s_.opt_.close_on_hang_up) WatchForHangUp();
    auto& req = parser_->get();
    Headers headers = HeaderFields();
    std::string method(req.method_string());
    const std::string_view target = target_;
    const std::string_view path_alone = target.substr(0, target.find('?'));
    std::string path(s_.opt_.pass_query ? target : path_alone);
    const bool keep_alive = keep_alive_;
    body_bytes_ = req.body().size();
    request_line_ = method + " " + path;
    // RFC 9110 §9.3.2: HEAD is GET without the content. The receiver answers
    // the GET; Respond() sends its header alone (its Content-Length stays).
    if (head_) method = "GET";
    event_id_ = FindHeader(headers, "X-RR-Event-Id").value_or("");
    if (event_id_.empty()) event_id_ = FindHeader(headers, "webhook-id").value_or("");
    const bool metrics = method == "GET" && path_alone == "/metrics";
    // A delivery that goes on to the store is answered later, from the
    // store's batcher; whoever asked the receiver is free at once.
    Receiver::AnswerCallback answer = [self = shared_from_this(), keep_alive,
                                       metrics](HttpResponse r) mutable {
      HttpServer::Impl& owner = self->s_;
      if (metrics && r.status == 200) r.body += owner.MetricsText();
      auto executor = self->stream_.get_executor();
      // The session goes with the handler: once the answer is paid, Stop()
      // may go on, and nothing here may still hold the session.
      asio::post(executor, [self = std::move(self), r = std::move(r), keep_alive]() mutable {
        self->Respond(std::move(r), !keep_alive);
      });
      owner.PaidAnswer();
    };
    // A receiver that can start the work without waiting does it here, on
    // the loop's thread: no hand-off to a worker and back, which cost a
    // fifth of the CPU of a kBuffered request (docs/BENCHMARKS.md, "The
    // receiver's checks on the event loop").
    if (s_.TryOweAnswer()) {
      if (s_.rx_->TryHandleWithoutBlocking(method, path, headers, req.body(), answer)) return;
      s_.PaidAnswer();
    }
    // Otherwise a worker runs it (a GET, a large body, a receiver or sink
    // that may block).
    auto task = [self = shared_from_this(), method = std::move(method), path = std::move(path),
                 headers = std::move(headers), body = std::move(req.body()),
                 answer = std::move(answer)]() mutable {
      HttpServer::Impl& server = self->s_;
      server.OweAnswer();
      server.rx_->HandleAsync(method, path, std::move(headers), std::move(body), std::move(answer));
    };
    if (!s_.pool_->TrySubmit(std::move(task))) {
      s_.Count(kQueueFull);
      Respond(HttpResponse{503, "application/json",
                           "{\"status\":\"overloaded\",\"error\":\"all workers busy, retry\"}"},
              /*close=*/!keep_alive, /*retry_after=*/true);
    }
  }

  // 413: the receiver answers it (and quarantines a POST's), here when it
  // can without waiting, else on a worker.
  void Oversized(uint64_t bytes) {
    phase_ = Phase::kServing;
    Disarm();
    Headers headers = HeaderFields();
    std::string method(parser_->get().method_string());
    std::string path(std::string_view(target_).substr(0, target_.find('?')));
    request_line_ = method + " " + std::string(parser_->get().target());
    body_bytes_ = 0;
    if (s_.rx_->RefusesOversizedWithoutBlocking()) {
      return RespondOversized(s_.rx_->RefuseOversized(method, path, headers, bytes));
    }
    auto task = [self = shared_from_this(), method = std::move(method), path = std::move(path),
                 headers = std::move(headers), bytes] {
      HttpResponse r = self->s_.rx_->RefuseOversized(method, path, headers, bytes);
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->RespondOversized(std::move(r)); });
    };
    if (!s_.pool_->TrySubmit(std::move(task))) {
      RespondOversized(HttpResponse{413, "application/json",
                                    "{\"status\":\"too_large\",\"error\":\"body too large\"}"});
    }
  }

  // Sends the answer to an oversized request and closes. Counted as
  // body_too_large when it is a 413: the handler may answer something else
  // first (the admin API's 401 without its token).
  void RespondOversized(HttpResponse r) {
    if (r.status == 413) s_.Count(kBodyTooLarge);
    Respond(std::move(r), true);
  }

  // The request's header fields, without any a chunked body's trailer added.
  Headers HeaderFields() const {
    Headers headers;
    headers.reserve(header_fields_);
    for (const auto& f : parser_->get()) {
      if (headers.size() == header_fields_) break;
      headers.emplace_back(f.name_string(), f.value());
    }
    return headers;
  }
  static std::string_view StdView(beast::string_view v) { return {v.data(), v.size()}; }

  // An answer of the HTTP layer itself; the connection closes after it.
  void Refuse(Refusal why, int status, const std::string& message) {
    s_.Count(why);
    if (request_line_.empty()) request_line_ = "-";
    const char* word = status == 408   ? "timeout"
                       : status == 414 ? "uri_too_long"
                       : status == 431 ? "header_too_large"
                       : status == 503 ? "overloaded"
                       : status == 505 ? "http_version_not_supported"
                                       : "bad_request";
    Respond(
        HttpResponse{status, "application/json",
                     std::string("{\"status\":\"") + word + "\",\"error\":\"" + message + "\"}"},
        true, /*retry_after=*/status == 503);
  }

  // Counts `capacity` bytes of this request's body buffer against the
  // server's budget for bodies, before the buffer grows to it. False, with
  // nothing more taken, when it does not fit.
  [[nodiscard]] bool HoldBody(size_t capacity) {
    if (capacity <= body_held_) return true;
    if (!s_.TakeBodyMemory(capacity - body_held_)) return false;
    body_held_ = capacity;
    return true;
  }
  // After a put: the charge is what the buffer holds, no more (false when
  // it outgrew what was taken and the rest does not fit).
  [[nodiscard]] bool SettleBody() {
    const size_t capacity = parser_->get().body().capacity();
    if (capacity > body_held_) return HoldBody(capacity);
    s_.ReturnBodyMemory(body_held_ - capacity);
    body_held_ = capacity;
    return true;
  }
  void ReleaseBody() {
    s_.ReturnBodyMemory(body_held_);
    body_held_ = 0;
  }
  // Takes this connection's share of the server's budget for headers, once
  // per request. False when it does not fit.
  [[nodiscard]] bool HoldHeader() {
    if (header_held_ > 0) return true;
    if (!s_.TakeHeaderMemory(HeaderShare(s_.opt_))) return false;
    header_held_ = HeaderShare(s_.opt_);
    return true;
  }
  void ReleaseHeader() {
    s_.ReturnHeaderMemory(header_held_);
    header_held_ = 0;
  }
  void HeaderMemoryFull() {
    started_ = SteadyClock::now();  // OnHeader's, for the access log's latency
    Refuse(kHeaderMemoryFull, 503, "too many large request headers being read, retry");
  }
  void VersionNotSupported() {
    started_ = SteadyClock::now();  // OnHeader's, for the access log's latency
    Refuse(kBadVersion, 505, "HTTP version not supported: only HTTP/1.x is served");
  }
  void BodyMemoryFull() {
    Refuse(kBodyMemoryFull, 503, "too many request bodies being read, retry");
  }

  void Respond(HttpResponse r, bool close, bool retry_after = false) {
    if (phase_ == Phase::kClosing) return;
    // The access log names the body's event_id when the receiver read one.
    if (!r.event_id.empty()) event_id_ = std::move(r.event_id);
    close = close || s_.stopping_;
    FormatHead(r, close, retry_after);
    answer_body_ = std::move(r.body);
    Log(r.status);
    Arm(s_.opt_.write_timeout);
    // HEAD: the header alone, its Content-Length that of the GET's body.
    const std::array<asio::const_buffer, 2> out = {
        asio::buffer(answer_head_),
        asio::buffer(answer_body_.data(), head_ ? 0 : answer_body_.size())};
    asio::async_write(stream_, out,
                      [self = shared_from_this(), close](beast::error_code ec, size_t) {
                        self->OnWritten(ec, close);
                      });
  }

  // The status line and fields of an answer, into answer_head_ (whose
  // capacity a kept-alive connection reuses). Written by hand rather than
  // with Beast's response and serializer, which allocate a field list, the
  // message and the serializer for every answer; the bytes are the same as
  // Beast's: no Date or Server field, "Connection: close" only when closing.
  void FormatHead(const HttpResponse& r, bool close, bool retry_after) {
    const auto status = static_cast<bhttp::status>(r.status);
    const beast::string_view reason = bhttp::obsolete_reason(status);
    std::string& h = answer_head_;
    h.clear();
    h.append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ");
    h.append(reason.data(), reason.size()).append("\r\nContent-Type: ").append(r.content_type);
    if (!s_.opt_.server_header.empty()) h.append("\r\nServer: ").append(s_.opt_.server_header);
    if (retry_after) h.append("\r\nRetry-After: 1");
    for (const auto& [name, value] : r.headers) {
      // A line break in a receiver's header would end it and start another
      // of the client's choosing (response splitting): such a header is
      // not sent. Receivers escape what they put there.
      if (name.find_first_of("\r\n") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos) {
        continue;
      }
      h.append("\r\n").append(name).append(": ").append(value);
    }
    if (close) {
      h.append("\r\nConnection: close");
    } else if (http10_) {
      // RFC 9112 §9.3: an HTTP/1.0 client keeps a connection only when the
      // answer says so.
      h.append("\r\nConnection: keep-alive");
    }
    // RFC 9110 §8.6: no Content-Length on 1xx and 204 answers; 304 keeps
    // none either, as Beast's prepare_payload() does.
    const bool bodiless = r.status / 100 == 1 || r.status == 204 || r.status == 304;
    if (!bodiless) h.append("\r\nContent-Length: ").append(std::to_string(r.body.size()));
    h.append("\r\n\r\n");
  }

  void OnWritten(beast::error_code ec, bool close) {
    std::string().swap(answer_body_);  // an idle connection holds no answer
    if (ec) return Close();
    if (close) return Linger();
    // The next request's log line names nothing of this one's, whatever
    // becomes of it (the HTTP layer may refuse it before it has a body).
    request_line_.clear();
    event_id_.clear();
    body_bytes_ = 0;
    answered_any_ = true;
    WaitForRequest();
  }

  void Log(int status) {
    if (s_.opt_.access_log == nullptr) return;
    const double ms =
        std::chrono::duration<double, std::milli>(SteadyClock::now() - started_).count();
    char latency[32];
    std::snprintf(latency, sizeof(latency), "%.3fms", ms);
    std::string line = FormatTimestamp(SystemClock()->NowMicros());
    line.append(" ").append(remote_).append(" ").append(request_line_);
    line.append(" ").append(std::to_string(status)).append(" ");
    line.append(std::to_string(body_bytes_)).append("B ").append(latency);
    if (!event_id_.empty()) {
      // A client's own bytes (the header's event id, before any signature
      // check): a space, control byte or backslash in it is written \xNN,
      // so it cannot make fields of its own in the line.
      line.push_back(' ');
      for (const char c : event_id_) {
        const auto b = static_cast<unsigned char>(c);
        if (b > 0x20 && b != 0x7f && c != '\\') {
          line.push_back(c);
          continue;
        }
        char escaped[5];
        std::snprintf(escaped, sizeof(escaped), "\\x%02x", b);
        line.append(escaped);
      }
    }
    line.push_back('\n');
    s_.WriteAccessLog(line);
  }

  // Half-closes, drops what the client still sends (bounded), then closes.
  void Linger() {
    phase_ = Phase::kClosing;
    // Nothing of the request is needed any more.
    ReleaseBody();
    parser_.reset();
    ReleaseHeader();  // the buffer is cleared for the bytes dropped below
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    lingered_ = 0;
    // While stopping, the drain matters more than a client still sending.
    Arm(s_.stopping_ ? std::chrono::milliseconds(100) : kLingerTime);
    LingerRead();
  }
  void LingerRead() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > kLingerBytes) return self->Close();
                              self->LingerRead();
                            });
  }

  void Close() {
    phase_ = Phase::kClosing;
    Disarm();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpServer::Impl& s_;
  beast::tcp_stream stream_;
  asio::steady_timer deadline_;
  uint64_t generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  Phase phase_ = Phase::kIdle;
  std::string remote_;
  SteadyClock::time_point started_;
  // The body's current rate window: when it began and the body's size then.
  SteadyClock::time_point rate_window_start_;
  size_t rate_window_bytes_ = 0;
  // The request's target in origin-form (OnHeader), and what its body holds
  // of the server's budget (HoldBody).
  std::string target_;
  size_t body_held_ = 0;
  // The body's declared length (Content-Length), else no limit.
  uint64_t declared_ = std::numeric_limits<uint64_t>::max();
  size_t header_held_ = 0;  // of the server's budget for headers (HoldHeader)
  size_t lingered_ = 0;
  bool head_ = false;  // the request being answered is a HEAD
  // The request's own header fields (those after them came in a trailer),
  // and whether it keeps the connection open, both as its header said.
  size_t header_fields_ = 0;
  bool keep_alive_ = true;
  bool http10_ = false;        // the request is HTTP/1.0
  bool answered_any_ = false;  // this connection has had an answer
  // The answer being written.
  std::string answer_head_, answer_body_;
  // For the access log.
  std::string request_line_, event_id_;
  size_t body_bytes_ = 0;
  // Bytes of this request's line the parser took before its fields were whole.
  size_t request_line_bytes_ = 0;

  friend class HttpServer::Impl;
};

Status HttpServer::ValidateOptions(const HttpServerOptions& o) {
  if (o.io_threads < 1) {
    return Status::InvalidArgument("io_threads: must be >= 1, got " + std::to_string(o.io_threads));
  }
  if (o.workers < 1) {
    return Status::InvalidArgument("workers: must be >= 1, got " + std::to_string(o.workers));
  }
  if (o.max_connections < 1) return Status::InvalidArgument("max_connections: must be >= 1");
  if (o.max_header_memory < HeaderShare(o)) {
    return Status::InvalidArgument(
        "max_header_memory: must be at least one connection's share, "
        "2 * max_header_bytes + 8 KiB (" +
        std::to_string(HeaderShare(o)) + "), got " + std::to_string(o.max_header_memory));
  }
  if (o.max_body_memory < o.max_body_bytes) {
    return Status::InvalidArgument("max_body_memory: must be at least max_body_bytes (" +
                                   std::to_string(o.max_body_bytes) + "), got " +
                                   std::to_string(o.max_body_memory));
  }
  if (o.server_header.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument("server_header: holds a line break");
  }
  beast::error_code ec;
  (void)asio::ip::make_address(o.host, ec);
  if (ec) return Status::InvalidArgument("host: \"" + o.host + "\" is not an IP address");
  return Status::OK();
}

Status HttpServer::Impl::Start() {
  if (Status st = HttpServer::ValidateOptions(opt_); !st.ok()) {
    return st.WithContext("http server");
  }
  beast::error_code ec;
  const auto address = asio::ip::make_address(opt_.host, ec);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(opt_.port));
  // One thread per loop. The hint 1 tells asio so: a handler a loop's own
  // thread posts (most of a session's) goes to that thread's private queue,
  // without the shared queue's lock.
  if (!loops_.empty()) return Status::InvalidArgument("http server: already started");
  try {
    // Asio reports a loop it cannot make (no descriptor left for its epoll
    // or eventfd) only by throwing; this is the one place it can.
    for (int i = 0; i < opt_.io_threads; ++i) {
      loops_.push_back(std::make_unique<asio::io_context>(1));
    }
  } catch (const boost::system::system_error& e) {
    loops_.clear();
    return Status::IOError(std::string("http server: cannot make an event loop: ") + e.what());
  }
  acceptor_.emplace(*loops_[0]);
  const std::string where = opt_.host + ":" + std::to_string(opt_.port);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  tcp::endpoint bound;
  if (!ec) bound = acceptor_->local_endpoint(ec);
  if (ec) {
    acceptor_.reset();
    loops_.clear();  // a retry starts afresh
    return Status::IOError("cannot listen on " + where + ": " + ec.message());
  }
  port_ = bound.port();
  pool_ = std::make_unique<http::WorkerPool>(opt_.worker_queue);
  accept_retry_.emplace(*loops_[0]);
  for (auto& loop : loops_) work_.push_back(asio::make_work_guard(*loop));
  Accept();
  Status st = pool_->Start(static_cast<size_t>(opt_.workers));
  for (size_t i = 0; st.ok() && i < loops_.size(); ++i) {
    std::thread thread;
    st = StartThread(&thread, "the HTTP server's event loop", [&loop = *loops_[i]] { loop.run(); });
    if (st.ok()) threads_.push_back(std::move(thread));
  }
  if (!st.ok()) {
    // A thread the system refused: undo the rest, as if never started. The
    // loops stop first, so nothing runs beside the acceptor's close; a
    // connection one of them accepted meanwhile closes with its loop.
    work_.clear();
    for (auto& loop : loops_) loop->stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    beast::error_code ignored;
    acceptor_->close(ignored);
    pool_->Shutdown();
    accept_retry_.reset();
    acceptor_.reset();
    loops_.clear();  // with what they still hold, a retry starts afresh
  }
  return st;
}

void HttpServer::Impl::Accept() {
  asio::io_context& loop = *loops_[next_loop_];
  next_loop_ = (next_loop_ + 1) % loops_.size();
  acceptor_->async_accept(
      loop, [this](beast::error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (stopping_ || !acceptor_->is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE) and the like: retry shortly, not in a spin.
    accept_retry_->expires_after(std::chrono::milliseconds(50));
    accept_retry_->async_wait([this](beast::error_code) {
      if (!stopping_) Accept();
    });
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // small answers: no Nagle delay
  if (connections_.load() >= opt_.max_connections) {
    Count(kConnectionLimit);
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(connection_limit_answer_), ignored);
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    // Drop what the client sent already (a request is usually there), so the
    // close is a FIN after our answer and not a reset that could discard it.
    char scratch[4096];
    for (int i = 0; i < 16 && socket.read_some(asio::buffer(scratch), ignored) > 0; ++i) {
    }
    socket.close(ignored);
  } else {
    connections_.fetch_add(1);
    auto session = std::make_shared<Session>(*this, std::move(socket));
    Register(session);
    asio::dispatch(session->stream_.get_executor(), [session] { session->Start(); });
  }
  Accept();
}

void HttpServer::Impl::Register(const std::shared_ptr<Session>& s) {
  MutexLock lock(&mu_);
  sessions_.emplace(s.get(), s);
}

void HttpServer::Impl::Unregister(Session* s) {
  MutexLock lock(&mu_);
  sessions_.erase(s);
  connections_.fetch_sub(1);
  cv_.notify_all();
}

void HttpServer::Impl::ForEachSession(void (Session::*fn)()) {
  // Collected under the lock, used outside it: dropping the last reference
  // to a session runs its destructor, which takes the lock.
  std::vector<std::shared_ptr<Session>> open;
  {
    MutexLock lock(&mu_);
    for (auto& [raw, weak] : sessions_) {
      if (std::shared_ptr<Session> s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (std::shared_ptr<Session>& s : open) {
    asio::post(s->stream_.get_executor(), [s, fn] { ((*s).*fn)(); });
  }
}

bool HttpServer::Impl::Take(std::atomic<size_t>* budget, size_t limit, size_t bytes) {
  size_t held = budget->load(std::memory_order_relaxed);
  do {
    if (bytes > limit - held) return false;
  } while (!budget->compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return true;
}

void HttpServer::Impl::WriteAccessLog(const std::string& line) {
  MutexLock lock(&log_mu_);
  opt_.access_log->write(line.data(), static_cast<std::streamsize>(line.size()));
}

void HttpServer::Impl::OweAnswer() {
  MutexLock lock(&mu_);
  ++answers_owed_;
}

bool HttpServer::Impl::TryOweAnswer() {
  MutexLock lock(&mu_);
  if (answers_closed_) return false;
  ++answers_owed_;
  return true;
}

void HttpServer::Impl::PaidAnswer() {
  MutexLock lock(&mu_);
  if (--answers_owed_ == 0) cv_.notify_all();
}

void HttpServer::Impl::WaitForNoAnswersOwed() {
  MutexLock lock(&mu_);
  while (answers_owed_ != 0) cv_.wait(lock.native());
}

bool HttpServer::Impl::WaitForNoConnections(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!sessions_.empty()) {
    if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
      return sessions_.empty();
    }
  }
  return true;
}

void HttpServer::Impl::Stop() {
  if (threads_.empty()) return;
  stopping_ = true;
  asio::post(*loops_[0], [this] {
    beast::error_code ignored;
    acceptor_->close(ignored);
    accept_retry_->cancel();
  });
  ForEachSession(&Session::OnStop);
  if (!WaitForNoConnections(opt_.drain_timeout)) ForEachSession(&Session::ForceClose);
  // Answers the workers and the receiver still owe are posted to sessions
  // that are closing.
  pool_->Shutdown();
  {
    MutexLock lock(&mu_);
    answers_closed_ = true;
  }
  WaitForNoAnswersOwed();
  WaitForNoConnections(std::chrono::milliseconds(1000));
  work_.clear();
  for (auto& loop : loops_) loop->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

std::string HttpServer::Impl::MetricsText() const {
  std::string out =
      "# HELP eventfold_http_refused_total Requests and connections the HTTP layer refused "
      "itself, by reason.\n# TYPE eventfold_http_refused_total counter\n";
  for (size_t i = 0; i < kRefusalCount; ++i) {
    out += "eventfold_http_refused_total{reason=\"" + std::string(kRefusalNames[i]) + "\"} " +
           std::to_string(refused_[i].load(std::memory_order_relaxed)) + "\n";
  }
  out +=
      "# HELP eventfold_http_request_memory_bytes Memory held by request headers and bodies "
      "being read or served, as counted against max_header_memory and max_body_memory.\n"
      "# TYPE eventfold_http_request_memory_bytes gauge\n"
      "eventfold_http_request_memory_bytes{kind=\"header\"} " +
      std::to_string(header_memory_.load(std::memory_order_relaxed)) +
      "\neventfold_http_request_memory_bytes{kind=\"body\"} " +
      std::to_string(body_memory_.load(std::memory_order_relaxed)) + "\n";
  if (opt_.close_on_hang_up) {
    out +=
        "# HELP eventfold_http_hung_up_total Connections closed because the client hung up while "
        "its answer was being made.\n# TYPE eventfold_http_hung_up_total counter\n"
        "eventfold_http_hung_up_total " +
        std::to_string(hung_up_.load(std::memory_order_relaxed)) + "\n";
  }
  return out;
}

HttpServer::HttpServer(Receiver* receiver, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(receiver, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() { return impl_->Start(); }

int HttpServer::port() const { return impl_->port_; }

void HttpServer::Stop() { impl_->Stop(); }

std::string HttpServer::MetricsText() const { return impl_->MetricsText(); }

}  // namespace eventfold
