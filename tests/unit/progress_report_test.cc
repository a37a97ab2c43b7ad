// What a shard loop tells its member of what waits in its stream (SHARDING.md B6.1): the entries
// it holds always count; what a gauge beat read counts only when that beat was sent after the
// last settlement, so a shard that just drained never looks busy on an older read.

#include "sidecar/runtime/progress_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace streamcar::runtime {
namespace {

SteadyTime At(int64_t ms) { return SteadyTime(Millis(ms)); }

TEST(ProgressReport, WhatWaitsIsTheHeldEntriesAndAReadNewerThanTheLastSettlement) {
  ProgressReport report;
  EXPECT_EQ(report.Read().Waiting(0), 0) << "nothing read, nothing held";
  EXPECT_EQ(report.Read().Waiting(2), 2);
  // A read before any settlement counts, pending and lag alike.
  report.SetRead(/*pending=*/1, /*lag=*/4, At(100));
  EXPECT_EQ(report.Read().Waiting(0), 5);
  EXPECT_EQ(report.Read().Waiting(7), 7) << "held entries are part of pending: never added";
  // A settlement after the read: the read may count what was acknowledged since.
  const std::vector<std::string> ids = {"1-0"};
  report.Settled(ids, At(200));
  EXPECT_EQ(report.Read().Waiting(0), 0);
  EXPECT_EQ(report.Read().Waiting(1), 1);
  // The next read, sent after it, counts again; a lag it could not tell counts as none.
  report.SetRead(3, std::nullopt, At(300));
  EXPECT_EQ(report.Read().Waiting(0), 3);
  EXPECT_EQ(report.Read().pending, 3);
}

}  // namespace
}  // namespace streamcar::runtime
