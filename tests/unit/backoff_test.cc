#include "sidecar/common/backoff.h"

#include <gtest/gtest.h>

namespace streamcar {
namespace {

TEST(Backoff, ExponentialWithoutJitter) {
  BackoffPolicy p{Millis(1000), Millis(60000), 2.0, 0.0};
  EXPECT_EQ(ComputeBackoff(p, 1, 0.9), Millis(1000));
  EXPECT_EQ(ComputeBackoff(p, 2, 0.9), Millis(2000));
  EXPECT_EQ(ComputeBackoff(p, 3, 0.9), Millis(4000));
  EXPECT_EQ(ComputeBackoff(p, 10, 0.9), Millis(60000));  // capped
}

TEST(Backoff, JitterStaysWithinItsFraction) {
  BackoffPolicy p{Millis(1000), Millis(60000), 2.0, 0.2};
  EXPECT_EQ(ComputeBackoff(p, 1, 0.0), Millis(800));
  EXPECT_EQ(ComputeBackoff(p, 1, 0.5), Millis(1000));
  EXPECT_EQ(ComputeBackoff(p, 1, 0.999999), Millis(1199));
}

TEST(Backoff, NeverAboveMax) {
  BackoffPolicy p{Millis(1000), Millis(5000), 3.0, 0.5};
  for (int attempts = 1; attempts < 40; ++attempts) {
    EXPECT_LE(ComputeBackoff(p, attempts, 0.999), Millis(5000));
  }
}

TEST(Backoff, ReconnectDelayIsCappedAndNeverZero) {
  for (int step = 0; step < 50; ++step) {
    Millis d = ReconnectDelay(step, Millis(100), Millis(5000), 0.0);
    EXPECT_GE(d, Millis(50));
    EXPECT_LE(ReconnectDelay(step, Millis(100), Millis(5000), 0.999), Millis(5000));
  }
}

TEST(Backoff, UnitRandomInRange) {
  for (int i = 0; i < 1000; ++i) {
    double r = UnitRandom();
    EXPECT_GE(r, 0.0);
    EXPECT_LT(r, 1.0);
  }
}

}  // namespace
}  // namespace streamcar
