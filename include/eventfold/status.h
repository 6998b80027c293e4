// Status and Result<T>: how every eventfold call reports success or failure.
//
// A Status is either OK or carries a code and a message that names what went
// wrong (the field, the key, the file) and why. Result<T> holds either a value
// or a non-OK Status. No exception ever crosses the eventfold API: errors of
// the libraries underneath are converted to Status in one place each.
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from different threads freely, a single object needs external locking.

#ifndef EVENTFOLD_STATUS_H_
#define EVENTFOLD_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace eventfold {

class [[nodiscard]] Status {
 public:
  // Persisted nowhere, but shown to users; keep names stable.
  enum class Code {
    kOk = 0,
    kNotFound,
    kInvalidArgument,  // the caller's input was refused
    kCorruption,       // a stored record failed verification
    kIOError,          // the disk or the file system failed
    kBusy,             // another process or rebuild holds the store
    kUnavailable,      // the store is closing or closed, or the system refused a
                       // resource (a thread; OpenSSL's HMAC)
  };

  Status() = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return {Code::kNotFound, msg}; }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status Corruption(std::string_view msg) { return {Code::kCorruption, msg}; }
  static Status IOError(std::string_view msg) { return {Code::kIOError, msg}; }
  static Status Busy(std::string_view msg) { return {Code::kBusy, msg}; }
  static Status Unavailable(std::string_view msg) { return {Code::kUnavailable, msg}; }

  bool ok() const { return code_ == Code::kOk; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }

  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK", or "<code name>: <message>".
  std::string ToString() const;

  // Prefixes the message with context ("reading projection receipt/r1: ...").
  Status WithContext(std::string_view context) const;

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// Either a T or the Status that explains why there is none. value(), `*`
// and `->` require ok(). A Result made from an OK Status (a bug: it has no
// value) asserts in debug builds and holds kInvalidArgument otherwise, so
// `if (!r.ok()) return r.status();` never passes on an OK status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "a Result without a value needs an error");
    if (status_.ok()) status_ = Status::InvalidArgument("a Result was made from an OK Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_STATUS_H_
