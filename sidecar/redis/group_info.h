#pragma once
// What Redis says about a consumer group, as build/parse pairs: the group setup checks (the type
// of a key, whether the server has XACKDEL, how many groups a stream has), the PEL size and lag
// the gauges export, and the one lag computation the gauges and `streamcar status` share.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/common/status.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// One group of XINFO GROUPS.
struct GroupInfo {
  bool found = false;          // the stream has a group of that name
  int64_t pending = 0;         // the group's PEL size
  std::optional<int64_t> lag;  // nil when Redis cannot tell (entries deleted in the unread range,
                               // or a server older than 7.0)
  std::string last_delivered_id;
};

// The lag when Redis reports none is counted with XRANGE, which transfers the entries it counts:
// never more than a cap. The gauges count at most this many, at most once a minute...
inline constexpr int64_t kGaugeLagCountCap = 10'000;
// ... and `streamcar status`, run by an operator once, this many.
inline constexpr int64_t kStatusLagCountCap = 100'000;

// TYPE <key>: "stream", "none", "string", ...
Command TypeOf(std::string_view key);
StatusOr<std::string> ParseType(const ReplyView& reply);
// A dead-letter key of another type would make every dead letter fail (SPEC 3.3): kFatal naming
// the subscription and the key when `type` is neither "stream" nor "none".
Status CheckDeadLetterType(std::string_view subscription, std::string_view key,
                           std::string_view type);

// Whether the server has XACKDEL: COMMAND INFO, never the version string (DESIGN.md trap 6).
Command HasAckDel();
StatusOr<bool> ParseHasAckDel(const ReplyView& reply);

// XINFO GROUPS <stream>: the number of groups (GroupCount) or one group (ParseGroupInfo).
Command GroupsOf(std::string_view stream);
StatusOr<int64_t> ParseGroupCount(const ReplyView& reply);
StatusOr<GroupInfo> ParseGroupInfo(const ReplyView& reply, std::string_view group);

// XPENDING <stream> <group> (the summary form): the PEL size.
Command PendingSummary(std::string_view stream, std::string_view group);
StatusOr<int64_t> ParsePendingCount(const ReplyView& reply);
// The same reply's count and the millisecond time of its smallest id (nullopt when nothing is
// pending): the oldest pending entry of the group, all consumers.
struct PendingOldest {
  int64_t count = 0;
  std::optional<uint64_t> oldest_ms;
};
StatusOr<PendingOldest> ParsePendingOldest(const ReplyView& reply);

// The entries after `last_delivered_id`, counted up to `cap`: the lag when Redis reports none.
Command LagCount(std::string_view stream, std::string_view last_delivered_id, int64_t cap);
StatusOr<int64_t> ParseLagCount(const ReplyView& reply);

// The lag to show: Redis's own when it has one (exact), else `counted` (an estimate, or nullopt
// when it could not be counted).
struct Lag {
  std::optional<int64_t> value;
  bool exact = true;
};
// Whether the lag must be counted with LagCount: the group exists and Redis reports none.
bool NeedsLagCount(const GroupInfo& info);
Lag LagOf(const GroupInfo& info, std::optional<int64_t> counted);

}  // namespace streamcar::redis
