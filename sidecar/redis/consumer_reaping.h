#pragma once
// Consumer reaping (SPEC 4.6) as build/parse pairs and one pure decision; nothing here does I/O
// (runtime/consumer_reaper.h runs them on the beat).
//
// A pass lists the group's consumers (XINFO CONSUMERS), picks the candidates (ReapCandidates:
// another consumer, nothing pending, idle longer than the threshold) and sends them to the reap
// script, which looks again inside Redis, atomically, and removes only those that still qualify:
// a consumer that read an entry between the listing and the script (its pending count is no
// longer 0, its idle time was reset) is kept. The script's one key is the stream, so in a
// cluster it runs on the stream's node, and the listing it redoes is the one that counts.
//
// "Idle" is Redis's own `idle` field of XINFO CONSUMERS. Redis 7.0 refreshes it when a read
// brings entries or reads the consumer's own pending list, but not for a '>' read that finds
// nothing, BLOCK or not, nor for an XAUTOCLAIM that claims nothing: a live consumer of a quiet
// stream grows old too. So a reaping sidecar first refreshes its own consumer (NeedsRefresh,
// RefreshConsumer) on each pass, and a fleet that reaps keeps every live consumer young. (Redis
// 7.2+ and Valkey count every attempted read: there the refresh only re-creates a consumer a
// peer removed.)

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/script.h"

namespace streamcar::redis {

// One consumer of XINFO CONSUMERS.
struct ConsumerInfo {
  std::string name;
  int64_t pending = 0;
  int64_t idle_ms = 0;
};

// XINFO CONSUMERS <stream> <group>.
Command ListConsumers(std::string_view stream, std::string_view group);
// The flat [name, n, pending, n, idle, n, ...] rows (RESP2) or maps (RESP3) of every consumer.
StatusOr<std::vector<ConsumerInfo>> ParseConsumers(const ReplyView& reply);

// The consumers a pass sends to the script: every one but `self` with no pending entries and an
// idle time above `min_idle`, in the listing's order.
std::vector<std::string> ReapCandidates(std::span<const ConsumerInfo> consumers,
                                        std::string_view self, Millis min_idle);

// This consumer must refresh its own idle time before the pass: it is missing (a peer removed
// it, harmless: it had nothing pending), or it has nothing pending and has been idle longer than
// `quiet` (a quiet stream: its empty reads do not count as activity).
bool NeedsRefresh(std::span<const ConsumerInfo> consumers, std::string_view self, Millis quiet);
// XREADGROUP GROUP <group> <self> COUNT 1 STREAMS <stream> 0: a read of its own pending list,
// which Redis counts as activity (and creates the consumer when missing). Sent only when the
// listing showed nothing pending for it, so it brings nothing and counts no delivery; should an
// entry come back all the same, SubscriptionOps::ParseRead reads it, and the caller's recovery
// re-read delivers it.
Command RefreshConsumer(std::string_view stream, std::string_view group, std::string_view self);

// KEYS[1] stream; ARGV group, caller, min idle (ms), names. For each name, looked up again in
// XINFO CONSUMERS inside the script: removed with XGROUP DELCONSUMER only when it is not the
// caller, still exists, has 0 pending and an idle time above min idle.
const Script& ReapScript();
// The scripts the read connection of a subscription that reaps loads after each connect
// (runtime/subscription_loop.cc), so a pass sends EVALSHA without a NOSCRIPT first; the pass
// loads ReapScript() again itself after a NOSCRIPT (a restart, SCRIPT FLUSH).
std::span<const Script* const> ReapScripts();
Command ReapConsumers(std::string_view stream, std::string_view group, std::string_view self,
                      Millis min_idle, std::span<const std::string> names);

// The ACL rule a refused step of a pass lacks, for its log line: "+<command>" when the refusal
// names the command (NOPERM "... the 'xinfo|consumers' command"; a script's refusal on Redis
// 7.2+ and Valkey), else `step_rules`, every rule the step needs (a script's refusal on Redis
// 7.0 does not say which of its commands it refused).
std::string MissingAclRule(const Status& refusal, std::string_view step_rules);

// What the script did with one name.
enum class ReapVerdict {
  kRemoved,  // XGROUP DELCONSUMER ran
  kSelf,     // the caller's own name: never
  kPending,  // it holds pending entries (it read one since the listing, or never had 0)
  kActive,   // its idle time is not above the threshold (any more)
  kGone,     // no consumer of that name (another replica removed it first)
};
std::string_view ReapVerdictName(ReapVerdict verdict);

struct ReapResult {
  std::string name;
  ReapVerdict verdict = ReapVerdict::kGone;
  int64_t idle_ms = 0;  // as the script saw it (0 when gone)
  int64_t pending = 0;  // as the script saw it
};
// The script's reply: [name, verdict, idle, pending] for each name, in order.
StatusOr<std::vector<ReapResult>> ParseReap(const ReplyView& reply);

}  // namespace streamcar::redis
