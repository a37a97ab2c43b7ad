#pragma once
// The wire form of the consumer-name lease (SPEC 4.7): one script takes or renews it, with the
// token checks in the same step (lua/consumer_lease.lua), another releases it on a clean
// shutdown (lua/consumer_lease_release.lua). The key is keys::ConsumerLeaseKey. Both are sent as
// EVAL: a few hundred bytes every few seconds, and no NOSCRIPT to recover from after a restart
// or a SCRIPT FLUSH. Nothing here does I/O; runtime/consumer_lease.h decides when to send.

#include <cstdint>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// Who the caller is: a random token for this process's life and its instance (SPEC 4.7: the
// pod's uid, else host name, process id and start time); `own_pod` is POD_UID ("" unset).
struct LeaseIdentity {
  std::string token;
  std::string instance;
  std::string own_pod;
};

// Takes the lease if it is free, the caller's, or held by an earlier container of its own pod,
// and sets its expiry; else changes nothing. ParseLease.
Command TakeLease(std::string_view key, const LeaseIdentity& identity, Millis expiry);
// Deletes the lease if it is still the caller's. Its reply needs no parsing: a clean shutdown
// does not wait for it to succeed.
Command ReleaseLease(std::string_view key, std::string_view token);

struct LeaseReply {
  bool ours = false;
  // ours: "renewed" (it held our token), "taken" (it was missing), "own_pod" (taken from an
  // earlier container of this pod). Not ours: empty.
  std::string how;
  // Not ours: the holder's instance and the lease's remaining time (PTTL, ms).
  std::string holder;
  int64_t remaining_ms = 0;
};

// The answer to TakeLease, or the connection's failure. An error is that error, but two are
// kFatal, naming the key (as a reply or as the connection's kServerError): WRONGTYPE (something
// else wrote the key) and an ACL refusal (no retry changes the user's rules).
StatusOr<LeaseReply> ParseLease(const StatusOr<Reply>& answer, std::string_view key);

}  // namespace streamcar::redis
