// Decimal text -> unsigned integers, without exceptions.
//
// Stored values (m/ and k/ records), headers and flags arrive as text that a
// bug, a bad disk or a client may have made arbitrary. These helpers accept
// exactly one or more ASCII digits that fit the type and refuse everything
// else (empty, a sign, spaces, trailing bytes, overflow) with std::nullopt, so
// callers turn a refusal into a Status naming the field. Header-only and
// stateless: safe from any thread.

#ifndef EVENTFOLD_CORE_PARSE_NUMBER_H_
#define EVENTFOLD_CORE_PARSE_NUMBER_H_

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace eventfold {

// Parses all of `text` as a decimal number of type T (an unsigned or signed
// integer type); a leading '-' or '+' is refused even for signed T.
template <typename T>
[[nodiscard]] std::optional<T> ParseDecimal(std::string_view text) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  // from_chars accepts a leading '-' for signed types; stored numbers never
  // carry a sign.
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

[[nodiscard]] inline std::optional<uint64_t> ParseU64(std::string_view text) {
  return ParseDecimal<uint64_t>(text);
}

[[nodiscard]] inline std::optional<uint32_t> ParseU32(std::string_view text) {
  return ParseDecimal<uint32_t>(text);
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_PARSE_NUMBER_H_
