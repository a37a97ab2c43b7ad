#include "sidecar/runtime/intake.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <string>
#include <utility>
#include <vector>

#include "sidecar/runtime/metrics_observer.h"

namespace streamcar::runtime {
namespace {

StreamEntry Entry(const std::string& id, int attempts = 1) {
  StreamEntry e;
  e.id = id;
  e.fields.push_back({"n", id});
  e.attempts = attempts;
  return e;
}

StreamEntry Gone(const std::string& id) {
  StreamEntry e;
  e.id = id;
  e.deleted = true;
  return e;
}

// What every intake test uses: a real ledger and a real metrics registry.
class IntakeBase {
 protected:
  IntakeBase() {
    policy_.max_attempts = 3;
    clock_.SetWallMillis(1'800'000'000'000);
  }

  Intake MakeIntake() {
    IntakeSettlement settlement{[this](std::string id) { acks_.push_back(std::move(id)); },
                                [this](std::string id, redis::DeadLetterMeta meta) {
                                  dead_.emplace_back(std::move(id), std::move(meta));
                                }};
    return Intake("orders", policy_, &ledger_, std::move(settlement), &observer_, clock_);
  }

  double Claimed(bool autoclaim) const {
    return (autoclaim ? metrics_.claimed_autoclaim : metrics_.claimed_drain)->Value();
  }
  double Deleted() const { return metrics_.deleted_entries->Value(); }

  delivery::OutcomePolicy policy_;
  ManualClock clock_;
  EntryLedger ledger_{100, ""};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription("orders");
  MetricsObserver observer_{&metrics_};
  AttemptObserver no_one_;  // watches nothing
  std::vector<std::string> acks_;
  std::vector<std::pair<std::string, redis::DeadLetterMeta>> dead_;
};

class IntakeTest : public IntakeBase, public ::testing::TestWithParam<IntakeSource> {};
class IntakeRecordTest : public IntakeBase, public ::testing::Test {};

// Every source routes alike: payload gone -> acknowledged, exhausted -> dead-lettered, the rest
// admitted; only the claimed counter depends on the source.
TEST_P(IntakeTest, RoutesEveryEntryByWhatItIs) {
  const IntakeSource source = GetParam();
  Intake intake = MakeIntake();
  const size_t admitted = intake.Route(
      {Entry("1-0"), Gone("2-0"), Entry("3-0", 4), Entry("4-0", 3), Gone("5-0")}, source);
  EXPECT_EQ(admitted, 2u);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kQueued);
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kQueued) << "attempts == max_attempts: delivered";
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("5-0"), EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("3-0"), EntryState::kDeadLettering);
  EXPECT_EQ(ledger_.held(), 5u) << "every routed entry takes room";
  EXPECT_EQ(acks_, (std::vector<std::string>{"2-0", "5-0"}));
  ASSERT_EQ(dead_.size(), 1u);
  EXPECT_EQ(dead_[0].first, "3-0");
  EXPECT_EQ(ledger_.Find("3-0")->attempts, 4);
  EXPECT_EQ(Deleted(), 2.0);
  const double drain = source == IntakeSource::kDrain || source == IntakeSource::kRecover ? 2 : 0;
  const double autoclaim = source == IntakeSource::kReclaim ? 2 : 0;
  EXPECT_EQ(Claimed(false), drain) << Name(source);
  EXPECT_EQ(Claimed(true), autoclaim) << Name(source);
}

// An id the ledger holds is skipped whatever it looks like now: what holds it settles it.
TEST_P(IntakeTest, HeldIdsAreSkipped) {
  const IntakeSource source = GetParam();
  Intake intake = MakeIntake();
  ASSERT_EQ(intake.Route({Entry("1-0"), Entry("2-0"), Gone("3-0"), Entry("4-0", 9)}, source), 2u);
  auto out = ledger_.TakeReady(1, clock_.Now());                      // 1-0 in flight
  ASSERT_EQ(ledger_.Accept(out[0]), EntryLedger::Applied::kApplied);  // 1-0 being acknowledged
  acks_.clear();
  dead_.clear();
  const double deleted = Deleted();
  const double drain = Claimed(false), autoclaim = Claimed(true);
  // Read again: deleted meanwhile, exhausted by now, or the same.
  EXPECT_EQ(intake.Route({Gone("1-0"), Entry("2-0", 9), Gone("3-0"), Entry("4-0", 9)}, source), 0u);
  EXPECT_TRUE(acks_.empty());
  EXPECT_TRUE(dead_.empty());
  EXPECT_EQ(Deleted(), deleted);
  EXPECT_EQ(Claimed(false), drain);
  EXPECT_EQ(Claimed(true), autoclaim);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kQueued);
  EXPECT_EQ(ledger_.Find("2-0")->attempts, 1);
  EXPECT_EQ(ledger_.held(), 4u);
}

TEST_P(IntakeTest, AnIdTwiceInOneReadIsRoutedOnce) {
  Intake intake = MakeIntake();
  EXPECT_EQ(intake.Route({Gone("1-0"), Gone("1-0"), Entry("2-0", 5), Entry("2-0", 5), Entry("3-0"),
                          Entry("3-0")},
                         GetParam()),
            1u);
  EXPECT_EQ(acks_, std::vector<std::string>{"1-0"});
  EXPECT_EQ(dead_.size(), 1u);
  EXPECT_EQ(Deleted(), 1.0);
  EXPECT_EQ(ledger_.held(), 3u);
}

INSTANTIATE_TEST_SUITE_P(AllSources, IntakeTest,
                         ::testing::Values(IntakeSource::kDrain, IntakeSource::kNew,
                                           IntakeSource::kReclaim, IntakeSource::kRecover),
                         [](const auto& info) { return std::string(Name(info.param)); });

// The record of SPEC 3.3 for an entry that crashed a consumer at every delivery: the text of the
// runtime it replaces (consumer/settler.cc), with the time from the clock.
TEST_F(IntakeRecordTest, TheExhaustedRecordSaysHowOftenItWasDelivered) {
  Intake intake = MakeIntake();
  intake.Route({Entry("7-0", 4)}, IntakeSource::kReclaim);
  ASSERT_EQ(dead_.size(), 1u);
  const redis::DeadLetterMeta& meta = dead_[0].second;
  EXPECT_EQ(meta.reason, "max_attempts");
  EXPECT_EQ(meta.status, "none");
  EXPECT_EQ(meta.error, "delivered 3 times without an outcome (a consumer stopped during each)");
  EXPECT_EQ(meta.attempts, 4);
  EXPECT_EQ(meta.time_ms, 1'800'000'000'000);
  EXPECT_EQ(Claimed(true), 0.0) << "not claimed for delivery";
}

TEST_F(IntakeRecordTest, WithoutMaxAttemptsNothingIsExhausted) {
  policy_.max_attempts = 0;  // retry forever
  Intake intake = MakeIntake();
  EXPECT_EQ(intake.Route({Entry("1-0", 1000)}, IntakeSource::kDrain), 1u);
  EXPECT_TRUE(dead_.empty());
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kQueued);
}

TEST_F(IntakeRecordTest, MetricsAreOptional) {
  Intake intake("orders", policy_, &ledger_,
                {[this](std::string id) { acks_.push_back(std::move(id)); },
                 [this](std::string id, redis::DeadLetterMeta meta) {
                   dead_.emplace_back(std::move(id), std::move(meta));
                 }},
                &no_one_, clock_);
  EXPECT_EQ(intake.Route({Entry("1-0"), Gone("2-0"), Entry("3-0", 9)}, IntakeSource::kReclaim), 1u);
  EXPECT_EQ(acks_.size(), 1u);
  EXPECT_EQ(dead_.size(), 1u);
}

}  // namespace
}  // namespace streamcar::runtime
