#include "sidecar/common/text.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <numeric>

namespace streamcar {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (auto candidate : candidates) {
    size_t distance = EditDistance(word, candidate);
    if (!best || distance < best_distance) {
      best = std::string(candidate);
      best_distance = distance;
    }
  }
  // Close enough: at most a third of the word changed, and never more than 3 edits.
  const size_t limit = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3));
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    // ASCII, most of what entries hold, eight bytes at a time (issue 34: this ran once per byte
    // over every field of every entry delivered).
    constexpr uint64_t kHighBits = 0x8080808080808080ULL;
    uint64_t word = 0;
    while (n - i >= sizeof(word)) {
      std::memcpy(&word, bytes.data() + i, sizeof(word));
      if ((word & kHighBits) != 0) break;
      i += sizeof(word);
    }
    if (i == n) break;
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra = 0;
    uint32_t code = 0;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    if ((extra == 1 && code < 0x80) || (extra == 2 && code < 0x800) ||
        (extra == 3 && code < 0x10000) || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::optional<EntryId> ParseEntryId(std::string_view text) {
  EntryId id;
  auto dash = text.find('-');
  auto ms_part = text.substr(0, dash);
  if (ms_part.empty()) return std::nullopt;
  auto [p1, e1] = std::from_chars(ms_part.data(), ms_part.data() + ms_part.size(), id.ms);
  if (e1 != std::errc() || p1 != ms_part.data() + ms_part.size()) return std::nullopt;
  if (dash != std::string_view::npos) {
    auto seq_part = text.substr(dash + 1);
    if (seq_part.empty()) return std::nullopt;
    auto [p2, e2] = std::from_chars(seq_part.data(), seq_part.data() + seq_part.size(), id.seq);
    if (e2 != std::errc() || p2 != seq_part.data() + seq_part.size()) return std::nullopt;
  }
  return id;
}

std::string PrintableOneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const bool utf8 = IsValidUtf8(text);
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F || (byte >= 0x80 && !utf8)) {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

std::string HostName() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0) return "streamcar";
  return buffer;
}

std::string Rfc3339Millis(int64_t unix_ms) {
  std::time_t seconds = unix_ms / 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[40];
  size_t len = std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buffer + len, sizeof(buffer) - len, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return buffer;
}

std::string LowerAscii(std::string_view text) {
  // ASCII only, inline: no locale call per byte (every header name of every request).
  std::string out(text);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  // ASCII only (what HTTP names and Redis words are), inline: no locale call per byte.
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace streamcar
