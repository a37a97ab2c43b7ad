#pragma once
// A real Redis Sentinel deployment for one test: one master, `replicas` replicas and `sentinels`
// sentinels (quorum: a majority) monitoring it as "mymaster", all on 127.0.0.1 with free ports,
// killed at the end. Sentinels are `redis-server <conf> --sentinel` (no redis-sentinel package
// needed); each rewrites its own configuration file in a directory of the set.

#include <memory>
#include <string>
#include <vector>

#include "sidecar/redis/connection.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {

struct SentinelSetOptions {
  int replicas = 1;
  int sentinels = 3;
  std::string master_name = "mymaster";
  std::string data_password;      // requirepass/masterauth of the data nodes (auth-pass)
  std::string sentinel_password;  // requirepass of the sentinels themselves
  int down_after_ms = 1000;
  int failover_timeout_ms = 3000;
};

class SentinelSet {
 public:
  // Starts everything and returns once every sentinel sees the master, its replicas (in sync)
  // and the other sentinels, and SENTINEL CKQUORUM says OK. Fails the test otherwise.
  explicit SentinelSet(SentinelSetOptions options = {});
  ~SentinelSet();

  const SentinelSetOptions& options() const { return options_; }
  // Data node i: 0 is the first master, 1.. the replicas.
  RedisServer& data(int i) { return *data_[i]; }
  int data_count() const { return static_cast<int>(data_.size()); }
  RedisServer& sentinel(int i) { return *sentinels_[i]; }
  int sentinel_count() const { return static_cast<int>(sentinels_.size()); }

  // The master's port as the first answering sentinel reports it (SENTINEL
  // GET-MASTER-ADDR-BY-NAME), or -1.
  int MasterPort() const;
  std::string MasterAddress() const { return "127.0.0.1:" + std::to_string(MasterPort()); }
  // The data node that is the master now, or -1.
  int MasterIndex() const;
  // The sentinels as a YAML flow sequence, for redis.sentinel.addresses.
  std::string AddressesYaml() const;

  // SENTINEL FAILOVER; returns the new master's index once every sentinel reports it and its
  // ROLE says master. The old master is reconfigured as a replica later (sentinel's INFO period).
  int Failover();
  // kill -9 of the master; returns the new master's index, as Failover() does.
  int KillMaster();
  // Waits until every sentinel reports a master other than `old_master` and ROLE on it says
  // master; returns its index.
  int WaitForNewMaster(int old_master, int seconds = 30);

  // Runs a command on sentinel i (error replies are returned; an I/O error fails the test).
  redis::Reply RunOnSentinel(int i, const std::vector<std::string>& args) const;

 private:
  // Starts everything and waits (the constructor's work: ASSERT needs a void function).
  void Start();

  SentinelSetOptions options_;
  std::string conf_dir_;
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace streamcar::testing
