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

}  // namespace
}  // namespace streamcar::runtime
