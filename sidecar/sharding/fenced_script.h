#pragma once
// The fenced data-plane scripts of a shard (SHARDING.md B5). Every step that changes a shard's
// Redis state runs as a script that first compares the caller's fence token with the one
// installed on the shard, in the same step, in the shard's slot. Replies have the shapes of the
// plain steps (redis/stream_ops.h parses them), with two error replies added:
//   "FENCED <installed token>"  the caller's token is not the installed one: nothing was done;
//   "STALE <installed token>"   the install was refused: a higher token (or the same token of
//                               another member) is installed.
// fenced_ops.h builds the calls.

#include <span>

#include "sidecar/redis/script.h"

namespace streamcar::sharding {

// KEYS[1] shard, KEYS[2] fence; ARGV token, group, member, member epoch, start id. Installs the
// token unless a higher one (or the same one of another member) is there, then creates the group
// at the start id unless it exists. Reply: the token, or STALE.
const redis::Script& FencedInstallScript();
// KEYS[1] shard, KEYS[2] fence; ARGV token, group, consumer, cursor, count. XAUTOCLAIM with
// min-idle 0: every pending entry of the shard, whoever read it. Reply: XAUTOCLAIM's.
const redis::Script& FencedClaimAllScript();
// KEYS[1] shard, KEYS[2] fence; ARGV token, group, consumer, count, id ('>' for new entries, or a
// cursor for a history read). Never blocks (Redis refuses BLOCK in scripts). Reply: XREADGROUP's,
// or, when '>' found nothing, the shard's last id as a string ("0-0" when empty): where the wait
// for new entries starts.
const redis::Script& FencedReadScript();
// KEYS[1] shard, KEYS[2] fence; ARGV token, group, consumer, count, cursor. One page of the
// takeover: every pending entry after the cursor, whoever read it, claimed to this consumer with
// one more delivery, in a history read's reply shape and id order (deleted ones as [id, nil]).
const redis::Script& FencedTakeoverScript();
// KEYS[1] shard, KEYS[2] fence; ARGV token, group, ack mode, ids. Reply: how many.
const redis::Script& FencedAckScript();
// The plain settle scripts (redis/settle_scripts.h) behind the fence check: the same KEYS with the
// fence key added last, the same ARGV with the token first, the same replies.
const redis::Script& FencedRetryClaimScript();
const redis::Script& FencedKeepAliveScript();
const redis::Script& FencedDeadLetterScript();
const redis::Script& FencedOwnedAckScript();
const redis::Script& FencedUndoReadsScript();

// Every script above: what a shard's connections load after each connect.
std::span<const redis::Script* const> FencedScripts();

}  // namespace streamcar::sharding
