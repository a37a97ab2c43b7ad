#include "sidecar/runtime/tuning.h"

#include <gtest/gtest.h>

namespace streamcar::runtime {
namespace {

TEST(TuningTest, UnsetOrEmptyKeepsTheDefaults) {
  auto tuning = ParseTuning(nullptr, "");
  ASSERT_TRUE(tuning.ok()) << tuning.status().ToString();
  EXPECT_EQ(tuning->ack_linger, Tuning::kDefaultAckLinger);
  EXPECT_EQ(tuning->read_linger, Tuning::kDefaultReadLinger);
}

TEST(TuningTest, DurationsOverrideEach) {
  auto tuning = ParseTuning("5ms", "0s");
  ASSERT_TRUE(tuning.ok()) << tuning.status().ToString();
  EXPECT_EQ(tuning->ack_linger, Millis(5));
  EXPECT_EQ(tuning->read_linger, Millis(0));
}

TEST(TuningTest, AnErrorNamesTheVariableAndTheValue) {
  auto bare = ParseTuning("5", nullptr);
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalid);
  EXPECT_NE(bare.status().message().find("STREAMCAR_ACK_LINGER=\"5\": "), std::string::npos)
      << bare.status().message();

  auto long_linger = ParseTuning(nullptr, "1s");
  ASSERT_FALSE(long_linger.ok());
  EXPECT_EQ(long_linger.status().message(), "STREAMCAR_READ_LINGER=\"1s\": at most 100ms");
}

// SPEC 4.7's lease expiry: 6s unless a test shortens it, within bounds a renewal can keep.
TEST(TuningTest, ConsumerLeaseExpiryIsSixSecondsUnlessOverriddenWithinBounds) {
  Millis expiry = Tuning::kDefaultConsumerLease;
  EXPECT_EQ(expiry, Millis(6000));
  ASSERT_TRUE(ParseConsumerLease(nullptr, &expiry).ok());
  ASSERT_TRUE(ParseConsumerLease("", &expiry).ok());
  EXPECT_EQ(expiry, Millis(6000));
  ASSERT_TRUE(ParseConsumerLease("1500ms", &expiry).ok());
  EXPECT_EQ(expiry, Millis(1500));
  EXPECT_EQ(ParseConsumerLease("100ms", &expiry).message(),
            "STREAMCAR_CONSUMER_LEASE=\"100ms\": must be from 300ms to 1m");
  EXPECT_FALSE(ParseConsumerLease("2m", &expiry).ok());
  EXPECT_FALSE(ParseConsumerLease("soon", &expiry).ok());
  EXPECT_EQ(expiry, Millis(1500));
}

}  // namespace
}  // namespace streamcar::runtime
