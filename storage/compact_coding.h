// Compact coding: the primitives of the record encodings that formats 7
// and 8 write for the five values of every accepted event (storage/record_codec.h).
//
//   varint  LEB128, 7 bits a byte, low first, at most 10 bytes
//   zigzag  a signed value as the varint of (v << 1) ^ (v >> 63)
//   fixed64 8 bytes, little-endian (times: 51 significant bits, so a varint
//           would be as long and slower)
//   string  varint length, then the bytes
//
// A CompactReader checks every length against what is left before it reads,
// and stops at its first failure, remembering which field failed: a damaged
// value is reported naming the field, never read past its end.
//
// Written here rather than taken from a library: Debian 12's LevelDB does not
// install its coding.h, and protobuf's coded streams would bring a code
// generator and a runtime for five fixed layouts. Pure functions and
// single-owner objects; thread-compatible.

#ifndef EVENTFOLD_STORAGE_COMPACT_CODING_H_
#define EVENTFOLD_STORAGE_COMPACT_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace eventfold::storage {

inline void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

inline void PutZigzag(std::string* out, int64_t v) {
  PutVarint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

inline void PutFixed64(std::string* out, int64_t v) {
  char buf[8];
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
  out->append(buf, 8);
}

inline void PutString(std::string* out, std::string_view s) {
  PutVarint(out, s.size());
  out->append(s);
}

// Reads fields front to back from one value. Each Get returns false, and
// every later one too, once a field is missing or runs past the end;
// failed_field() then names the first that did.
class CompactReader {
 public:
  explicit CompactReader(std::string_view in) : in_(in) {}

  bool Byte(const char* field, uint8_t* v) {
    if (!Ok(field, 1)) return false;
    *v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }

  bool Varint(const char* field, uint64_t* v) {
    if (failed_) return false;
    uint64_t result = 0;
    for (int shift = 0; shift <= 63 && !in_.empty(); shift += 7) {
      const uint64_t byte = static_cast<unsigned char>(in_[0]);
      in_.remove_prefix(1);
      // The tenth byte may carry only the top bit.
      if (shift == 63 && byte > 1) break;
      result |= (byte & 0x7F) << shift;
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return Fail(field);
  }

  bool Varint32(const char* field, uint32_t* v) {
    uint64_t wide = 0;
    if (!Varint(field, &wide)) return false;
    if (wide > UINT32_MAX) return Fail(field);
    *v = static_cast<uint32_t>(wide);
    return true;
  }

  bool Zigzag(const char* field, int64_t* v) {
    uint64_t u = 0;
    if (!Varint(field, &u)) return false;
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return true;
  }

  bool Fixed64(const char* field, int64_t* v) {
    if (!Ok(field, 8)) return false;
    uint64_t u = 0;
    for (int i = 7; i >= 0; --i) u = (u << 8) | static_cast<unsigned char>(in_[i]);
    in_.remove_prefix(8);
    *v = static_cast<int64_t>(u);
    return true;
  }

  // A view into the value: valid while the value is.
  bool String(const char* field, std::string_view* s) {
    uint64_t n = 0;
    if (!Varint(field, &n)) return false;
    if (n > in_.size()) return Fail(field);
    *s = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }

  bool String(const char* field, std::string* s) {
    std::string_view view;
    if (!String(field, &view)) return false;
    s->assign(view);
    return true;
  }

  // Exactly `n` bytes, whose length the layout fixes.
  bool Bytes(const char* field, size_t n, std::string* s) {
    if (!Ok(field, n)) return false;
    s->assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }

  // A count of items that follow, each at least `min_item_bytes` long: a
  // count the rest of the value cannot hold fails here, before anything is
  // reserved for it.
  bool Count(const char* field, size_t min_item_bytes, size_t* n) {
    uint64_t v = 0;
    if (!Varint(field, &v)) return false;
    if (v > in_.size() / min_item_bytes) return Fail(field);
    *n = static_cast<size_t>(v);
    return true;
  }

  // Whatever is left; the reader is then at its end.
  std::string_view Rest() {
    std::string_view rest = failed_ ? std::string_view() : in_;
    in_ = {};
    return rest;
  }

  bool AtEnd() const { return !failed_ && in_.empty(); }
  bool failed() const { return failed_; }
  const char* failed_field() const { return failed_field_; }

 private:
  bool Ok(const char* field, size_t n) {
    if (failed_) return false;
    if (in_.size() < n) return Fail(field);
    return true;
  }
  bool Fail(const char* field) {
    if (!failed_) {
      failed_ = true;
      failed_field_ = field;
    }
    return false;
  }

  std::string_view in_;
  bool failed_ = false;
  const char* failed_field_ = "";
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_COMPACT_CODING_H_
