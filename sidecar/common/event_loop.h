#pragma once
// One thread's event loop: level-triggered epoll over the sockets it watches, one timerfd holding
// the earliest timer deadline, one eventfd for Post and Stop from other threads.
//
// Threads: one thread runs Run() (or RunOnce()); Post and Stop may be called from any thread;
// everything else, including creating and destroying FdWatch and Timer objects, is loop-thread
// only. Every FdWatch and Timer must be destroyed before its loop.
//
// Time comes from the injected Clock: a timer fires once clock.Now() has reached its deadline.
// With SystemClock the timerfd (CLOCK_MONOTONIC, the clock behind libstdc++'s steady_clock) wakes
// the loop at the deadline. With a ManualClock the timerfd means nothing: tests Advance() the
// clock and call RunOnce(Millis(0)), which fires every timer that is now due.
//
// A callback that throws breaks the code that was running on the loop, so the loop does not go
// on as if nothing happened: the exception is caught, logged, handed to the fatal hook, and Run()
// returns. Without a hook the process aborts.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

namespace streamcar {

class EventLoop {
 public:
  // Readiness bits, for Watch/SetInterest and the callback's `ready`. kHangup (the peer hung up,
  // or the socket has an error) is always reported, whatever the interest; kPeerClosed (the peer
  // ended its side of a stream socket: EPOLLRDHUP) only when asked for.
  enum : uint32_t { kReadable = 1, kWritable = 2, kHangup = 4, kPeerClosed = 8 };

  // Creates the epoll instance, the timerfd and the eventfd; kIo when the process is out of
  // file descriptors.
  static StatusOr<std::unique_ptr<EventLoop>> Create(const Clock& clock);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // A registered fd; destroying it unregisters the fd (it does not close it). May be destroyed
  // inside its own callback.
  class FdWatch {
   public:
    ~FdWatch();
    FdWatch(const FdWatch&) = delete;
    FdWatch& operator=(const FdWatch&) = delete;
    // kReadable and/or kWritable (0: only kHangup). Level-triggered: ask for kWritable only
    // while output is pending, or the loop never sleeps.
    void SetInterest(uint32_t events);
    uint32_t interest() const;
    // True only inside a callback of this loop's round when the kernel reported nothing for
    // this fd at the round's poll that its callback has not been given yet: what the fd held
    // when the loop last asked has all been seen, with no syscall. False outside a round (what
    // arrived since the last poll is unknown): ask the socket.
    bool KnownQuiet() const;

   private:
    friend class EventLoop;
    FdWatch(EventLoop* loop, uint64_t id) : loop_(loop), id_(id) {}
    EventLoop* loop_;
    uint64_t id_;
  };

  // A one-shot timer that can be armed again any number of times; destroying it cancels it. May
  // be armed, cancelled or destroyed inside any callback, its own included.
  class Timer {
   public:
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    // (Re)arms for `at`; a deadline already passed fires at the next RunOnce.
    void ArmAt(SteadyTime at);
    void ArmIn(Millis delay);
    void Cancel();
    bool armed() const;
    std::optional<SteadyTime> deadline() const;

   private:
    friend class EventLoop;
    Timer(EventLoop* loop, uint64_t id) : loop_(loop), id_(id) {}
    EventLoop* loop_;
    uint64_t id_;
  };

  // Watches `fd` for `events`; `callback(ready)` runs on the loop while the fd is ready. kIo when
  // epoll refuses the fd (not a pollable fd, or the kernel's watch limit is reached).
  StatusOr<std::unique_ptr<FdWatch>> Watch(int fd, uint32_t events,
                                           std::function<void(uint32_t ready)> callback);
  // A timer that runs `callback` on the loop when armed and due. Due timers run in deadline order
  // (arming order for equal deadlines); one armed while the loop is firing timers waits for the
  // next RunOnce even if already due, so a timer re-armed for "now" cannot starve the loop.
  std::unique_ptr<Timer> CreateTimer(std::function<void()> callback);

  // Any thread: runs `callback` on the loop soon, in posting order.
  void Post(std::function<void()> callback);
  // Runs until Stop() (returns at once if Stop() was already called) or a callback throws.
  // Not reentrant: never called from a callback.
  void Run();
  // Waits up to `max_wait` for something to do, then does everything that is ready: fd
  // callbacks, posted callbacks, due timers. True when any callback ran. After a callback threw
  // it does nothing and returns false.
  bool RunOnce(Millis max_wait);
  // Any thread: makes Run() return after the callback running now. Sticky: a later Run() returns
  // at once.
  void Stop();
  bool stopped() const { return stop_requested_.load(std::memory_order_acquire); }

  // Called (on the loop thread) with a kFatal status naming the exception when a callback throws.
  void SetFatalHook(std::function<void(const Status&)> hook);

  const Clock& clock() const { return clock_; }

 private:
  struct WatchState {
    int fd;
    uint32_t interest;
    std::function<void(uint32_t)> callback;
    uint32_t unseen = 0;  // reported by this round's poll, its callback not run yet
  };
  // Timers are ordered by (deadline, arming sequence).
  using TimerKey = std::pair<SteadyTime, uint64_t>;
  struct TimerState {
    std::function<void()> callback;
    std::optional<TimerKey> key;
  };

  EventLoop(const Clock& clock, int epoll_fd, int timer_fd, int wake_fd);

  void Unwatch(uint64_t id);
  void SetWatchInterest(uint64_t id, uint32_t events);
  void ArmTimer(uint64_t id, SteadyTime at);
  void CancelTimer(uint64_t id);
  void DestroyTimer(uint64_t id);

  bool RunOnceFor(int timeout_ms);
  bool DispatchFd(uint64_t id, uint32_t ready);  // true when the callback ran
  bool RunPosted();
  bool FireDueTimers();
  void ArmTimerFd();
  void WakeUp();
  // Runs `callback`; what it throws is reported as fatal and stops the loop (failed_).
  template <typename F>
  void Invoke(F& callback);

  const Clock& clock_;
  int epoll_fd_;
  int timer_fd_;
  int wake_fd_;

  uint64_t next_id_ = 1;  // 0 means none; the timerfd and the eventfd use reserved ids
  std::unordered_map<uint64_t, std::unique_ptr<WatchState>> watches_;
  std::unordered_map<uint64_t, std::unique_ptr<TimerState>> timers_;
  std::map<TimerKey, uint64_t> deadlines_;  // armed timers only
  uint64_t next_sequence_ = 0;
  std::optional<SteadyTime> timer_fd_armed_for_;
  // A watch or timer whose owner destroyed it while its callback runs: freed after the callback
  // returns, so the callback's captures stay alive until then.
  std::unique_ptr<WatchState> doomed_watch_;
  std::unique_ptr<TimerState> doomed_timer_;
  uint64_t running_watch_ = 0;
  uint64_t running_timer_ = 0;
  bool in_round_ = false;  // between a round's poll and its end: its callbacks run

  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;  // guarded by posted_mutex_
  std::vector<std::function<void()>> running_posted_;
  std::atomic<bool> stop_requested_{false};
  std::function<void(const Status&)> fatal_hook_;
  bool failed_ = false;
};

}  // namespace streamcar
