#pragma once
// NodeRoutes answered by the process's Topology: what a routed Session uses in production.

#include <memory>

#include "sidecar/redis/topology/node_routes.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::redis {

class TopologyRoutes : public NodeRoutes {
 public:
  explicit TopologyRoutes(std::shared_ptr<Topology> topology) : topology_(std::move(topology)) {}

  bool ByKeySlot() const override;
  StatusOr<keys::NodeAddress> MasterFor(int slot) override { return topology_->MasterFor(slot); }
  void OnMoved(const Redirect& redirect, const keys::NodeAddress& answered) override {
    topology_->OnMoved(redirect, answered);
  }
  void OnAsk() override { topology_->OnAsk(); }
  void OnNodeFailed(const keys::NodeAddress& node, std::string_view why) override {
    topology_->OnNodeFailed(node, why);
  }
  ConnectionOptions OptionsFor(const keys::NodeAddress& node) const override {
    return topology_->OptionsFor(node);
  }

 private:
  std::shared_ptr<Topology> topology_;
};

}  // namespace streamcar::redis
