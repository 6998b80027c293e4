// NdjsonOut: prints JSON lines to stdout in large writes. The read commands
// that stream a whole store (list, unrouted --list, feed) print one line per
// record; buffering them keeps a big store from costing one write each,
// while memory stays bounded by kFlushBytes.
//
// Thread-safety: none; one command uses one on its own thread.

#ifndef EVENTFOLD_TOOLS_NDJSON_OUT_H_
#define EVENTFOLD_TOOLS_NDJSON_OUT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace eventfold::cli {

class NdjsonOut {
 public:
  static constexpr size_t kFlushBytes = 1 << 16;

  NdjsonOut() = default;
  NdjsonOut(const NdjsonOut&) = delete;
  NdjsonOut& operator=(const NdjsonOut&) = delete;
  // Prints what is still held.
  ~NdjsonOut() { Flush(); }

  // Adds `json` and a newline; prints the buffer once it holds kFlushBytes.
  void Line(std::string_view json);
  // Prints and flushes what is held (before a message on stderr, say, so
  // the two streams stay in order on a terminal).
  void Flush();

 private:
  std::string buffer_;
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_NDJSON_OUT_H_
