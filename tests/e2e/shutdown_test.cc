// SIGTERM (SPEC 4.5): readiness off, no new reads, in-flight requests finish and are
// acknowledged, exit 0, never a dead letter or a counted attempt.

#include <atomic>
#include <set>

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
  c.max_attempts = 1;  // a shutdown that counted an attempt would dead-letter at once
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(handler_.WaitForCount(4, seconds(10)));
  sidecar->Terminate();
  // Not ready while draining (asked while the process still runs).
  ASSERT_TRUE(
      Eventually([&] { return sidecar->running() && HttpGet(admin_port_, "/readyz").first == 503; },
                 seconds(2)))
      << sidecar->Logs();
  auto code = sidecar->Wait(seconds(15));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  // The four in flight finished and were acknowledged; none was dead-lettered.
  std::set<std::string> delivered;
  for (const auto& request : handler_.Requests()) delivered.insert(request.Header("streamcar-id"));
  ASSERT_EQ(delivered.size(), 4u);
  EXPECT_EQ(handler_.Count(), 4u);
  EXPECT_EQ(Len("orders:dlq"), 0);
  // Entries read but never POSTed keep the delivery count they had before the read: none.
  auto pending = redis_->Run({"XPENDING", "orders", "billing", "-", "+", "100"});
  for (size_t i = 0; i < pending.view().Size(); ++i) {
    EXPECT_EQ(pending.view()[i][3].Integer(), 0) << pending.view()[i][0].Str();
  }
  // A restart with the same max_attempts: 1 delivers exactly the six that were not, each as its
  // first attempt, and none of the four again.
  handler_.SetBehaviour([](const ReceivedRequest&) { return HandlerReply{}; });
  auto restarted = StartSidecar(c);
  ASSERT_TRUE(handler_.WaitForCount(10, seconds(15))) << restarted->Logs();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(15))) << restarted->Logs();
  EXPECT_EQ(handler_.Count(), 10u);
  std::set<std::string> all;
  for (const auto& request : handler_.Requests()) {
    all.insert(request.Header("streamcar-id"));
    if (!delivered.contains(request.Header("streamcar-id"))) {
      EXPECT_EQ(request.Header("streamcar-attempts"), "1") << request.Header("streamcar-id");
    }
  }
  EXPECT_EQ(all, std::set<std::string>(ids.begin(), ids.end()));
  EXPECT_EQ(Len("orders:dlq"), 0);
}

// A failure the handler answers after SIGTERM (the drain waits for it) is a retry that never
// comes: the entry is not dead-lettered, stays pending with the one delivery it had, and a
// restart delivers it as its second attempt.
TEST_F(ShutdownTest, AFailureAnsweredDuringTheDrainIsNotDeadLettered) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.status = 500;
    reply.delay = milliseconds(1500);
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "timeout: 10s";
  c.max_attempts = 3;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const std::string id = Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  sidecar->Terminate();  // while the request is in flight: its 500 comes during the drain
  auto code = sidecar->Wait(seconds(15));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  EXPECT_EQ(handler_.Count(), 1u);
  EXPECT_EQ(Len("orders:dlq"), 0) << sidecar->Logs();
  ASSERT_EQ(PendingCount(), 1) << sidecar->Logs();
  auto pending = redis_->Run({"XPENDING", "orders", "billing", "-", "+", "10"});
  ASSERT_EQ(pending.view().Size(), 1u);
  EXPECT_EQ(pending.view()[0][0].Str(), id);
  EXPECT_EQ(pending.view()[0][3].Integer(), 1) << "the shutdown claimed no retry";

  handler_.SetBehaviour([](const ReceivedRequest&) { return HandlerReply{}; });
  auto restarted = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return RequestsFor(id).size() == 2; }, seconds(15)))
      << restarted->Logs();
  EXPECT_EQ(RequestsFor(id)[1].Header("streamcar-attempts"), "2");
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(15))) << restarted->Logs();
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
