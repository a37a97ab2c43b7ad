// The member's local lease as a delivery gate (sharding/lease_gate.h, SHARDING.md B6), on a
// manual clock: open while the lease lasts, closed once it ran out or the run was dropped.

#include "sidecar/sharding/lease_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

namespace streamcar::sharding {
namespace {

class LeaseGateTest : public ::testing::Test {
 protected:
  void RenewFor(Millis remaining) {
    deadline_ns_.store((lease_clock_.Now() + remaining).time_since_epoch().count(),
                       std::memory_order_release);
  }

  ManualClock lease_clock_;
  ManualClock loop_clock_;  // the loop's: not the lease's to judge
  std::atomic<int64_t> deadline_ns_{0};
  std::shared_ptr<std::atomic<bool>> cut_short_ = std::make_shared<std::atomic<bool>>(false);
  LeaseGate gate_{deadline_ns_, lease_clock_, cut_short_};
};

TEST_F(LeaseGateTest, ClosedBeforeTheFirstLease) {
  const runtime::GateState state = gate_.StateAt(loop_clock_.Now());
  EXPECT_FALSE(state.open);
  EXPECT_EQ(state.reopens_at, std::nullopt) << "only the member's renewal opens it";
  EXPECT_EQ(state.reads, runtime::GateState::Reads::kGoOn) << "a fenced read goes on";
}

TEST_F(LeaseGateTest, OpenWhileTheLeaseLastsByTheMembersClock) {
  RenewFor(Millis(3000));
  EXPECT_TRUE(gate_.StateAt(loop_clock_.Now()).open);
  loop_clock_.Advance(Millis(10000));
  EXPECT_TRUE(gate_.StateAt(loop_clock_.Now()).open) << "the loop's clock does not end it";
  lease_clock_.Advance(Millis(2999));
  EXPECT_TRUE(gate_.StateAt(loop_clock_.Now()).open);
  lease_clock_.Advance(Millis(1));
  EXPECT_FALSE(gate_.StateAt(loop_clock_.Now()).open) << "a POST at the lease's deadline";
  RenewFor(Millis(3000));
  EXPECT_TRUE(gate_.StateAt(loop_clock_.Now()).open);
}

// A dropped run sends nothing more, even once a rejoin renewed the member's lease.
TEST_F(LeaseGateTest, ADroppedRunStaysClosedThoughTheLeaseIsRenewed) {
  RenewFor(Millis(3000));
  cut_short_->store(true);
  EXPECT_FALSE(gate_.StateAt(loop_clock_.Now()).open);
  RenewFor(Millis(6000));
  EXPECT_FALSE(gate_.StateAt(loop_clock_.Now()).open);
}

}  // namespace
}  // namespace streamcar::sharding
