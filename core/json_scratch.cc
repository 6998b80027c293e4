#include "core/json_scratch.h"

#include <string>

namespace eventfold {

simdjson::ondemand::parser& ThreadJsonParser() {
  thread_local simdjson::ondemand::parser parser;
  return parser;
}

simdjson::padded_string_view ThreadPadded(std::string_view prefix, std::string_view text,
                                          std::string_view suffix) {
  thread_local std::string buffer;
  buffer.clear();
  buffer.reserve(prefix.size() + text.size() + suffix.size() + simdjson::SIMDJSON_PADDING);
  buffer.append(prefix).append(text).append(suffix);
  return simdjson::padded_string_view(buffer.data(), buffer.size(), buffer.capacity());
}

}  // namespace eventfold
