#include "sidecar/redis/topology/sentinel_client.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/sentinel_proto.h"

namespace streamcar::redis {

SentinelClient::SentinelClient(std::string master_name, std::vector<keys::NodeAddress> sentinels,
                               ConnectionOptions sentinel_options)
    : master_name_(std::move(master_name)),
      sentinel_options_(std::move(sentinel_options)),
      order_(std::move(sentinels)) {}

std::vector<keys::NodeAddress> SentinelClient::Order() const {
  std::lock_guard lock(mu_);
  return order_;
}

void SentinelClient::MarkResponsive(const keys::NodeAddress& sentinel) {
  std::lock_guard lock(mu_);
  auto it = std::find(order_.begin(), order_.end(), sentinel);
  if (it != order_.end()) std::rotate(order_.begin(), it, it + 1);
}

ConnectionOptions SentinelClient::OptionsFor(const keys::NodeAddress& sentinel) const {
  return PointedAt(sentinel_options_, sentinel);
}

StatusOr<keys::NodeAddress> SentinelClient::AskMaster(const std::function<bool()>& cancelled) {
  const std::vector<keys::NodeAddress> order = Order();
  Status last(StatusCode::kIo, "no sentinel configured");
  size_t refused = 0;
  for (const keys::NodeAddress& sentinel : order) {
    if (cancelled && cancelled()) return Status(StatusCode::kCancelled, "topology stopping");
    auto connection = Connection::Open(OptionsFor(sentinel));
    if (!connection.ok()) {
      if (connection.status().code() == StatusCode::kFatal) {
        ++refused;
        LogWarn("sentinel refused our credentials",
                {{"sentinel", sentinel.Describe()}, {"error", connection.status().message()}});
      }
      last = Status(StatusCode::kIo,
                    "sentinel " + sentinel.Describe() + ": " + connection.status().message());
      continue;
    }
    auto reply =
        (*connection)->Run(Command("SENTINEL").Arg("GET-MASTER-ADDR-BY-NAME").Arg(master_name_));
    if (!reply.ok()) {
      if (reply.status().IsServerError("NOPERM") || reply.status().IsServerError("NOAUTH")) {
        ++refused;
      }
      last = Status(StatusCode::kIo,
                    "sentinel " + sentinel.Describe() + ": " + reply.status().message());
      continue;
    }
    auto address = ParseMasterAddr(reply->view());
    if (!address) {
      last = Status(StatusCode::kIo, "sentinel " + sentinel.Describe() +
                                         " does not know a master named \"" + master_name_ + "\"");
      continue;
    }
    MarkResponsive(sentinel);
    return *address;
  }
  if (refused > 0 && refused == order.size()) {
    return Status(StatusCode::kFatal,
                  "every sentinel refused our credentials: check redis.sentinel.username and "
                  "redis.sentinel.password (last: " +
                      last.message() + ")");
  }
  return last;
}

Status ConfirmMaster(const ConnectionOptions& data_options, const keys::NodeAddress& node) {
  auto connection = Connection::Open(data_options);
  if (!connection.ok()) {
    return Status(connection.status().code(),
                  "master " + node.Describe() + ": " + connection.status().message());
  }
  auto role = (*connection)->Run(Command("ROLE"));
  if (!role.ok()) {
    return Status(role.status().code() == StatusCode::kFatal ? StatusCode::kFatal : StatusCode::kIo,
                  "ROLE on " + node.Describe() + ": " + role.status().message());
  }
  if (!RoleIsMaster(role->view())) {
    return Status(StatusCode::kIo,
                  "the sentinels name " + node.Describe() + " but it is not a master (yet)");
  }
  return Status::Ok();
}

}  // namespace streamcar::redis
