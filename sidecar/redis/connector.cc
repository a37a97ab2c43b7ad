#include "sidecar/redis/connector.h"

#include <thread>
#include <utility>

namespace streamcar::redis {

Connector::~Connector() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return running_ == 0; });
}

size_t Connector::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void Connector::RunOffLoop(std::function<std::function<void()>()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++running_;
  }
  // Detached: the destructor waits on the count instead of joining, and the thread touches
  // nothing of the connector after the notify under the lock.
  std::thread([this, work = std::move(work)]() mutable {
    std::function<void()> result = work();
    // Whatever the work captured (connection options holding the process's topology) goes
    // before the count does: the destructor may return, and Run end, right after it.
    work = nullptr;
    loop_.Post(std::move(result));
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    idle_.notify_all();
  }).detach();
}

void Connector::OpenRedis(ConnectionOptions options,
                          std::function<void(StatusOr<OpenedConnection>)> done) {
  RunOffLoop([options = std::move(options), done = std::move(done)]() mutable {
    StatusOr<OpenedConnection> result = [&]() -> StatusOr<OpenedConnection> {
      auto connection = Connection::Open(options);
      if (!connection.ok()) return connection.status();
      OpenedConnection opened;
      opened.node = (*connection)->node();
      // Best effort, like CLIENT SETNAME: an ACL user may lack CLIENT; only I/O failures count.
      auto id = (*connection)->Run(Command("CLIENT").Arg("ID"));
      if (id.ok() && id->view().IsInteger()) {
        opened.client_id = id->view().Integer();
      } else if (!id.ok() && id.status().code() != StatusCode::kServerError) {
        return id.status();
      }
      auto transport = std::move(**connection).TakeTransport();
      if (!transport.ok()) return transport.status();
      opened.transport = std::move(*transport);
      return opened;
    }();
    return std::function<void()>(
        [done = std::move(done), result = std::make_shared<StatusOr<OpenedConnection>>(
                                     std::move(result))]() mutable { done(std::move(*result)); });
  });
}

}  // namespace streamcar::redis
