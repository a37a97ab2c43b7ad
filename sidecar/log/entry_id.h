#pragma once
// Stream entry ids "<ms>-<seq>" as the log API reasons about them (SPEC section 10): window
// bounds, pages, the archive watermark and follower positions. Both parts are unsigned 64-bit,
// as in Redis. Every comparison, successor and predecessor of an id goes through here, never
// through string comparison ("9-0" > "10-0" as strings).

#include <optional>
#include <string>
#include <string_view>

#include "sidecar/common/text.h"

namespace streamcar::log {

// The smallest and the largest id Redis can hold.
inline constexpr EntryId kMinId{0, 0};
inline constexpr EntryId kMaxId{UINT64_MAX, UINT64_MAX};

// Exactly "<ms>-<seq>", decimal digits only (no sign, no blanks, no "*", no bare "<ms>").
std::optional<EntryId> ParseId(std::string_view text);

// "<ms>-<seq>".
std::string FormatId(const EntryId& id);

// The next id above `id`, or nullopt for kMaxId.
std::optional<EntryId> Successor(const EntryId& id);
// The id just below `id`, or nullopt for kMinId.
std::optional<EntryId> Predecessor(const EntryId& id);

// Compares two ids in stream order (-1, 0, 1). Both must be valid ids (ParseId); an invalid one
// sorts as 0-0, which callers rule out by validating first.
int CompareIds(std::string_view a, std::string_view b);

// The larger of two valid ids, as text.
std::string MaxId(const std::string& a, const std::string& b);

}  // namespace streamcar::log
