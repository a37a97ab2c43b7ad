#pragma once
// The entry source of one plain subscription (runtime/entry_source.h): a consumer of its group
// (runtime/group_intake.h: setup, the own-PEL drain, the recovery re-read) that reads new
// entries with XREADGROUP '>' BLOCK, and after the drain runs the reclaim beat: XAUTOCLAIM of
// entries idle longer than claim.min_idle (a dead peer's, SPEC 3.2), every claim.interval, as
// steps of the read connection between two reads (a beat that falls due during a BLOCK read runs
// when that read returns, within kBlock). With consumer reaping on, the beat also runs a pass
// when one is due.
//
// Threads: loop thread only. Time comes from the loop's clock.

#include <string>

#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/consumer_reaper.h"
#include "sidecar/runtime/group_intake.h"
#include "sidecar/runtime/ownership.h"

namespace streamcar::runtime {

class PlainIntake final : public GroupIntake {
 public:
  // Everything in `parts` outlives this object (`parts.reaper` is not used: see UseReaper).
  explicit PlainIntake(const SourceParts& parts);

  // Consumer reaping (SPEC 4.6): the reclaim beat also runs a pass of `reaper` when it is due,
  // as a step of its own on the read connection after the beat's claims. No outcome of a pass
  // ends the intake (an ACL refusal turns reaping off, runtime/consumer_reaper.h).
  void UseReaper(ConsumerReaper* reaper) { reaper_ = reaper; }

 private:
  void ReadNew(size_t count) override;
  bool OwnStep() override;
  void OnDrained() override;
  void EndOwnSteps(bool stopping) override;

  void OnReadNew(StatusOr<redis::Reply> reply);

  void ReclaimBeat();
  void ReclaimNext();
  void ReclaimFailed(const Status& status, bool claimed);
  void ReclaimRoute(redis::AutoClaimReply claimed);
  void ReclaimEnd();
  // A reaping pass on the read connection (reap_due_: the beat found one due).
  void ReapNext();

  std::unique_ptr<EventLoop::Timer> reclaim_timer_;
  bool reclaim_due_ = false;  // a beat is due or under way (its steps between reads)
  std::string reclaim_cursor_ = "0-0";
  ConsumerReaper* reaper_ = nullptr;
  bool reap_due_ = false;  // the beat found a reaping pass due: it runs after the claims
};

}  // namespace streamcar::runtime
