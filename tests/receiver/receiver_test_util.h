// Helpers shared by the receiver tests: seeds, scratch directories, event
// bodies and a tiny JSON field reader for HTTP answers.

#ifndef EVENTFOLD_TESTS_RECEIVER_RECEIVER_TEST_UTIL_H_
#define EVENTFOLD_TESTS_RECEIVER_RECEIVER_TEST_UTIL_H_

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

#include <simdjson.h>

namespace eventfold::receiver_test {

// The seed of a randomized test: EVENTFOLD_TEST_SEED overrides `fallback`.
// Always printed so a failure can be replayed.
inline uint64_t TestSeed(const char* test_name, uint64_t fallback) {
  uint64_t seed = fallback;
  if (const char* env = std::getenv("EVENTFOLD_TEST_SEED"); env && *env) {
    seed = std::strtoull(env, nullptr, 10);
  }
  std::printf("%s: seed=%llu (set EVENTFOLD_TEST_SEED to replay)\n", test_name,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<uint64_t> counter{0};
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = (std::filesystem::temp_directory_path() /
             ("eventfold-rx-" + tag + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter.fetch_add(1)) + "-" + std::to_string(now)))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A receipt.issued body for receipt `rid`.
inline std::string Issued(const std::string& event_id, const std::string& rid,
                          const std::string& at = "2026-11-29T10:15:30.123Z",
                          int amount = 1500) {
  return "{\"event_id\":\"" + event_id +
         "\",\"type\":\"receipt.issued\",\"occurred_at\":\"" + at +
         "\",\"data\":{\"receipt_id\":\"" + rid + "\",\"amount\":" + std::to_string(amount) +
         ",\"currency\":\"THB\"}}";
}

inline std::string Refunded(const std::string& event_id, const std::string& rid,
                            const std::string& at = "2026-11-29T11:00:00Z") {
  return "{\"event_id\":\"" + event_id +
         "\",\"type\":\"receipt.refunded\",\"occurred_at\":\"" + at +
         "\",\"data\":{\"receipt_id\":\"" + rid + "\"}}";
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
