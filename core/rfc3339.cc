#include "core/rfc3339.h"

#include <cstdio>

namespace eventfold {
namespace {

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Days from 1970-01-01 to y-m-d (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool Digits(int n, int* out) {
    if (pos_ + n > s_.size()) return false;
    int v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = s_[pos_ + i];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    pos_ += n;
    *out = v;
    return true;
  }
  bool Char(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  bool CharIn(char a, char b) { return Char(a) || Char(b); }
  bool AtDigit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void Skip() { ++pos_; }
  bool Done() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

Status Bad(std::string_view why) { return Status::InvalidArgument(why); }

}  // namespace

Result<int64_t> ParseRfc3339(std::string_view text) {
  constexpr std::string_view kShape = "must be an RFC 3339 timestamp like 2026-11-29T10:15:30.123Z";
  Cursor c(text);
  int year, month, day, hour, minute, second;
  if (!c.Digits(4, &year) || !c.Char('-') || !c.Digits(2, &month) || !c.Char('-') ||
      !c.Digits(2, &day) || !c.CharIn('T', 't') || !c.Digits(2, &hour) || !c.Char(':') ||
      !c.Digits(2, &minute) || !c.Char(':') || !c.Digits(2, &second)) {
    return Bad(kShape);
  }
  if (month < 1 || month > 12) return Bad("month out of range 01-12");
  if (day < 1 || day > DaysInMonth(year, month)) {
    return Bad("day out of range for its month");
  }
  if (hour > 23) return Bad("hour out of range 00-23");
  if (minute > 59) return Bad("minute out of range 00-59");
  if (second > 60) return Bad("second out of range 00-60");

  int64_t frac_micros = 0;
  if (c.Char('.')) {
    int digits = 0;
    while (c.AtDigit()) {
      const int d = c.Peek() - '0';
      c.Skip();
      if (++digits <= 6) frac_micros = frac_micros * 10 + d;
    }
    if (digits == 0) return Bad("fraction needs at least one digit");
    if (digits > 9) return Bad("more than 9 fraction digits");
    for (int i = digits; i < 6; ++i) frac_micros *= 10;
  }

  int64_t offset_seconds = 0;
  if (!c.CharIn('Z', 'z')) {
    int sign;
    if (c.Char('+')) {
      sign = 1;
    } else if (c.Char('-')) {
      sign = -1;
    } else {
      return Bad("missing time zone (Z or +hh:mm)");
    }
    int oh, om;
    if (!c.Digits(2, &oh) || !c.Char(':') || !c.Digits(2, &om)) {
      return Bad("offset must be +hh:mm or -hh:mm");
    }
    if (oh > 23 || om > 59) return Bad("offset out of range");
    offset_seconds = sign * (oh * 3600 + om * 60);
  }
  if (!c.Done()) return Bad("unexpected text after the time zone");

  const int64_t local_seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  const int64_t utc_seconds = local_seconds - offset_seconds;
  // An offset or a leap second can move the instant out of the four-digit
  // years, where no UTC timestamp can be formatted for it.
  if (utc_seconds < DaysFromCivil(0, 1, 1) * 86400 ||
      utc_seconds >= DaysFromCivil(10000, 1, 1) * 86400) {
    return Bad("instant outside the years 0000-9999 in UTC");
  }
  return utc_seconds * 1000000 + frac_micros;
}

std::string FormatRfc3339(int64_t micros, int offset_minutes) {
  micros += static_cast<int64_t>(offset_minutes) * 60 * 1000000;
  int64_t secs = micros / 1000000;
  int64_t frac = micros % 1000000;
  if (frac < 0) frac += 1000000, secs -= 1;
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) rem += 86400, days -= 1;
  int64_t y;
  int m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[80];
  int n = std::snprintf(buf, sizeof(buf), "%04lld-%02d-%02dT%02d:%02d:%02d.%06lld",
                        static_cast<long long>(y), m, d, static_cast<int>(rem / 3600),
                        static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60),
                        static_cast<long long>(frac));
  if (offset_minutes == 0) {
    std::snprintf(buf + n, sizeof(buf) - n, "Z");
  } else {
    const int a = offset_minutes < 0 ? -offset_minutes : offset_minutes;
    std::snprintf(buf + n, sizeof(buf) - n, "%c%02d:%02d", offset_minutes < 0 ? '-' : '+', a / 60,
                  a % 60);
  }
  return buf;
}

}  // namespace eventfold
