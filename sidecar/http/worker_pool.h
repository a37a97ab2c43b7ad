#pragma once
// At most a fixed number of threads for the work a service must not do on the server's loop (a
// Redis call, rendering the metrics): Submit queues a task, a thread runs it, and the task
// answers through its Responder, which posts back to the loop. Threads start when tasks wait and
// none is free, up to `max_threads` whatever the number of connections, and end when the queue
// is empty, so an idle pool holds no thread.
//
// Threads: Submit from any thread; Stop (and the destructor) from the owner, once nothing submits
// any more. Stop lets the tasks already queued run, then joins.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace streamcar::http {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(std::function<void()> task);
  void Stop();

  // Threads running now (for tests).
  int threads() const;

 private:
  void Work();

  const int max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  int running_ = 0;                          // threads started and not finished; guarded
  int idle_ = 0;                             // of those, waiting for a task; guarded
  bool stopping_ = false;                    // guarded
  std::vector<std::thread> threads_;         // guarded; finished ones are joined by Submit
  std::vector<std::thread::id> finished_;    // guarded
};

}  // namespace streamcar::http
