// JsonWriter: builds compact JSON text with correct string escaping.
//
// The writer tracks commas itself; callers emit keys and values in order.
// Raw() inserts text that is already valid JSON (stored field values).
// Not thread-safe; one writer per output.

#ifndef EVENTFOLD_CORE_JSON_WRITER_H_
#define EVENTFOLD_CORE_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eventfold {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  JsonWriter& Raw(std::string_view json);
  JsonWriter& OptionalInt(const std::optional<int64_t>& value);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Separate();

  std::string out_;
  std::vector<bool> first_;  // per open container: no member written yet
  bool after_key_ = false;
};

// Appends `value` as a quoted JSON string to `out`; bytes that are not
// well-formed UTF-8 become U+FFFD, so the output is always valid JSON.
void AppendJsonString(std::string_view value, std::string* out);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_JSON_WRITER_H_
