// Helpers shared by the receiver tests: seeds, scratch directories, event
// bodies and a tiny JSON field reader for HTTP answers.

#ifndef EVENTFOLD_TESTS_RECEIVER_RECEIVER_TEST_UTIL_H_
#define EVENTFOLD_TESTS_RECEIVER_RECEIVER_TEST_UTIL_H_

#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"

namespace eventfold::receiver_test {

using test_util::TempDir;
using test_util::TestSeed;

// A receipt.issued body for receipt `rid`.
inline std::string Issued(const std::string& event_id, const std::string& rid,
                          const std::string& at = "2026-11-29T10:15:30.123Z", int amount = 1500) {
  return "{\"event_id\":\"" + event_id + "\",\"type\":\"receipt.issued\",\"occurred_at\":\"" + at +
         "\",\"data\":{\"receipt_id\":\"" + rid + "\",\"amount\":" + std::to_string(amount) +
         ",\"currency\":\"THB\"}}";
}

inline std::string Refunded(const std::string& event_id, const std::string& rid,
                            const std::string& at = "2026-11-29T11:00:00Z") {
  return "{\"event_id\":\"" + event_id + "\",\"type\":\"receipt.refunded\",\"occurred_at\":\"" +
         at + "\",\"data\":{\"receipt_id\":\"" + rid + "\"}}";
}

// The string value of top-level `key` in the JSON object `json`; nullopt when
// the text is not a JSON object or has no such string member.
inline std::optional<std::string> JsonString(const std::string& json, const char* key) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return std::nullopt;
  std::string_view value;
  if (doc[key].get_string().get(value) != simdjson::SUCCESS) return std::nullopt;
  return std::string(value);
}

// The member names of the object at top-level `key` of `json` (empty when
// absent or not an object).
inline std::vector<std::string> JsonObjectKeys(const std::string& json, const char* key) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return out;
  simdjson::dom::object obj;
  if (doc[key].get_object().get(obj) != simdjson::SUCCESS) return out;
  for (auto field : obj) out.emplace_back(field.key);
  return out;
}

inline bool IsJsonObject(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  return parser.parse(json).get(doc) == simdjson::SUCCESS && doc.is_object();
}

// JSON string literal (with quotes) for arbitrary bytes: escapes quotes,
// backslashes and control characters; other bytes pass through.
inline std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace eventfold::receiver_test

#endif  // EVENTFOLD_TESTS_RECEIVER_RECEIVER_TEST_UTIL_H_
