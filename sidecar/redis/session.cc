#include "sidecar/redis/session.h"

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/topology/topology_routes.h"

namespace streamcar::redis {

Session::Session(ConnectionOptions options, std::string role, RedisHealth* health)
    : options_(std::move(options)), role_(std::move(role)), health_(health) {
  // Until it first connects, a session counts as down: /readyz waits for all of them.
  health_->MarkDown();
  counted_down_ = true;
  if (options_.topology) routes_ = std::make_shared<TopologyRoutes>(options_.topology);
}

Session::Session(ConnectionOptions options, std::string role, RedisHealth* health,
                 std::shared_ptr<NodeRoutes> routes)
    : Session(std::move(options), std::move(role), health) {
  routes_ = std::move(routes);
}

Session::~Session() {
  if (counted_down_) health_->MarkUp();
}

void Session::MarkUp() {
  if (counted_down_) {
    counted_down_ = false;
    health_->MarkUp();
  }
}

void Session::Drop() {
  connection_.reset();
  if (!counted_down_) {
    counted_down_ = true;
    health_->MarkDown();
  }
}

Status Session::ConnectOnce(Millis* retry_in) {
  if (routes_) return RoutedConnectOnce(retry_in);
  if (connection_ != nullptr && !connection_->broken()) {
    if (!connection_->ClosedByPeer()) return Status::Ok();
    Drop();
  }
  auto opened = Connection::Open(options_);
  if (opened.ok()) {
    connection_ = std::move(*opened);
    ++generation_;
    if (reconnect_.failures() > 0) {
      LogInfo("redis connection restored", {{"role", role_},
                                            {"redis", options_.endpoint.Describe()},
                                            {"after_failures", reconnect_.failures()}});
    }
    reconnect_.Succeeded();
    if (counted_down_) {
      counted_down_ = false;
      health_->MarkUp();
    }
    return Status::Ok();
  }
  Drop();
  if (opened.status().code() == StatusCode::kFatal) return opened.status();
  *retry_in = reconnect_.Failed();
  // One line per backoff step: the steps double up to the cap, so a long outage stays quiet.
  LogWarn("redis unreachable, retrying",
          {{"role", role_},
           {"error", opened.status().message()},
           {"retry_in_ms", static_cast<int64_t>(retry_in->count())}});
  return opened.status();
}

Status Session::EnsureConnected(StopSignal& stop) {
  while (true) {
    if (stop.requested()) return Status(StatusCode::kCancelled, "stopping");
    Millis retry_in{0};
    Status status = ConnectOnce(&retry_in);
    if (status.ok() || status.code() == StatusCode::kFatal) return status;
    if (stop.WaitFor(retry_in)) return Status(StatusCode::kCancelled, "stopping");
  }
}

template <typename T>
StatusOr<T> Session::Track(StatusOr<T> result) {
  if (!result.ok() && result.status().code() != StatusCode::kServerError) {
    ++lost_connections_;
    Drop();
  }
  return result;
}

StatusOr<Reply> Session::Run(const Command& command) {
  if (routes_) return RoutedRun(command, Millis(0));
  if (!connection_) return Status(StatusCode::kIo, "not connected to Redis");
  return Track(connection_->Run(command));
}

StatusOr<Reply> Session::RunBlocking(const Command& command, Millis server_block) {
  if (routes_) return RoutedRun(command, server_block);
  if (!connection_) return Status(StatusCode::kIo, "not connected to Redis");
  return Track(connection_->RunBlocking(command, server_block));
}

StatusOr<std::vector<Reply>> Session::RunPipeline(const std::vector<Command>& commands) {
  if (routes_) return RoutedPipeline(commands);
  if (!connection_) return Status(StatusCode::kIo, "not connected to Redis");
  return Track(connection_->RunPipeline(commands));
}

}  // namespace streamcar::redis
