// The input shape of the header-taking fuzzers: header lines "Name: value"
// up to the first empty line, then the raw body. The seeds stay readable and
// the fuzzer mutates headers and body alike.

#ifndef EVENTFOLD_FUZZ_FUZZ_INPUT_H_
#define EVENTFOLD_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eventfold/ingest.h"

namespace eventfold::fuzz {

struct Request {
  std::string_view first_line;  // used by the receiver: "METHOD PATH"
  Headers headers;
  std::string_view body;
};

// With `request_line`, the first line is taken as "METHOD PATH".
inline Request ParseRequest(const uint8_t* data, size_t size, bool request_line) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  Request request;
  bool first = request_line;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (first) {
      request.first_line = line;
      first = false;
      continue;
    }
    if (line.empty()) break;
    const size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string_view value =
        colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    request.headers.emplace_back(std::string(name), std::string(value));
  }
  request.body = rest;
  return request;
}

}  // namespace eventfold::fuzz

#endif  // EVENTFOLD_FUZZ_FUZZ_INPUT_H_
