// The event loop: timers on an injected clock (ManualClock + RunOnce(0): no sleeping), Post and
// Stop from other threads, fd readiness on real pipes, and exceptions reaching the fatal hook.

#include "sidecar/common/event_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/sidecar_process.h"

namespace streamcar {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<EventLoop> MakeLoop(const Clock& clock) {
  auto loop = EventLoop::Create(clock);
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(*loop);
}

// A pipe whose ends close with the test.
struct Pipe {
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
  }
  void Write() const { ASSERT_EQ(write(write_end, "x", 1), 1); }
  void Drain() const {
    char buffer[64];
    while (read(read_end, buffer, sizeof(buffer)) > 0) {
    }
  }
  int read_end = -1;
  int write_end = -1;
};

// The scheduler state of thread `tid` of this process ('S': asleep, 'R': running).
char ThreadState(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

TEST(EventLoopTest, DueTimersFireInDeadlineOrderAndNotBefore) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  std::vector<std::string> fired;
  auto late = loop->CreateTimer([&] { fired.emplace_back("late"); });
  auto early = loop->CreateTimer([&] { fired.emplace_back("early"); });
  auto middle = loop->CreateTimer([&] { fired.emplace_back("middle"); });
  auto middle_too = loop->CreateTimer([&] { fired.emplace_back("middle too"); });
  late->ArmIn(milliseconds(30));
  early->ArmIn(milliseconds(10));
  middle->ArmIn(milliseconds(20));
  middle_too->ArmIn(milliseconds(20));  // same deadline: arming order

  clock.Advance(milliseconds(9));
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_TRUE(fired.empty());
  clock.Advance(milliseconds(1));  // exactly the deadline is due
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired, std::vector<std::string>{"early"});
  EXPECT_FALSE(early->armed());

  clock.Advance(milliseconds(100));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired, (std::vector<std::string>{"early", "middle", "middle too", "late"}));
  // One-shot: nothing fires again.
  clock.Advance(milliseconds(100));
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired.size(), 4u);
}

TEST(EventLoopTest, ACancelledOrDestroyedTimerDoesNotFire) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  int cancelled_runs = 0;
  int destroyed_runs = 0;
  int kept_runs = 0;
  auto cancelled = loop->CreateTimer([&] { ++cancelled_runs; });
  auto destroyed = loop->CreateTimer([&] { ++destroyed_runs; });
  auto kept = loop->CreateTimer([&] { ++kept_runs; });
  cancelled->ArmIn(milliseconds(10));
  destroyed->ArmIn(milliseconds(10));
  kept->ArmIn(milliseconds(10));
  EXPECT_TRUE(cancelled->armed());
  cancelled->Cancel();
  EXPECT_FALSE(cancelled->armed());
  cancelled->Cancel();  // twice is harmless
  destroyed.reset();
  clock.Advance(milliseconds(10));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(cancelled_runs, 0);
  EXPECT_EQ(destroyed_runs, 0);
  EXPECT_EQ(kept_runs, 1);
}

TEST(EventLoopTest, ArmingAgainMovesTheDeadline) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  int runs = 0;
  auto timer = loop->CreateTimer([&] { ++runs; });
  timer->ArmIn(milliseconds(10));
  timer->ArmIn(milliseconds(50));  // later
  EXPECT_EQ(timer->deadline(), clock.Now() + milliseconds(50));
  clock.Advance(milliseconds(10));
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(runs, 0);
  timer->ArmAt(clock.Now() + milliseconds(5));  // earlier than the 50
  clock.Advance(milliseconds(5));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(runs, 1);
  clock.Advance(milliseconds(100));
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(runs, 1);  // the first arming left nothing behind
  // Armed again after firing: fires again.
  timer->ArmIn(milliseconds(1));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(runs, 2);
}

TEST(EventLoopTest, ATimerArmedInsideACallbackFiresOnTheNextRound) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  std::vector<std::string> fired;
  std::unique_ptr<EventLoop::Timer> second;
  std::unique_ptr<EventLoop::Timer> repeating;
  int repeats = 0;
  auto first = loop->CreateTimer([&] {
    fired.emplace_back("first");
    second->ArmIn(milliseconds(0));  // due at once, but not in this round
  });
  second = loop->CreateTimer([&] { fired.emplace_back("second"); });
  // A timer that re-arms itself for "now" every time cannot keep one round going forever.
  repeating = loop->CreateTimer([&] {
    ++repeats;
    repeating->ArmIn(milliseconds(0));
  });
  first->ArmIn(milliseconds(10));
  repeating->ArmIn(milliseconds(10));
  clock.Advance(milliseconds(10));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired, std::vector<std::string>{"first"});
  EXPECT_EQ(repeats, 1);
  EXPECT_TRUE(second->armed());
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(repeats, 2);
  repeating->Cancel();
}

TEST(EventLoopTest, ATimerCancelledOrDestroyedInsideAnotherCallbackDoesNotFire) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  std::vector<std::string> fired;
  std::unique_ptr<EventLoop::Timer> cancelled;
  std::unique_ptr<EventLoop::Timer> destroyed;
  auto first = loop->CreateTimer([&] {
    fired.emplace_back("first");
    cancelled->Cancel();
    destroyed.reset();
  });
  cancelled = loop->CreateTimer([&] { fired.emplace_back("cancelled"); });
  destroyed = loop->CreateTimer([&] { fired.emplace_back("destroyed"); });
  auto last = loop->CreateTimer([&] { fired.emplace_back("last"); });
  first->ArmIn(milliseconds(1));
  cancelled->ArmIn(milliseconds(2));
  destroyed->ArmIn(milliseconds(2));
  last->ArmIn(milliseconds(3));
  clock.Advance(milliseconds(3));  // all four due in one round
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired, (std::vector<std::string>{"first", "last"}));
  clock.Advance(milliseconds(100));
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(fired.size(), 2u);
}

TEST(EventLoopTest, ATimerMayDestroyItselfInItsCallback) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  std::unique_ptr<EventLoop::Timer> timer;
  // The capture outlives the destruction until the callback returns (ASan would see otherwise).
  auto payload = std::make_shared<std::string>("still here");
  std::string seen;
  timer = loop->CreateTimer([&, payload] {
    timer.reset();
    seen = *payload;
  });
  timer->ArmIn(milliseconds(1));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen, "still here");
  EXPECT_EQ(timer, nullptr);
  EXPECT_EQ(payload.use_count(), 1);  // the callback was freed once it returned
}

TEST(EventLoopTest, ATimerWakesASleepingLoopOnTheSystemClock) {
  auto loop = MakeLoop(SystemClock::Instance());
  const auto start = SteadyClock::now();
  SteadyTime fired_at{};
  auto timer = loop->CreateTimer([&] {
    fired_at = SteadyClock::now();
    loop->Stop();
  });
  timer->ArmIn(milliseconds(30));
  std::promise<void> returned;
  std::thread runner([&] {
    loop->Run();  // sleeps in epoll_wait without a timeout: only the timerfd can wake it
    returned.set_value();
  });
  const bool done =
      returned.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!done) loop->Stop();
  runner.join();
  ASSERT_TRUE(done) << "the timer never woke the loop";
  EXPECT_GE(fired_at - start, milliseconds(30));  // never early
}

TEST(EventLoopTest, PostFromAnotherThreadWakesASleepingLoopAndRunsInOrder) {
  auto loop = MakeLoop(SystemClock::Instance());
  std::promise<pid_t> loop_tid;
  loop->Post([&] { loop_tid.set_value(static_cast<pid_t>(syscall(SYS_gettid))); });
  std::thread runner([&] { loop->Run(); });
  auto tid_future = loop_tid.get_future();
  if (tid_future.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    loop->Stop();
    runner.join();
    FAIL() << "a post made before Run never ran";
  }
  const pid_t tid = tid_future.get();
  // Wait until the loop is asleep in epoll_wait (nothing armed: no timeout), then post.
  EXPECT_TRUE(testing::Eventually([&] { return ThreadState(tid) == 'S'; }, milliseconds(20000)));
  std::vector<int> order;  // written on the loop thread only
  std::promise<void> all_ran;
  std::thread poster([&] {
    for (int i = 0; i < 100; ++i) loop->Post([&order, i] { order.push_back(i); });
    loop->Post([&] { all_ran.set_value(); });
  });
  poster.join();
  const bool ran =
      all_ran.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  loop->Stop();  // from this thread
  runner.join();
  ASSERT_TRUE(ran) << "the posts never woke the loop";
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(EventLoopTest, StopBeforeRunMakesRunReturnAtOnce) {
  auto loop = MakeLoop(SystemClock::Instance());
  loop->Stop();
  std::promise<void> returned;
  std::thread runner([&] {
    loop->Run();
    returned.set_value();
  });
  const bool done =
      returned.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!done) loop->Post([] {});  // only to let the join below finish; the test failed already
  runner.join();
  EXPECT_TRUE(done);
  EXPECT_TRUE(loop->stopped());
}

TEST(EventLoopTest, AReadableFdRunsItsCallbackWhileReady) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  Pipe pipe;
  std::vector<uint32_t> seen;
  auto watch =
      loop->Watch(pipe.read_end, EventLoop::kReadable, [&](uint32_t r) { seen.push_back(r); });
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_TRUE(seen.empty());
  pipe.Write();
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen, std::vector<uint32_t>{EventLoop::kReadable});
  // Level-triggered: still unread, so reported again.
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen.size(), 2u);
  pipe.Drain();
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen.size(), 2u);
  // Without read interest the data waits.
  (*watch)->SetInterest(0);
  EXPECT_EQ((*watch)->interest(), 0u);
  pipe.Write();
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen.size(), 2u);
  (*watch)->SetInterest(EventLoop::kReadable);
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(seen.size(), 3u);
  // The writer going away is a hangup, reported even without interest.
  (*watch)->SetInterest(0);
  close(pipe.write_end);
  pipe.write_end = -1;
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back(), EventLoop::kHangup);
}

TEST(EventLoopTest, WritableInterestIsReportedOnlyWhileAskedFor) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  Pipe pipe;
  int writable = 0;
  auto watch = loop->Watch(pipe.write_end, 0, [&](uint32_t r) {
    if ((r & EventLoop::kWritable) != 0) ++writable;
  });
  ASSERT_TRUE(watch.ok());
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  (*watch)->SetInterest(EventLoop::kWritable);
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(writable, 1);
  (*watch)->SetInterest(0);
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(writable, 1);
}

TEST(EventLoopTest, WatchingSomethingEpollCannotWatchIsAnError) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  auto bad = loop->Watch(-1, EventLoop::kReadable, [](uint32_t) {});
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIo);
}

TEST(EventLoopTest, AWatchMayBeRemovedInsideItsOwnCallback) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  Pipe pipe;
  std::unique_ptr<EventLoop::FdWatch> watch;
  auto payload = std::make_shared<std::string>("still here");
  std::string seen;
  int calls = 0;
  auto created = loop->Watch(pipe.read_end, EventLoop::kReadable, [&, payload](uint32_t) {
    ++calls;
    watch.reset();
    seen = *payload;  // the callback's captures live until it returns
  });
  ASSERT_TRUE(created.ok());
  watch = std::move(*created);
  pipe.Write();
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, "still here");
  EXPECT_EQ(payload.use_count(), 1);
  // Unwatched: the unread byte is no longer reported.
  EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(calls, 1);
}

TEST(EventLoopTest, AWatchRemovedByAnEarlierCallbackOfTheSameRoundIsNotCalled) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  Pipe a;
  Pipe b;
  std::unique_ptr<EventLoop::FdWatch> watch_a;
  std::unique_ptr<EventLoop::FdWatch> watch_b;
  int calls = 0;
  // Whichever runs first removes both: the other must not run in the same round.
  auto remove_both = [&](uint32_t) {
    ++calls;
    watch_a.reset();
    watch_b.reset();
  };
  watch_a = std::move(*loop->Watch(a.read_end, EventLoop::kReadable, remove_both));
  watch_b = std::move(*loop->Watch(b.read_end, EventLoop::kReadable, remove_both));
  a.Write();
  b.Write();
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(calls, 1);
}

// KnownQuiet (what lets a keep-alive connection be reused without a peek): inside a round, false
// for a watch whose readiness that round reported and whose callback has not run yet, true once
// it ran and for a watch the round reported nothing for; outside a round always false.
TEST(EventLoopTest, KnownQuietSaysWhatTheRoundsPollReportedAndNotYetDispatched) {
  ManualClock clock;
  auto loop = MakeLoop(clock);
  Pipe a;
  Pipe b;
  Pipe quiet;
  std::unique_ptr<EventLoop::FdWatch> watch_a;
  std::unique_ptr<EventLoop::FdWatch> watch_b;
  std::vector<std::string> seen;
  auto report = [&](EventLoop::FdWatch& other) {
    seen.emplace_back(other.KnownQuiet() ? "quiet" : "unseen");
  };
  auto watch_quiet = std::move(*loop->Watch(quiet.read_end, EventLoop::kReadable, [](uint32_t) {}));
  watch_a = std::move(*loop->Watch(a.read_end, EventLoop::kReadable, [&](uint32_t) {
    report(*watch_b);
    report(*watch_quiet);
    a.Drain();
  }));
  watch_b = std::move(*loop->Watch(b.read_end, EventLoop::kReadable, [&](uint32_t) {
    report(*watch_a);
    report(*watch_quiet);
    b.Drain();
  }));
  EXPECT_FALSE(watch_quiet->KnownQuiet()) << "outside a round nothing is known";
  a.Write();
  b.Write();
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  // Whichever ran first saw the other unseen; the second saw the first already dispatched.
  EXPECT_EQ(seen, (std::vector<std::string>{"unseen", "quiet", "quiet", "quiet"}));
  EXPECT_FALSE(watch_a->KnownQuiet());
  // A round whose poll reported nothing for a: a posted callback sees it quiet.
  std::optional<bool> in_post;
  loop->Post([&] { in_post = watch_a->KnownQuiet(); });
  EXPECT_TRUE(loop->RunOnce(milliseconds(0)));
  EXPECT_EQ(in_post, std::optional<bool>(true));
}

TEST(EventLoopTest, AnExceptionInACallbackReachesTheFatalHookAndStopsTheLoop) {
  ManualClock clock;
  for (const std::string where : {"timer", "post", "fd"}) {
    SCOPED_TRACE(where);
    auto loop = MakeLoop(clock);
    std::vector<Status> reported;
    loop->SetFatalHook([&](const Status& s) { reported.push_back(s); });
    bool after_ran = false;
    Pipe pipe;
    std::unique_ptr<EventLoop::Timer> timer;
    std::unique_ptr<EventLoop::FdWatch> watch;
    if (where == "timer") {
      timer = loop->CreateTimer([] { throw std::runtime_error("boom in a timer"); });
      timer->ArmIn(milliseconds(0));
    } else if (where == "post") {
      loop->Post([] { throw std::runtime_error("boom in a post"); });
      loop->Post([&] { after_ran = true; });
    } else {
      watch = std::move(*loop->Watch(pipe.read_end, EventLoop::kReadable,
                                     [](uint32_t) { throw std::logic_error("boom in an fd"); }));
      pipe.Write();
    }
    loop->RunOnce(milliseconds(0));
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_EQ(reported[0].code(), StatusCode::kFatal);
    EXPECT_NE(reported[0].message().find("boom in a"), std::string::npos) << reported[0].message();
    EXPECT_TRUE(loop->stopped());
    // The loop does nothing more: Run returns at once, later work waits.
    loop->Run();
    EXPECT_FALSE(loop->RunOnce(milliseconds(0)));
    EXPECT_FALSE(after_ran);
    EXPECT_EQ(reported.size(), 1u);
  }
}

TEST(EventLoopDeathTest, AnExceptionWithoutAFatalHookAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ManualClock clock;
        auto loop = MakeLoop(clock);
        loop->Post([] { throw std::runtime_error("nobody listens"); });
        loop->RunOnce(milliseconds(0));
      },
      "nobody listens");
}

}  // namespace
}  // namespace streamcar
