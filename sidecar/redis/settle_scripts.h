#pragma once
// The Lua bodies of the steps that must check or fail as one (SPEC 3.2, 3.3): every owner-checked
// settlement script of a subscription, and the dead-letter replay of `streamcar dlq replay`.
// script.h says why these are scripts and not MULTI/EXEC.

#include <span>

#include "sidecar/redis/script.h"

namespace streamcar::redis {

// KEYS[1] stream; ARGV group, consumer, ids. Reply {XCLAIM reply of the ids still ours (one more
// delivery each), ids no longer ours}.
const Script& RetryClaimScript();
// KEYS[1] stream; ARGV group, consumer, ids. Refreshes the idle time of the ids still ours
// without counting a delivery; reply: the ids no longer ours.
const Script& KeepAliveScript();
// KEYS[1] stream, KEYS[2] dead-letter stream; ARGV group, consumer, id, ack mode, max length,
// fields. Reply 1 written then acknowledged, 0 not ours (nothing written), or the error of the
// command that failed (nothing acknowledged).
const Script& DeadLetterScript();
// KEYS[1] stream; ARGV group, consumer, id, ack mode. The last step of the two-step dead letter
// (its record already XADDed elsewhere): acknowledges the entry only if it is still pending for
// this consumer. Reply 1 acknowledged, 0 not ours.
const Script& OwnedAckScript();
// KEYS[1] stream; ARGV group, consumer, ids read but never POSTed. Reply: how many were undone.
const Script& UndoReadsScript();
// KEYS[1] source stream, KEYS[2] dead-letter stream; ARGV dead-letter id, then the original
// fields. Reply: the new id, or nil when the dead letter is gone.
const Script& ReplayScript();

// The scripts a subscription's connection loads after each connect.
std::span<const Script* const> SettleScripts();

}  // namespace streamcar::redis
