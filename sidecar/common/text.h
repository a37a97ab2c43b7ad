#pragma once
// Small text helpers shared by the config loader, the encoder and the Redis seam.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace streamcar {

// Edit distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be what was meant.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string_view>& candidates);

bool IsValidUtf8(std::string_view bytes);

// A stream entry id "<ms>-<seq>" (or "<ms>", seq 0).
struct EntryId {
  uint64_t ms = 0;
  uint64_t seq = 0;
  // clang-tidy reads the comparison with 0 that C++ synthesizes from <=> as a null pointer.
  // NOLINTNEXTLINE(modernize-use-nullptr)
  friend auto operator<=>(const EntryId&, const EntryId&) = default;
  std::string ToString() const { return std::to_string(ms) + "-" + std::to_string(seq); }
};
std::optional<EntryId> ParseEntryId(std::string_view text);

// `text` made safe for one line of a message: control characters and bytes that are not UTF-8
// become escapes (\n, \t, \xNN). Configuration errors echo what the user wrote.
std::string PrintableOneLine(std::string_view text);

// ASCII case folding and comparison (HTTP header names, tokens and schemes are ASCII).
std::string LowerAscii(std::string_view text);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// `text` without leading and trailing spaces and tabs (HTTP's optional whitespace).
std::string_view TrimBlanks(std::string_view text);

// The value of a hexadecimal digit (either case), or -1.
int HexDigitValue(char c);

// The host name of this machine (the pod name in Kubernetes).
std::string HostName();

// RFC 3339 UTC time with milliseconds for a Unix time in ms: "2023-11-14T22:13:20.000Z".
std::string Rfc3339Millis(int64_t unix_ms);

}  // namespace streamcar
