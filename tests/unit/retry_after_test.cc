#include "sidecar/delivery/retry_after.h"

#include <gtest/gtest.h>

namespace streamcar {
namespace {

constexpr int64_t kNow = 1445412480000;  // Wed, 21 Oct 2015 07:28:00 GMT

TEST(RetryAfter, Seconds) {
  EXPECT_EQ(ParseRetryAfter("120", kNow), Millis(120000));
  EXPECT_EQ(ParseRetryAfter(" 0 ", kNow), Millis(0));
}

TEST(RetryAfter, HttpDates) {
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:30 GMT", kNow), Millis(30000));
  EXPECT_EQ(ParseRetryAfter("Wednesday, 21-Oct-15 07:29:00 GMT", kNow), Millis(60000));
  EXPECT_EQ(ParseRetryAfter("Wed Oct 21 07:28:10 2015", kNow), Millis(10000));
}

TEST(RetryAfter, PastDateIsNoDelay) {
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:00:00 GMT", kNow), Millis(0));
}

TEST(RetryAfter, Garbage) {
  EXPECT_FALSE(ParseRetryAfter("", kNow));
  EXPECT_FALSE(ParseRetryAfter("soon", kNow));
  EXPECT_FALSE(ParseRetryAfter("12abc", kNow));
  EXPECT_FALSE(ParseRetryAfter("-5", kNow));
}

}  // namespace
}  // namespace streamcar
