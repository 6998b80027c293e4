#include "http/request_target.h"

#include <algorithm>

namespace eventfold::http {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RFC 3986 §3.2.2: reg-name = *( unreserved / pct-encoded / sub-delims ).
bool ValidRegName(std::string_view name) {
  constexpr std::string_view kAlsoAllowed = "-._~!$&'()*+,;=";
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (IsAlpha(c) || IsDigit(c) || kAlsoAllowed.find(c) != std::string_view::npos) continue;
    if (c == '%' && i + 2 < name.size() && IsHexDigit(name[i + 1]) && IsHexDigit(name[i + 2])) {
      i += 2;
      continue;
    }
    return false;
  }
  return true;
}

bool ValidPort(std::string_view port) { return std::all_of(port.begin(), port.end(), IsDigit); }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x + 32 : x) == (y >= 'A' && y <= 'Z' ? y + 32 : y);
         });
}

}  // namespace

bool ValidHost(std::string_view value) {
  if (!value.empty() && value.front() == '[') {
    // An IPv6 address; its exact grammar is left to whoever connects to
    // it: here only its characters, and that it is not empty.
    const size_t close = value.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    const std::string_view address = value.substr(1, close - 1);
    if (!std::all_of(address.begin(), address.end(),
                     [](char c) { return IsHexDigit(c) || c == ':' || c == '.'; })) {
      return false;
    }
    const std::string_view rest = value.substr(close + 1);
    return rest.empty() || (rest.front() == ':' && ValidPort(rest.substr(1)));
  }
  const size_t colon = value.find(':');
  if (colon == std::string_view::npos) return ValidRegName(value);
  return ValidRegName(value.substr(0, colon)) && ValidPort(value.substr(colon + 1));
}

std::optional<std::string> OriginForm(std::string_view target) {
  // Controls, space, DEL, a fragment; and bytes from 0x80 up, which a
  // signed char holds as negative.
  if (std::any_of(target.begin(), target.end(),
                  [](char c) { return c <= 0x20 || c == 0x7f || c == '#'; })) {
    return std::nullopt;
  }
  if (!target.empty() && target.front() == '/') return std::string(target);
  const size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = target.substr(0, scheme_end);
  if (!EqualsIgnoringCase(scheme, "http") && !EqualsIgnoringCase(scheme, "https")) {
    return std::nullopt;
  }
  const std::string_view rest = target.substr(scheme_end + 3);
  const size_t path_at = std::min(rest.find_first_of("/?"), rest.size());
  const std::string_view authority = rest.substr(0, path_at);
  if (authority.empty() || !ValidHost(authority)) return std::nullopt;
  const std::string_view path = rest.substr(path_at);
  if (path.empty() || path.front() == '?') return "/" + std::string(path);
  return std::string(path);
}

}  // namespace eventfold::http
