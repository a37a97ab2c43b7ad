#pragma once
// One member's side of a sharded subscription (SHARDING.md B6, B7): the member and shard state
// machines, the local lease, and what the runtime must do after each heartbeat reply or shard
// event. Pure logic on an injected clock, owned by one thread (the coordinator's): it does no
// I/O, so tests drive it with a ManualClock and the real heartbeat script.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/sharding/heartbeat.h"

namespace streamcar::sharding {

enum class MemberState { kJoining, kStable, kReconciling, kDrainOnly, kLost, kLeaving, kLeft };
std::string_view MemberStateName(MemberState state);

enum class ShardState {
  kStarting,  // granted: install, claim the PEL, then deliver
  kActive,    // delivering
  kDraining,  // no longer ours: no reads; in-flight work may finish (still fenced)
  kRevoked,   // drained; reported REVOKED until a heartbeat accepts it
};

struct MembershipOptions {
  std::string member_id;    // random per process (KIP-1082)
  std::string instance_id;  // "": dynamic membership
  int shard_count = 0;
  Millis session_timeout{15000};
  Millis rebalance_timeout{60000};
  Millis heartbeat_interval{3000};
  Millis initial_delay{3000};
  Millis min_assignment_interval{1000};
  bool static_takeover_wait = false;
  Millis stall_timeout{0};  // SHARDING.md B6.1; 0: off
  bool revoke_stalled = false;
  std::string pod;
  std::string host;
};

// What the runtime must do now. Each list is in shard order.
struct MemberActions {
  std::vector<ShardGrant> start;  // install the token, claim the whole PEL, deliver it, then read
  std::vector<int> resume;        // draining, given back on the same token: STARTING again
  std::vector<int> drain;         // stop reading; let in-flight work finish, then ShardDrained
  std::vector<int> drop;          // stop now; abandon in-flight work (acks of finished work still
                                  // go, through the fence: a newer owner's token refuses them)
  bool heartbeat_now = false;     // the next heartbeat goes at once, not after the interval
};

class Membership {
 public:
  // `lease_clock` is CLOCK_BOOTTIME in the sidecar (it counts a suspended host's time too).
  Membership(MembershipOptions options, const Clock& lease_clock);

  MemberState state() const { return state_; }
  int64_t member_epoch() const { return epoch_; }
  const std::map<int, ShardState>& shards() const { return shards_; }
  // The token of a shard this member holds, else nullopt.
  std::optional<int64_t> TokenOf(int shard) const;
  // The last reply accepted (OK, REVOKE_PENDING or SYNC_METADATA), for metrics and status.
  const std::optional<HeartbeatReply>& last_accepted() const { return last_accepted_; }

  // The request to send now, with the runtime's progress per shard. It records the moment it
  // was built: the lease of an accepted reply counts from there (B6).
  HeartbeatRequest NextRequest(std::vector<ShardProgress> progress = {});
  MemberActions OnReply(const HeartbeatReply& reply);
  // When the next heartbeat is due after the last one, with `jitter` in [0, 1): the interval
  // times U(0.8, 1.0) (B4.3). After UNRELEASED_INSTANCE_ID or INVALID_REQUEST (B4.1): a
  // capped exponential backoff instead, from one interval up to the session timeout (another
  // process must first leave or expire) or a minute (a configuration fix needs a restart).
  Millis NextHeartbeatDelay(double jitter) const;
  // Consecutive refusals (UNRELEASED_INSTANCE_ID, INVALID_REQUEST) since the last accepted reply,
  // the last one's status, and for how long (lease clock) they have lasted.
  int refusals() const { return refusals_; }
  std::optional<HeartbeatStatus> refused_with() const { return refused_with_; }
  Millis RefusedFor() const;

  // The local lease (B6): valid until 0.8 x session timeout after the last accepted request was
  // sent. The deliverer checks it before each POST.
  bool LeaseValid() const;
  Millis LeaseRemaining() const;
  // Call on every tick: an expired lease drops every shard (state LOST); the next request
  // rejoins with epoch 0.
  MemberActions CheckLease();

  // Shard events from the runtime.
  void ShardStarted(int shard);                                     // install and claim done
  MemberActions ShardInstallRefused(int shard, int64_t installed);  // STALE: drop it
  MemberActions ShardFenced(int shard, int64_t installed);          // FENCED from a data op
  MemberActions ShardDrained(int shard);                            // nothing in flight any more

  // SIGTERM (B7 LEAVING): drain every shard, then leave with epoch -1 (-2 with an instance id).
  MemberActions Leave();

 private:
  MemberActions DropAll();
  void DrainUnlisted(const std::map<int, int64_t>& listed, MemberActions* actions);
  void Accept(const HeartbeatReply& reply);
  void UpdateState();
  bool Leaving() const { return state_ == MemberState::kLeaving || state_ == MemberState::kLeft; }

  MembershipOptions options_;
  const Clock& lease_clock_;
  MemberState state_ = MemberState::kJoining;
  int64_t epoch_ = kJoinEpoch;
  int64_t metadata_version_ = 0;
  std::map<int, ShardState> shards_;
  std::map<int, int64_t> tokens_;
  std::vector<std::pair<int, int64_t>> conflicts_;
  Millis heartbeat_interval_;
  SteadyTime sent_at_{};
  std::optional<SteadyTime> lease_deadline_;
  std::optional<HeartbeatReply> last_accepted_;
  bool leave_sent_ = false;
  int refusals_ = 0;
  std::optional<HeartbeatStatus> refused_with_;
  SteadyTime refused_since_{};
};

}  // namespace streamcar::sharding
