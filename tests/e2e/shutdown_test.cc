// SIGTERM (SPEC 4.5): readiness off, no new reads, in-flight requests finish and are
// acknowledged, exit 0, never a dead letter or a counted attempt.

#include <atomic>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class ShutdownTest : public E2eTest {};

TEST_F(ShutdownTest, SigtermDrainsSlowRequestsAndExitsZero) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(1500);
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 4, timeout: 10s";
  c.max_attempts = 1;  // a shutdown that counted a failure would dead-letter at once
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  for (int i = 0; i < 10; ++i) Add({"n", std::to_string(i)});
  ASSERT_TRUE(handler_.WaitForCount(4, seconds(10)));
  sidecar->Terminate();
  // Not ready while draining.
  EXPECT_TRUE(Eventually([&] { return HttpGet(admin_port_, "/readyz").first != 200; }, seconds(2)));
  auto code = sidecar->Wait(seconds(15));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  // The four in flight finished and were acknowledged; none was dead-lettered. Entries read but
  // never started stay pending (at most the reader's prefetch); the rest were never read.
  EXPECT_EQ(handler_.Count(), 4u);
  EXPECT_LE(PendingCount(), 6);
  EXPECT_EQ(Len("orders:dlq"), 0);
  // A restart delivers exactly the six that were not finished, and none of the four again.
  handler_.SetBehaviour([](const ReceivedRequest&) { return HandlerReply{}; });
  SidecarConfig again = c;
  again.max_attempts = 3;
  auto restarted = StartSidecar(again);
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(15))) << restarted->Logs();
  EXPECT_EQ(handler_.Count(), 10u);
  EXPECT_EQ(Len("orders:dlq"), 0);
}

TEST_F(ShutdownTest, DrainTimeoutBoundsTheWaitAndLeavesEntriesPending) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(8000);
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "timeout: 30s";
  c.drain_timeout = "500ms";
  auto sidecar = StartSidecar(c);
  Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  const auto started = std::chrono::steady_clock::now();
  sidecar->Terminate();
  auto code = sidecar->Wait(seconds(6));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
  EXPECT_EQ(PendingCount(), 1);
  EXPECT_EQ(Len("orders:dlq"), 0);
}

TEST_F(ShutdownTest, SigintIsAlsoAGracefulStop) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady());
  sidecar->Interrupt();
  auto code = sidecar->Wait(seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  EXPECT_NE(sidecar->Logs().find("shutdown complete"), std::string::npos);
}

}  // namespace
}  // namespace streamcar::testing
