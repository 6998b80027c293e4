// Tests of core/rfc3339: the occurred_at rules of docs/SPEC.md §2.2.

#include "core/rfc3339.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "tests/common/test_seed.h"

namespace eventfold {
namespace {

constexpr int64_t kSecond = 1000000;

// 2026-11-29T10:15:30Z in microseconds.
constexpr int64_t kRef = 1795947330LL * kSecond;

int64_t ParseOk(const std::string& text) {
  Result<int64_t> r = ParseRfc3339(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : INT64_MIN;
}

void ExpectRefused(const std::string& text) {
  Result<int64_t> r = ParseRfc3339(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? *r : 0);
  if (!r.ok()) {
    EXPECT_TRUE(r.status().IsInvalidArgument()) << text;
    EXPECT_FALSE(r.status().message().empty()) << text;
  }
}

TEST(Rfc3339Test, UtcZulu) {
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30Z"), kRef);
  EXPECT_EQ(ParseOk("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseOk("1970-01-01T00:00:01Z"), kSecond);
}

TEST(Rfc3339Test, LowerCaseTAndZ) {
  EXPECT_EQ(ParseOk("2026-11-29t10:15:30z"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29t10:15:30Z"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30z"), kRef);
}

TEST(Rfc3339Test, Offsets) {
  EXPECT_EQ(ParseOk("2026-11-29T12:15:30+02:00"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T05:45:30-04:30"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30+00:00"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30-00:00"), kRef);
  // Crossing a day boundary backwards and forwards.
  EXPECT_EQ(ParseOk("2026-11-30T01:15:30+15:00"), kRef);
  EXPECT_EQ(ParseOk("2026-11-28T20:15:30-14:00"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30+23:59"), kRef - (23 * 3600 + 59 * 60) * kSecond);
}

TEST(Rfc3339Test, OffsetOutOfRangeRefused) {
  ExpectRefused("2026-11-29T10:15:30+24:00");
  ExpectRefused("2026-11-29T10:15:30-24:00");
  ExpectRefused("2026-11-29T10:15:30+02:60");
}

TEST(Rfc3339Test, OffsetWrongShapeRefused) {
  ExpectRefused("2026-11-29T10:15:30+0200");
  ExpectRefused("2026-11-29T10:15:30+2:00");
  ExpectRefused("2026-11-29T10:15:30+02");
  ExpectRefused("2026-11-29T10:15:30+02:0");
  ExpectRefused("2026-11-29T10:15:30+");
}

TEST(Rfc3339Test, FractionDigits) {
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.1Z"), kRef + 100000);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.12Z"), kRef + 120000);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.123Z"), kRef + 123000);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.1234Z"), kRef + 123400);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.12345Z"), kRef + 123450);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.123456Z"), kRef + 123456);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.000001Z"), kRef + 1);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.0Z"), kRef);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.999999+02:00"), kRef - 2 * 3600 * kSecond + 999999);
}

TEST(Rfc3339Test, FractionPastSixDigitsTruncated) {
  // Truncated, never rounded: .1234569 is 123456 µs, not 123457.
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.1234569Z"), kRef + 123456);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.12345699Z"), kRef + 123456);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.123456999Z"), kRef + 123456);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.999999999Z"), kRef + 999999);
  EXPECT_EQ(ParseOk("2026-11-29T10:15:30.000000999Z"), kRef);
}

TEST(Rfc3339Test, TenFractionDigitsRefused) {
  ExpectRefused("2026-11-29T10:15:30.1234567890Z");
  ExpectRefused("2026-11-29T10:15:30.0000000000Z");
}

TEST(Rfc3339Test, DotWithoutDigitsRefused) {
  ExpectRefused("2026-11-29T10:15:30.Z");
  ExpectRefused("2026-11-29T10:15:30.+02:00");
  ExpectRefused("2026-11-29T10:15:30.");
}

TEST(Rfc3339Test, LeapDays) {
  ExpectRefused("2026-02-29T00:00:00Z");
  EXPECT_EQ(ParseOk("2024-02-29T00:00:00Z"), ParseOk("2024-03-01T00:00:00Z") - 86400 * kSecond);
  ExpectRefused("1900-02-29T00:00:00Z");
  EXPECT_EQ(ParseOk("2000-02-29T00:00:00Z"), ParseOk("2000-03-01T00:00:00Z") - 86400 * kSecond);
  ExpectRefused("2024-02-30T00:00:00Z");
}

TEST(Rfc3339Test, InvalidCalendarDatesRefused) {
  ExpectRefused("2026-13-01T00:00:00Z");
  ExpectRefused("2026-00-01T00:00:00Z");
  ExpectRefused("2026-01-32T00:00:00Z");
  ExpectRefused("2026-01-00T00:00:00Z");
  ExpectRefused("2026-04-31T00:00:00Z");
  ExpectRefused("2026-06-31T00:00:00Z");
  ExpectRefused("2026-09-31T00:00:00Z");
  ExpectRefused("2026-11-31T00:00:00Z");
  EXPECT_EQ(ParseOk("2026-12-31T00:00:00Z") + 86400 * kSecond, ParseOk("2027-01-01T00:00:00Z"));
  EXPECT_EQ(ParseOk("2026-04-30T00:00:00Z") + 86400 * kSecond, ParseOk("2026-05-01T00:00:00Z"));
}

TEST(Rfc3339Test, MonthErrorNamesTheProblem) {
  Result<int64_t> r = ParseRfc3339("2026-13-01T00:00:00Z");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("month"), std::string::npos) << r.status().message();
}

TEST(Rfc3339Test, TimeOfDayOutOfRangeRefused) {
  ExpectRefused("2026-11-29T24:00:00Z");
  ExpectRefused("2026-11-29T10:60:00Z");
  ExpectRefused("2026-11-29T10:15:61Z");
  ExpectRefused("2026-11-29T99:99:99Z");
  EXPECT_EQ(ParseOk("2026-11-29T23:59:59Z"), ParseOk("2026-11-30T00:00:00Z") - kSecond);
}

TEST(Rfc3339Test, LeapSecondRollsOver) {
  EXPECT_EQ(ParseOk("2016-12-31T23:59:60Z"), ParseOk("2017-01-01T00:00:00Z"));
  EXPECT_EQ(ParseOk("2016-12-31T23:59:60.5Z"), ParseOk("2017-01-01T00:00:00.5Z"));
  EXPECT_EQ(ParseOk("2026-11-29T10:15:60Z"), ParseOk("2026-11-29T10:16:00Z"));
}

TEST(Rfc3339Test, PreEpochIsNegative) {
  EXPECT_EQ(ParseOk("1969-12-31T23:59:59Z"), -kSecond);
  EXPECT_EQ(ParseOk("1969-12-31T23:59:59.5Z"), -kSecond / 2);
  EXPECT_EQ(ParseOk("1969-12-31T23:59:59.999999Z"), -1);
  EXPECT_EQ(ParseOk("1900-01-01T00:00:00Z"), -2208988800LL * kSecond);
  EXPECT_EQ(ParseOk("0001-01-01T00:00:00Z"), -62135596800LL * kSecond);
  EXPECT_EQ(ParseOk("1970-01-01T00:00:00+01:00"), -3600 * kSecond);
}

// Found by fuzz/rfc3339_fuzzer.cc: these parsed to instants in the years
// 10000 and -1 UTC, which FormatRfc3339 cannot write as RFC 3339.
TEST(Rfc3339Test, InstantsOutsideFourDigitUtcYearsRefused) {
  ExpectRefused("9999-12-31T23:59:59.999999999-23:59");
  ExpectRefused("9999-12-31T23:59:60Z");
  ExpectRefused("0000-01-01T00:00:00+00:01");
  EXPECT_EQ(FormatRfc3339(ParseOk("9999-12-31T23:59:59.999999Z")), "9999-12-31T23:59:59.999999Z");
  EXPECT_EQ(FormatRfc3339(ParseOk("0000-01-01T23:59:00+23:59")), "0000-01-01T00:00:00.000000Z");
}

TEST(Rfc3339Test, FormatFixedShape) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(kRef + 123000), "2026-11-29T10:15:30.123000Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(FormatRfc3339(-kSecond / 2), "1969-12-31T23:59:59.500000Z");
  EXPECT_EQ(FormatRfc3339(-86400 * kSecond), "1969-12-31T00:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(-62135596800LL * kSecond), "0001-01-01T00:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(253402300799LL * kSecond + 999999), "9999-12-31T23:59:59.999999Z");
  EXPECT_EQ(FormatRfc3339(ParseOk("2024-02-29T12:00:00Z")), "2024-02-29T12:00:00.000000Z");
}

// Property: Format then Parse is the identity over years 0001-9999.
TEST(Rfc3339Test, FormatParseRoundTripProperty) {
  const uint64_t seed = test_util::TestSeed("Rfc3339Test.FormatParseRoundTripProperty", 3339);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int64_t kMin = -62135596800LL * kSecond;           // 0001-01-01
  constexpr int64_t kMax = 253402300799LL * kSecond + 999999;  // 9999-12-31
  std::uniform_int_distribution<int64_t> wide(kMin, kMax);
  std::uniform_int_distribution<int64_t> near(-100LL * 86400 * kSecond, 100LL * 86400 * kSecond);
  for (int i = 0; i < 20000; ++i) {
    const int64_t micros = (i % 2 == 0) ? wide(rng) : near(rng);
    const std::string text = FormatRfc3339(micros);
    Result<int64_t> back = ParseRfc3339(text);
    ASSERT_TRUE(back.ok()) << micros << " -> " << text << ": " << back.status().message();
    ASSERT_EQ(*back, micros) << text;
  }
  for (int64_t micros : {kMin, kMax, int64_t{0}, int64_t{-1}, int64_t{1}}) {
    Result<int64_t> back = ParseRfc3339(FormatRfc3339(micros));
    ASSERT_TRUE(back.ok()) << micros;
    EXPECT_EQ(*back, micros);
  }
}

TEST(Rfc3339Test, MissingZoneRefused) {
  Result<int64_t> r = ParseRfc3339("2026-11-29T10:15:30");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zone"), std::string::npos) << r.status().message();
  ExpectRefused("2026-11-29T10:15:30.123");
}

TEST(Rfc3339Test, TrailingGarbageRefused) {
  ExpectRefused("2026-11-29T10:15:30Zx");
  ExpectRefused("2026-11-29T10:15:30Z ");
  ExpectRefused("2026-11-29T10:15:30+02:00Z");
  ExpectRefused("2026-11-29T10:15:30ZZ");
  ExpectRefused(std::string("2026-11-29T10:15:30Z\0", 21));
}

TEST(Rfc3339Test, WrongShapesRefused) {
  ExpectRefused("");
  ExpectRefused("2026-1-01T00:00:00Z");
  ExpectRefused("2026-01-1T00:00:00Z");
  ExpectRefused("26-01-01T00:00:00Z");
  ExpectRefused("2026-11-29 10:15:30Z");
  ExpectRefused("2026-11-29X10:15:30Z");
  ExpectRefused("2026-11-29T10:15Z");
  ExpectRefused("2026-11-29T1:15:30Z");
  ExpectRefused("2026-11-29");
  ExpectRefused("2026/11/29T10:15:30Z");
  ExpectRefused("+2026-11-29T10:15:30Z");
  ExpectRefused(" 2026-11-29T10:15:30Z");
  ExpectRefused("2026-11-29T10:15:30,5Z");
  ExpectRefused("20261129T101530Z");
  ExpectRefused("2026-11-29T10:15:3aZ");
}

}  // namespace
}  // namespace eventfold
