#pragma once
// A delivery worker: one thread with its own keep-alive HTTP client. It takes entries from the
// dispatcher, POSTs them (one per request, or a batch), decides each outcome with the pure policy
// and hands it to the settler. A refused connection hands the entries back without spending an
// attempt and pauses delivery.

#include <thread>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"
#include "sidecar/consumer/settler.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/http_deliverer.h"

namespace streamcar::consumer {

class Worker {
 public:
  Worker(const config::Subscription& subscription, Dispatcher* dispatcher, Settler* settler,
         admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop);
  ~Worker();

  void Start();
  // Returns once the worker finished its current request (the dispatcher must be stopped first).
  void Join();
  bool Joinable() const { return thread_.joinable(); }

 private:
  void Run();
  void DeliverOne(HeldEntry* entry);
  void DeliverBatch(const std::vector<HeldEntry*>& entries);
  // The handler refused: give the entries back and pause.
  void HandlerRefused(const std::vector<HeldEntry*>& entries, const std::string& error);
  void HandlerAnswered();
  void Count(const delivery::Decision& decision);

  const config::Subscription& sub_;
  Dispatcher* dispatcher_;
  Settler* settler_;
  admin::SubscriptionMetrics* metrics_;
  admin::Watchdog::Loop* loop_;
  delivery::OutcomePolicy policy_;
  delivery::EncodeContext context_;
  delivery::HttpDeliverer deliverer_;
  delivery::HttpRequest request_;  // reused between deliveries
  int refused_streak_ = 0;
  std::thread thread_;
};

}  // namespace streamcar::consumer
