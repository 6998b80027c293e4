// GrowingBody: a Beast body type for request bodies read into a
// std::string that grows with the bytes that came, where Beast's
// string_body reserves a declared Content-Length whole as the body begins.
// With that, a client that declares 1 MiB and sends nothing holds 1 MiB of
// the server's body budget (or of memory) for as long as it may stall: 64
// such connections, at 20 KB of headers a minute, refused every sender.
//
// The buffer doubles as bytes come, never past the declared length:
// NextBodyCapacity() says what a put of some bytes grows it to, so the
// server can charge the budget before the bytes are taken. Not
// thread-safe: one request's body, on its connection's thread.

#ifndef EVENTFOLD_HTTP_GROWING_BODY_H_
#define EVENTFOLD_HTTP_GROWING_BODY_H_

#include <algorithm>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstdint>
#include <limits>
#include <string>

namespace eventfold::http {

// The capacity a body buffer of `capacity` grows to for `needed` bytes in
// all, `limit` the body's declared length (or no limit): unchanged when
// they fit, else twice as much (for few reallocations), at most `limit`
// and at least `needed`.
inline size_t NextBodyCapacity(size_t capacity, size_t needed, uint64_t limit) {
  if (needed <= capacity) return capacity;
  const uint64_t doubled = std::min<uint64_t>(limit, 2 * static_cast<uint64_t>(capacity));
  return std::max<size_t>(needed, static_cast<size_t>(doubled));
}

struct GrowingBody {
  using value_type = std::string;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      limit_ = length ? *length : std::numeric_limits<uint64_t>::max();
      ec = {};
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      const size_t extra = boost::beast::buffer_bytes(buffers);
      const size_t size = body_.size();
      const size_t capacity = NextBodyCapacity(body_.capacity(), size + extra, limit_);
      if (capacity > body_.capacity()) {
        // A fresh string reserves exactly (std::string::reserve on this one
        // would round up to twice its old capacity, past the limit).
        std::string grown;
        grown.reserve(capacity);
        grown.append(body_);
        body_.swap(grown);
      }
      body_.resize(size + extra);
      char* out = body_.data() + size;
      for (const auto b : boost::beast::buffers_range_ref(buffers)) {
        std::copy_n(static_cast<const char*>(b.data()), b.size(), out);
        out += b.size();
      }
      ec = {};
      return extra;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
    uint64_t limit_ = std::numeric_limits<uint64_t>::max();
  };
};

}  // namespace eventfold::http

#endif  // EVENTFOLD_HTTP_GROWING_BODY_H_
