#pragma once
// Runs the build/parse pairs of stream_ops.h and group_info.h on a blocking Session: for the CLI,
// the retention beat and integration tests. Each call blocks
// its caller for at most the command timeout (plus `block` for ReadNew).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/redis/group_info.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::redis::sync {

// One command; an error reply comes back as a reply (the pair's parser classes it). Only I/O
// failures and timeouts are a Status.
StatusOr<Reply> RunCommand(Session& session, const Command& command);
// Several commands in one pipeline; error replies stay replies.
StatusOr<std::vector<Reply>> RunCommands(Session& session, const std::vector<Command>& commands);
// A script command (EVALSHA): on NOSCRIPT (the server restarted, SCRIPT FLUSH) loads `scripts`
// and runs it once more.
StatusOr<Reply> RunScript(Session& session, const Command& command,
                          std::span<const Script* const> scripts);

Status EnsureGroup(Session& session, const SubscriptionOps& ops, std::string_view start_id);
StatusOr<std::vector<StreamEntry>> ReadNew(Session& session, const SubscriptionOps& ops, int count,
                                           Millis block);
// The read, then the exact delivery count of each entry read.
StatusOr<std::vector<StreamEntry>> ReadOwnPending(Session& session, const SubscriptionOps& ops,
                                                  std::string_view cursor, int count);
// The claim, then the exact delivery count of each entry claimed.
StatusOr<AutoClaimReply> AutoClaim(Session& session, const SubscriptionOps& ops, Millis min_idle,
                                   std::string_view cursor, int count);
Status FillDeliveryCounts(Session& session, const SubscriptionOps& ops,
                          std::vector<StreamEntry>* entries);
StatusOr<PendingIds> OwnPendingIds(Session& session, const SubscriptionOps& ops,
                                   std::string_view start, int count);
StatusOr<std::vector<StreamEntry>> Fetch(Session& session, const SubscriptionOps& ops,
                                         std::span<const std::string> ids);
Status Ack(Session& session, const SubscriptionOps& ops, std::span<const std::string> ids,
           AckMode mode);
StatusOr<RetryClaimReply> RetryClaim(Session& session, const SubscriptionOps& ops,
                                     std::span<const std::string> ids);
// The ids no longer ours.
StatusOr<std::vector<std::string>> KeepAlive(Session& session, const SubscriptionOps& ops,
                                             std::span<const std::string> ids);
StatusOr<DeadLetterResult> DeadLetter(Session& session, const SubscriptionOps& ops,
                                      const DeadLetterTarget& dlq, const StreamEntry& entry,
                                      const DeadLetterMeta& meta, AckMode mode);
StatusOr<int64_t> UndoReads(Session& session, const SubscriptionOps& ops,
                            std::span<const std::string> ids);

StatusOr<std::string> TypeOf(Session& session, std::string_view key);
StatusOr<bool> HasAckDel(Session& session);
StatusOr<int64_t> GroupCount(Session& session, std::string_view stream);
// The PEL size (XPENDING summary: NOGROUP when the group is missing) and the group's XINFO row.
StatusOr<GroupInfo> Info(Session& session, std::string_view stream, std::string_view group);
StatusOr<int64_t> LagCount(Session& session, std::string_view stream,
                           std::string_view last_delivered_id, int64_t cap);

}  // namespace streamcar::redis::sync
