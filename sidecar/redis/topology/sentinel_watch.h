#pragma once
// One SUBSCRIBE +switch-master connection to a sentinel: Sentinel announces each failover there
// ("<name> <old-ip> <old-port> <new-ip> <new-port>") as soon as it has promoted a replica, long
// before the old master is demoted (about 11 s on Redis 7.0.15, during which it still accepts
// writes). Single-threaded: the topology's background thread owns it.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"

namespace streamcar::redis {

class SwitchMasterWatch {
 public:
  // Connects (AUTH as `sentinel` says) and subscribes; Ok once the subscription is confirmed.
  static StatusOr<std::unique_ptr<SwitchMasterWatch>> Open(const ConnectionOptions& sentinel);
  ~SwitchMasterWatch();
  SwitchMasterWatch(const SwitchMasterWatch&) = delete;
  SwitchMasterWatch& operator=(const SwitchMasterWatch&) = delete;

  // Waits until `deadline` for a switch of `master_name`: its new address, or nullopt when the
  // deadline passed first (the watch stays usable). Messages about other masters are skipped.
  // An error when the connection is lost or garbled: open another watch.
  StatusOr<std::optional<keys::NodeAddress>> Next(std::string_view master_name,
                                                  SteadyTime deadline);

 private:
  explicit SwitchMasterWatch(std::unique_ptr<Transport> transport);

  std::unique_ptr<Transport> transport_;
  ReaderPtr reader_;
};

}  // namespace streamcar::redis
