// core/parse_number.h: digits that fit the type parse; anything else,
// including a number past the type's range, is refused without throwing.

#include "core/parse_number.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace eventfold {
namespace {

TEST(ParseNumberTest, DigitsThatFitParse) {
  EXPECT_EQ(ParseU64("0"), 0u);
  EXPECT_EQ(ParseU64("42"), 42u);
  EXPECT_EQ(ParseU64("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ParseU32("4294967295"), UINT32_MAX);
  EXPECT_EQ(ParseDecimal<int64_t>("9223372036854775807"), INT64_MAX);
}

TEST(ParseNumberTest, OverflowIsRefused) {
  EXPECT_EQ(ParseU64("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseU64("99999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseU32("4294967296"), std::nullopt);
  EXPECT_EQ(ParseDecimal<int64_t>("9223372036854775808"), std::nullopt);
  EXPECT_EQ(ParseDecimal<uint16_t>("65536"), std::nullopt);
}

TEST(ParseNumberTest, AnythingButDigitsIsRefused) {
  for (const char* text : {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1.0", "\n"}) {
    EXPECT_EQ(ParseU64(text), std::nullopt) << '"' << text << '"';
    EXPECT_EQ(ParseDecimal<int64_t>(text), std::nullopt) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace eventfold
