// HTTP field names and values as RFC 9110 §5 reads them: names compared in
// any case, optional whitespace (spaces and tabs) around a value or around
// each element of a list, a field's lines counted. One copy for the
// receiver, the HTTP server, the signature checks, the refused deliveries'
// JSON and the admin API.
//
// Thread-safety: pure functions.

#ifndef EVENTFOLD_CORE_FIELD_VALUES_H_
#define EVENTFOLD_CORE_FIELD_VALUES_H_

#include <strings.h>

#include <cstddef>
#include <string_view>

#include "eventfold/ingest.h"

namespace eventfold {

// Whether `a` and `b` are the same ASCII text in any case.
inline bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// `s` without the spaces and tabs it starts or ends with.
inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls `fn` with each part of `s` between `sep`s, trimmed (an empty `s`
// is one empty part).
template <typename Fn>
void ForEachPart(std::string_view s, char sep, Fn fn) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    fn(TrimOws(s.substr(start, end - start)));
    start = end + 1;
  }
}

// How many lines of `headers` are named `name` (in any case): a field a
// check reads that comes more than once leaves which one counts open.
inline size_t CountHeader(const Headers& headers, std::string_view name) {
  size_t n = 0;
  for (const auto& field : headers) n += EqualsIgnoringCase(field.first, name) ? 1 : 0;
  return n;
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_FIELD_VALUES_H_
