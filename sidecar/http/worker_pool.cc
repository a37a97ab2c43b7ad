#include "sidecar/http/worker_pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace streamcar::http {

WorkerPool::WorkerPool(int max_threads) : max_threads_(std::max(1, max_threads)) {}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Submit(std::function<void()> task) {
  std::vector<std::thread> done;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
    // Threads that ended are joined here (at once: they have returned), outside the lock.
    for (const std::thread::id id : finished_) {
      auto it = std::find_if(threads_.begin(), threads_.end(),
                             [id](const std::thread& t) { return t.get_id() == id; });
      if (it == threads_.end()) continue;
      done.push_back(std::move(*it));
      threads_.erase(it);
    }
    finished_.clear();
    if (idle_ > 0) {
      wake = true;
    } else if (running_ < max_threads_ && !stopping_) {
      ++running_;
      threads_.emplace_back([this] { Work(); });
    }
  }
  // Woken after the lock is released: a thread woken inside it would only block on the lock
  // again (a futex wait and a wake, and two context switches, per task on a busy API).
  if (wake) wake_.notify_one();
  for (auto& thread : done) thread.join();
}

void WorkerPool::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    threads.swap(threads_);
    finished_.clear();
  }
  wake_.notify_all();
  for (auto& thread : threads) thread.join();
}

int WorkerPool::threads() const {
  std::lock_guard lock(mutex_);
  return running_;
}

void WorkerPool::Work() {
  std::unique_lock lock(mutex_);
  while (true) {
    if (tasks_.empty()) {
      // Nothing waits: end, unless a task is about to come (a short grace, so that a burst of
      // submits does not start a thread per task).
      ++idle_;
      const bool woken = wake_.wait_for(lock, std::chrono::milliseconds(200),
                                        [this] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (!woken || tasks_.empty()) {
        --running_;
        finished_.push_back(std::this_thread::get_id());
        return;
      }
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace streamcar::http
