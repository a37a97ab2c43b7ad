#include "sidecar/common/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "sidecar/common/log.h"

namespace streamcar {
namespace {

// epoll data of the two fds the loop owns; watch ids count up from 1 and never reach these.
constexpr uint64_t kTimerFdId = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kWakeFdId = kTimerFdId - 1;
constexpr int kMaxEvents = 64;

uint32_t EpollEventsOf(uint32_t interest) {
  uint32_t events = 0;
  if ((interest & EventLoop::kReadable) != 0) events |= EPOLLIN;
  if ((interest & EventLoop::kWritable) != 0) events |= EPOLLOUT;
  if ((interest & EventLoop::kPeerClosed) != 0) events |= EPOLLRDHUP;
  return events;
}

uint32_t ReadyOf(uint32_t epoll_events) {
  uint32_t ready = 0;
  if ((epoll_events & EPOLLIN) != 0) ready |= EventLoop::kReadable;
  if ((epoll_events & EPOLLOUT) != 0) ready |= EventLoop::kWritable;
  if ((epoll_events & (EPOLLHUP | EPOLLERR)) != 0) ready |= EventLoop::kHangup;
  if ((epoll_events & EPOLLRDHUP) != 0) ready |= EventLoop::kPeerClosed;
  return ready;
}

Status ErrnoStatus(const char* what) {
  return Status(StatusCode::kIo, std::string(what) + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(const Clock& clock) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return ErrnoStatus("event loop: epoll_create1");
  const int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd < 0) {
    Status status = ErrnoStatus("event loop: timerfd_create");
    close(epoll_fd);
    return status;
  }
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    Status status = ErrnoStatus("event loop: eventfd");
    close(timer_fd);
    close(epoll_fd);
    return status;
  }
  // From here the loop owns (and closes) all three.
  std::unique_ptr<EventLoop> loop(new EventLoop(clock, epoll_fd, timer_fd, wake_fd));
  for (const auto& [fd, id] : {std::pair{timer_fd, kTimerFdId}, std::pair{wake_fd, kWakeFdId}}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = id;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
      return ErrnoStatus("event loop: epoll_ctl");
    }
  }
  return loop;
}

EventLoop::EventLoop(const Clock& clock, int epoll_fd, int timer_fd, int wake_fd)
    : clock_(clock), epoll_fd_(epoll_fd), timer_fd_(timer_fd), wake_fd_(wake_fd) {}

EventLoop::~EventLoop() {
  close(wake_fd_);
  close(timer_fd_);
  close(epoll_fd_);
}

// --- fd watches -----------------------------------------------------------------------------

StatusOr<std::unique_ptr<EventLoop::FdWatch>> EventLoop::Watch(
    int fd, uint32_t events, std::function<void(uint32_t ready)> callback) {
  const uint64_t id = next_id_++;
  epoll_event event{};
  event.events = EpollEventsOf(events);
  event.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    return ErrnoStatus("event loop: cannot watch fd");
  }
  watches_.emplace(id, std::make_unique<WatchState>(WatchState{fd, events, std::move(callback)}));
  return std::unique_ptr<FdWatch>(new FdWatch(this, id));
}

EventLoop::FdWatch::~FdWatch() { loop_->Unwatch(id_); }

void EventLoop::FdWatch::SetInterest(uint32_t events) { loop_->SetWatchInterest(id_, events); }

uint32_t EventLoop::FdWatch::interest() const { return loop_->watches_.at(id_)->interest; }

bool EventLoop::FdWatch::KnownQuiet() const {
  return loop_->in_round_ && loop_->watches_.at(id_)->unseen == 0;
}

void EventLoop::Unwatch(uint64_t id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  // The fd may already be closed by its owner (then the kernel dropped it from the set): an
  // error here changes nothing.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  if (id == running_watch_) doomed_watch_ = std::move(it->second);
  watches_.erase(it);
}

void EventLoop::SetWatchInterest(uint64_t id, uint32_t events) {
  WatchState& state = *watches_.at(id);
  if (state.interest == events) return;
  epoll_event event{};
  event.events = EpollEventsOf(events);
  event.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, state.fd, &event) != 0) {
    // Only possible for an fd closed while still watched: a bug of the owner, which would
    // otherwise wait forever for an event that cannot come.
    LogError("event loop: cannot change the interest of a watched fd",
             {{"error", std::strerror(errno)}});
    return;
  }
  state.interest = events;
}

bool EventLoop::DispatchFd(uint64_t id, uint32_t ready) {
  auto it = watches_.find(id);
  // Unwatched by an earlier callback of this round (the id is never reused).
  if (it == watches_.end()) return false;
  WatchState& state = *it->second;
  state.unseen = 0;
  ready &= state.interest | kHangup;
  if (ready == 0) return false;  // interest dropped by an earlier callback of this round
  running_watch_ = id;
  auto invoke = [&] { state.callback(ready); };
  Invoke(invoke);
  running_watch_ = 0;
  doomed_watch_.reset();
  return true;
}

// --- timers ---------------------------------------------------------------------------------

std::unique_ptr<EventLoop::Timer> EventLoop::CreateTimer(std::function<void()> callback) {
  const uint64_t id = next_id_++;
  timers_.emplace(id, std::make_unique<TimerState>(TimerState{std::move(callback), std::nullopt}));
  return std::unique_ptr<Timer>(new Timer(this, id));
}

EventLoop::Timer::~Timer() { loop_->DestroyTimer(id_); }
void EventLoop::Timer::ArmAt(SteadyTime at) { loop_->ArmTimer(id_, at); }
void EventLoop::Timer::ArmIn(Millis delay) { loop_->ArmTimer(id_, loop_->clock_.Now() + delay); }
void EventLoop::Timer::Cancel() { loop_->CancelTimer(id_); }
bool EventLoop::Timer::armed() const { return loop_->timers_.at(id_)->key.has_value(); }

std::optional<SteadyTime> EventLoop::Timer::deadline() const {
  const auto& key = loop_->timers_.at(id_)->key;
  if (!key) return std::nullopt;
  return key->first;
}

void EventLoop::ArmTimer(uint64_t id, SteadyTime at) {
  TimerState& state = *timers_.at(id);
  if (state.key) deadlines_.erase(*state.key);
  state.key = TimerKey{at, next_sequence_++};
  deadlines_.emplace(*state.key, id);
}

void EventLoop::CancelTimer(uint64_t id) {
  TimerState& state = *timers_.at(id);
  if (!state.key) return;
  deadlines_.erase(*state.key);
  state.key.reset();
}

void EventLoop::DestroyTimer(uint64_t id) {
  CancelTimer(id);
  auto it = timers_.find(id);
  if (id == running_timer_) doomed_timer_ = std::move(it->second);
  timers_.erase(it);
}

bool EventLoop::FireDueTimers() {
  const SteadyTime now = clock_.Now();
  // Timers armed from here on (sequence >= first_new) wait for the next round.
  const uint64_t first_new = next_sequence_;
  bool ran = false;
  while (true) {
    auto it = deadlines_.begin();
    while (it != deadlines_.end() && it->first.first <= now && it->first.second >= first_new) ++it;
    if (it == deadlines_.end() || it->first.first > now) break;
    const uint64_t id = it->second;
    deadlines_.erase(it);
    TimerState& state = *timers_.at(id);
    state.key.reset();
    running_timer_ = id;
    Invoke(state.callback);
    running_timer_ = 0;
    doomed_timer_.reset();
    ran = true;
    if (failed_) break;
  }
  return ran;
}

void EventLoop::ArmTimerFd() {
  std::optional<SteadyTime> earliest;
  if (!deadlines_.empty()) earliest = deadlines_.begin()->first.first;
  if (earliest == timer_fd_armed_for_) return;
  itimerspec spec{};  // all zero: disarm
  if (earliest) {
    // Relative to the clock's now: for SystemClock the same instant as the absolute deadline
    // (never earlier, as now was read before the call), and harmless for a ManualClock.
    auto delay = std::chrono::duration_cast<std::chrono::nanoseconds>(*earliest - clock_.Now());
    if (delay.count() < 1) delay = std::chrono::nanoseconds(1);  // zero would disarm
    spec.it_value.tv_sec = static_cast<time_t>(delay.count() / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(delay.count() % 1'000'000'000);  // NOLINT
  }
  if (timerfd_settime(timer_fd_, 0, &spec, nullptr) != 0) {
    LogError("event loop: cannot arm the timerfd", {{"error", std::strerror(errno)}});
    return;
  }
  timer_fd_armed_for_ = earliest;
}

// --- posting and running ----------------------------------------------------------------------

void EventLoop::Post(std::function<void()> callback) {
  bool was_empty = false;
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(callback));
  }
  // One wake per batch: the loop takes the whole queue when it wakes.
  if (was_empty) WakeUp();
}

void EventLoop::Stop() {
  stop_requested_.store(true, std::memory_order_release);
  WakeUp();
}

void EventLoop::WakeUp() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is saturated, and then the loop is woken anyway.
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

bool EventLoop::RunPosted() {
  uint64_t count = 0;
  while (read(wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    running_posted_.swap(posted_);
  }
  bool ran = false;
  for (size_t i = 0; i < running_posted_.size(); ++i) {
    ran = true;
    Invoke(running_posted_[i]);
    if (failed_) {
      // The loop stops; what was not run yet stays queued, in order, ahead of later posts.
      std::lock_guard<std::mutex> lock(posted_mutex_);
      posted_.insert(
          posted_.begin(),
          std::make_move_iterator(running_posted_.begin() + static_cast<std::ptrdiff_t>(i) + 1),
          std::make_move_iterator(running_posted_.end()));
      break;
    }
  }
  running_posted_.clear();
  return ran;
}

void EventLoop::Run() {
  while (!stopped() && !failed_) RunOnceFor(-1);
}

bool EventLoop::RunOnce(Millis max_wait) {
  const auto count = max_wait.count();
  return RunOnceFor(count < 0 ? 0 : static_cast<int>(std::min<int64_t>(count, 1'000'000'000)));
}

bool EventLoop::RunOnceFor(int timeout_ms) {
  if (failed_) return false;
  // A timer already due (a ManualClock moved, or the previous round armed one for now) must not
  // wait for the timerfd.
  if (!deadlines_.empty() && deadlines_.begin()->first.first <= clock_.Now()) timeout_ms = 0;
  // Timers armed since the last round (or before the first) need the timerfd before we sleep.
  ArmTimerFd();
  std::array<epoll_event, kMaxEvents> events{};
  const int n = epoll_wait(epoll_fd_, events.data(), kMaxEvents, timeout_ms);
  if (n < 0 && errno != EINTR) {
    LogError("event loop: epoll_wait failed", {{"error", std::strerror(errno)}});
  }
  bool ran = false;
  bool woken = false;
  in_round_ = true;
  // What this poll reported for each watch, before any callback runs: a callback that reuses
  // another fd (a keep-alive connection) learns whether it has unseen input (KnownQuiet).
  for (int i = 0; i < n; ++i) {
    const epoll_event& event = events[static_cast<size_t>(i)];
    if (auto it = watches_.find(event.data.u64); it != watches_.end()) {
      it->second->unseen = ReadyOf(event.events);
    }
  }
  for (int i = 0; i < n && !failed_; ++i) {
    const uint64_t id = events[static_cast<size_t>(i)].data.u64;
    if (id == kWakeFdId) {
      woken = true;
    } else if (id == kTimerFdId) {
      uint64_t expirations = 0;
      while (read(timer_fd_, &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
      }
      timer_fd_armed_for_.reset();  // expired: armed again below
    } else {
      ran = DispatchFd(id, ReadyOf(events[static_cast<size_t>(i)].events)) || ran;
    }
  }
  if (woken && !failed_) ran = RunPosted() || ran;
  if (!failed_) ran = FireDueTimers() || ran;
  in_round_ = false;
  return ran;
}

// --- failures -------------------------------------------------------------------------------

void EventLoop::SetFatalHook(std::function<void(const Status&)> hook) {
  fatal_hook_ = std::move(hook);
}

template <typename F>
void EventLoop::Invoke(F& callback) {
  std::string what;
  try {
    callback();
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  failed_ = true;
  stop_requested_.store(true, std::memory_order_release);
  Status status(StatusCode::kFatal, "event loop callback threw: " + what);
  LogError("event loop callback threw; the loop stops", {{"error", what}});
  if (!fatal_hook_) std::abort();
  fatal_hook_(status);
}

}  // namespace streamcar
