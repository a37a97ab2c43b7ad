// The Prometheus observer (runtime/metrics_observer.h): each attempt, settlement, intake and
// health event lands in the subscription's series (SPEC 5), and an AttemptObservers fan-out
// hands every event to each observer.

#include "sidecar/runtime/metrics_observer.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <vector>

#include "sidecar/runtime/intake.h"

namespace streamcar::runtime {
namespace {

class MetricsObserverTest : public ::testing::Test {
 protected:
  static delivery::HandlerResponse Response(delivery::HandlerResponse::Kind kind, int status) {
    delivery::HandlerResponse response;
    response.kind = kind;
    response.status = status;
    return response;
  }
  uint64_t Durations() const {
    return metrics_.delivery_duration->Collect().histogram.sample_count;
  }

  ManualClock clock_;
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription("orders/billing");
  MetricsObserver observer_{&metrics_};
  const std::vector<EntryRef> refs_{{"1-0", 1}};
};

TEST_F(MetricsObserverTest, AnAnswerIsTimedAndSaysTheHandlerIsUp) {
  const SteadyTime started = clock_.Now();
  clock_.Advance(Millis(250));
  observer_.OnStarted({refs_, {}, nullptr}, started);
  observer_.OnEnded(refs_, Response(delivery::HandlerResponse::Kind::kRefused, 0), started,
                    clock_.Now());
  EXPECT_EQ(metrics_.handler_up->Value(), 0);
  EXPECT_EQ(Durations(), 0u) << "a refused connection is not a delivery";
  observer_.OnEnded(refs_, Response(delivery::HandlerResponse::Kind::kAnswered, 500), started,
                    clock_.Now());
  EXPECT_EQ(metrics_.handler_up->Value(), 1);
  ASSERT_EQ(Durations(), 1u);
  EXPECT_DOUBLE_EQ(metrics_.delivery_duration->Collect().histogram.sample_sum, 0.25);
  observer_.OnEnded(refs_, Response(delivery::HandlerResponse::Kind::kTimeout, 0), started,
                    clock_.Now());
  EXPECT_EQ(Durations(), 2u) << "a timeout took its time too";
}

TEST_F(MetricsObserverTest, EachDecisionCountsItsOutcome) {
  delivery::Decision retry;
  retry.action = delivery::Action::kRetry;
  retry.outcome = delivery::DeliveryOutcome::kRetry;
  observer_.OnDecided(refs_[0], delivery::Decision::Accepted());
  observer_.OnDecided(refs_[0], retry);
  observer_.OnDecided(refs_[0], retry);
  observer_.OnDecided(refs_[0], delivery::Decision::Invalid("bad header"));  // not a delivery
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kSuccess)->Value(), 1);
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kRetry)->Value(), 2);
  observer_.OnUnknownIds(3);
  EXPECT_EQ(metrics_.batch_unknown_ids->Value(), 3);
}

TEST_F(MetricsObserverTest, SettlementsCountAcksDeadLettersAndFailuresByClass) {
  // The entry was written at 1,800,000,000,000 ms and acknowledged 1.5 s later.
  observer_.OnAcked("1800000000000-0", 1'800'000'001'500);
  observer_.OnAckedGone("1800000000001-0");
  EXPECT_EQ(metrics_.acked->Value(), 2);
  ASSERT_EQ(metrics_.end_to_end->Collect().histogram.sample_count, 1u) << "not for a gone one";
  EXPECT_DOUBLE_EQ(metrics_.end_to_end->Collect().histogram.sample_sum, 1.5);

  redis::DeadLetterMeta meta;
  meta.reason = "rejected";
  observer_.OnDeadLettered("1800000000002-0", meta);
  EXPECT_EQ(metrics_.DeadLettered(delivery::DeadLetterReason::kRejected)->Value(), 1);
  EXPECT_EQ(metrics_.acked->Value(), 3) << "a dead letter is acknowledged too";

  observer_.OnSettleFailed(SettleClass::kAmbiguous, 2);
  observer_.OnSettleFailed(SettleClass::kLostLease, 0);
  EXPECT_EQ(metrics_.SettleFailed("ambiguous")->Value(), 2);
  EXPECT_EQ(metrics_.SettleFailed("lost_lease")->Value(), 0);
  observer_.OnFoundDeleted(1);
  EXPECT_EQ(metrics_.deleted_entries->Value(), 1);
}

TEST_F(MetricsObserverTest, IntakeCountsClaimsBySourceAndDeletedIds) {
  observer_.OnRouted(IntakeSource::kNew, 10, 0);
  EXPECT_EQ(metrics_.claimed_drain->Value(), 0) << "new entries are not claims";
  observer_.OnRouted(IntakeSource::kDrain, 4, 1);
  observer_.OnRouted(IntakeSource::kRecover, 1, 0);
  observer_.OnRouted(IntakeSource::kReclaim, 2, 3);
  EXPECT_EQ(metrics_.claimed_drain->Value(), 5);
  EXPECT_EQ(metrics_.claimed_autoclaim->Value(), 2);
  EXPECT_EQ(metrics_.deleted_entries->Value(), 4);
}

TEST_F(MetricsObserverTest, TheHealthVerdictIsTheHandlerUpGauge) {
  observer_.OnHealthVerdict(false);
  EXPECT_EQ(metrics_.handler_up->Value(), 0);
  observer_.OnHealthVerdict(true);
  EXPECT_EQ(metrics_.handler_up->Value(), 1);
}

// A second observer (a tracer, say) hears every event the metrics do, in the same order.
class Recorder final : public AttemptObserver {
 public:
  void OnStarted(const OutgoingRequest& outgoing, SteadyTime) override {
    events.push_back("started " + outgoing.refs.front().id);
  }
  void OnDecided(const EntryRef& ref, const delivery::Decision&) override {
    events.push_back("decided " + ref.id);
  }
  void OnAcked(std::string_view id, int64_t) override {
    events.push_back("acked " + std::string(id));
  }
  std::vector<std::string> events;
};

TEST_F(MetricsObserverTest, AFanOutHandsEachEventToEveryObserver) {
  Recorder recorder;
  AttemptObservers observers;
  observers.Add(&observer_);
  observers.Add(&recorder);
  observers.OnStarted({refs_, {}, nullptr}, clock_.Now());
  observers.OnDecided(refs_[0], delivery::Decision::Accepted());
  observers.OnAcked("1-0", 1);
  EXPECT_EQ(recorder.events, (std::vector<std::string>{"started 1-0", "decided 1-0", "acked 1-0"}));
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kSuccess)->Value(), 1);
  EXPECT_EQ(metrics_.acked->Value(), 1);
}

}  // namespace
}  // namespace streamcar::runtime
