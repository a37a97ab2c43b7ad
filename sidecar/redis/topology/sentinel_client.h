#pragma once
// Asking Sentinel where the master is (the sentinel-clients protocol): the sentinels in order,
// the last one that answered first next time; each with the sentinels' own credentials. And the
// check on the named node that it really is the master (ROLE). Blocking; thread-safe.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"

namespace streamcar::redis {

class SentinelClient {
 public:
  // `sentinel_options`: how to reach a sentinel (scheme and TLS of the data url, the sentinels'
  // username and password, short timeouts); its host and port are replaced by each sentinel's.
  SentinelClient(std::string master_name, std::vector<keys::NodeAddress> sentinels,
                 ConnectionOptions sentinel_options);

  // SENTINEL GET-MASTER-ADDR-BY-NAME asked of each sentinel in turn until one names the master.
  // kFatal when every sentinel refused our credentials (naming redis.sentinel.password); else
  // the last sentinel's problem, retryable. `cancelled` is checked between sentinels.
  StatusOr<keys::NodeAddress> AskMaster(const std::function<bool()>& cancelled);

  // The sentinels in the order to ask them now (the last responsive one first).
  std::vector<keys::NodeAddress> Order() const;
  // Puts `sentinel` first: it answered.
  void MarkResponsive(const keys::NodeAddress& sentinel);
  // The options that reach `sentinel`.
  ConnectionOptions OptionsFor(const keys::NodeAddress& sentinel) const;

  const std::string& master_name() const { return master_name_; }

 private:
  const std::string master_name_;
  const ConnectionOptions sentinel_options_;
  mutable std::mutex mu_;
  std::vector<keys::NodeAddress> order_;  // guarded by mu_
};

// Connects to `node` with `data_options` (already pointed at it) and runs ROLE: Ok when it says
// master; kIo when it is a replica (a failover in progress) or cannot be reached; kFatal when it
// refused our credentials.
Status ConfirmMaster(const ConnectionOptions& data_options, const keys::NodeAddress& node);

}  // namespace streamcar::redis
