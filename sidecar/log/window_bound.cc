// ParseBound (declared in log_reader.h): how a user writes a window bound, turned into the entry
// id it stands for.

#include <charconv>
#include <cstdint>

#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::log {
namespace {

constexpr const char* kForms =
    "expected an RFC 3339 instant (2026-11-30T14:30:00Z), milliseconds since the epoch "
    "(1764513000000) or an entry id (1764513000000-3)";

Status Invalid(std::string_view text, const std::string& why) {
  return Status(StatusCode::kInvalid,
                "\"" + PrintableOneLine(text) + "\" is not a valid time: " + why);
}

bool AllDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// `width` decimal digits at `pos`.
bool Number(std::string_view text, size_t pos, size_t width, int* out) {
  if (pos + width > text.size() || !AllDigits(text.substr(pos, width))) return false;
  *out = 0;
  for (size_t i = 0; i < width; ++i) *out = *out * 10 + (text[pos + i] - '0');
  return true;
}

// Days from 1970-01-01 to the civil date (proleptic Gregorian); H. Hinnant's algorithm.
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// RFC 3339 date-time: YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|+HH:MM|-HH:MM). Milliseconds since
// the epoch, the fraction truncated to milliseconds (an instant inside a millisecond belongs to
// it, so [since, until) keeps that millisecond's entries on the side they were written).
StatusOr<uint64_t> ParseRfc3339(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!Number(text, 0, 4, &year) || text.size() < 19 || text[4] != '-' ||
      !Number(text, 5, 2, &month) || text[7] != '-' || !Number(text, 8, 2, &day) ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !Number(text, 11, 2, &hour) ||
      text[13] != ':' || !Number(text, 14, 2, &minute) || text[16] != ':' ||
      !Number(text, 17, 2, &second)) {
    return Invalid(text, kForms);
  }
  if (month < 1 || month > 12) return Invalid(text, "month out of range (01..12)");
  if (day < 1 || day > DaysInMonth(year, month)) return Invalid(text, "no such day in that month");
  if (hour > 23) return Invalid(text, "hour out of range (00..23)");
  if (minute > 59) return Invalid(text, "minute out of range (00..59)");
  if (second > 60) return Invalid(text, "second out of range (00..60)");  // 60: a leap second
  size_t pos = 19;
  int64_t millis = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (pos - start < 3) millis = millis * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos == start) return Invalid(text, "a '.' must be followed by digits of a second");
    for (size_t digits = pos - start; digits < 3; ++digits) millis *= 10;
  }
  int64_t offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int off_h = 0, off_m = 0;
    if (!Number(text, pos + 1, 2, &off_h) || pos + 3 >= text.size() || text[pos + 3] != ':' ||
        !Number(text, pos + 4, 2, &off_m) || off_h > 23 || off_m > 59) {
      return Invalid(text, "the UTC offset must be Z or +HH:MM / -HH:MM");
    }
    offset_minutes = (text[pos] == '-' ? -1 : 1) * (int64_t{off_h} * 60 + off_m);
    pos += 6;
  } else {
    return Invalid(text, "an RFC 3339 instant needs a time zone: Z or +HH:MM / -HH:MM");
  }
  if (pos != text.size()) return Invalid(text, kForms);
  const int64_t seconds = DaysFromCivil(year, month, day) * 86400 + int64_t{hour} * 3600 +
                          int64_t{minute} * 60 + second - offset_minutes * 60;
  if (seconds < 0) return Invalid(text, "before 1970-01-01T00:00:00Z, where entry ids start");
  return static_cast<uint64_t>(seconds) * 1000 + static_cast<uint64_t>(millis);
}

}  // namespace

StatusOr<std::string> ParseBound(std::string_view text) {
  if (text.empty()) return Invalid(text, kForms);
  if (AllDigits(text)) {
    uint64_t ms = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return Invalid(text, "milliseconds since the epoch out of range");
    }
    return FormatId(EntryId{ms, 0});
  }
  // "<digits>-<digits>" is an entry id; a date has two dashes and a time, so it cannot look
  // like one.
  if (const auto dash = text.find('-'); dash != std::string_view::npos &&
                                        AllDigits(text.substr(0, dash)) &&
                                        AllDigits(text.substr(dash + 1))) {
    auto id = ParseId(text);
    if (!id) return Invalid(text, "entry id part out of range (each is at most 2^64-1)");
    return FormatId(*id);
  }
  auto ms = ParseRfc3339(text);
  if (!ms.ok()) return ms.status();
  return FormatId(EntryId{*ms, 0});
}

}  // namespace streamcar::log
