#pragma once
// One entry source of a subscription (runtime/entry_source.h) on a loop of its own against a real
// redis-server, made by an Ownership (plain unless a test gives another), with a recording
// settlement in place of the loop's: the harness of plain_intake_test.cc and, for one shard of
// a sharded subscription, sharding/fenced_intake_test.cc.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/connector.h"
#include "sidecar/runtime/entry_source.h"
#include "sidecar/runtime/group_intake.h"
#include "sidecar/runtime/metrics_observer.h"
#include "sidecar/runtime/ownership.h"
#include "sidecar/runtime/plain_ownership.h"
#include "tests/support/redis_server.h"

namespace streamcar::runtime::intake_testing {

using testing::RedisServer;

inline config::Subscription Sub() {
  config::Subscription sub;
  sub.stream = "orders";
  sub.group = "g";
  sub.start = "beginning";
  sub.name = "orders/g";
  sub.dead_letter.stream = "orders:dlq";
  sub.retry.max_attempts = 5;
  // The reclaim beat runs often, but claims nothing: the reclaim test shortens min_idle.
  sub.claim.min_idle = Millis(60000);
  sub.claim.interval = Millis(100);
  sub.claim.count = 100;
  return sub;
}

// Sub() with entries ordered by their field "n" (SPEC 3.5).
inline config::Subscription KeyedSub() {
  config::Subscription sub = Sub();
  sub.ordering.key_field = "n";
  return sub;
}

// One subscription's intake on a loop of its own, run by the test thread until what it waits for
// has happened; a recording settlement stands in for the loop's.
class Harness {
 public:
  // `ownership`: whose source reads (null: a plain subscription's, PlainOwnership).
  explicit Harness(const RedisServer& server, size_t capacity = 100,
                   config::Subscription sub = Sub(),
                   std::shared_ptr<const Ownership> ownership = nullptr)
      : sub_(std::move(sub)),
        ownership_(ownership ? std::move(ownership)
                             : std::shared_ptr<const Ownership>(&PlainOwnership::Instance(),
                                                                [](const Ownership*) {})),
        ops_(ownership_->MakeOps(sub_, "c1")),
        ledger_(capacity, sub_.ordering.key_field) {
    auto loop = EventLoop::Create(SystemClock::Instance());
    EXPECT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    loop_->SetFatalHook([](const Status& s) { ADD_FAILURE() << s.ToString(); });
    connector_ = std::make_unique<redis::Connector>(*loop_);
    redis::ConnectionOptions options = server.ClientOptions();
    options.connect_timeout = Millis(1000);
    options.command_timeout = Millis(1000);
    // As the loop's: the read connection loads the scripts when every step is one.
    read_ = std::make_unique<redis::AsyncConnection>(
        *loop_, *connector_, options, "read", nullptr,
        ops_->EveryStepIsAScript() ? ops_->Scripts() : std::span<const redis::Script* const>{});
    command_ = std::make_unique<redis::AsyncConnection>(*loop_, *connector_, options, "command",
                                                        nullptr, ops_->Scripts());
    IntakeSettlement settlement{
        [this](std::string id) { acks_.push_back(std::move(id)); },
        [this](std::string id, redis::DeadLetterMeta) { dead_.push_back(std::move(id)); }};
    intake_ = std::make_unique<Intake>(sub_.name, delivery::OutcomePolicyOf(sub_), &ledger_,
                                       std::move(settlement), &observer_, loop_->clock());
    EntrySource::Callbacks callbacks;
    callbacks.group_ready = [this] { ++group_ready_; };
    callbacks.fatal = [this](const Status& s) { fatal_ = s; };
    callbacks.ack_mode = [this](redis::AckMode mode) {
      EXPECT_EQ(ledger_.held(), 0u) << "the ack mode comes before any entry";
      ack_mode_ = mode;
    };
    callbacks.admitted = [this] { ++admitted_; };
    callbacks.drained = [this] { ++drained_; };
    callbacks.refused = [this](int64_t installed, std::string_view op) {
      refused_by_ = installed;
      refused_op_ = op;
    };
    source_ =
        ownership_->MakeSource(SourceParts{*loop_, sub_, *ops_, read_.get(), command_.get(),
                                           &ledger_, intake_.get(), nullptr, std::move(callbacks)});
  }
  ~Harness() {
    source_.reset();
    read_.reset();
    command_.reset();
    connector_.reset();
    loop_.reset();
  }

  bool RunUntil(const std::function<bool()>& condition, Millis timeout = Millis(20000)) {
    const SteadyTime deadline = SteadyClock::now() + timeout;
    while (!condition()) {
      if (SteadyClock::now() >= deadline) return false;
      loop_->RunOnce(Millis(20));
    }
    return true;
  }
  // Runs the loop for `period` whatever happens: only to show that something does NOT happen.
  void RunFor(Millis period) {
    const SteadyTime until = SteadyClock::now() + period;
    while (SteadyClock::now() < until) loop_->RunOnce(Millis(10));
  }

  // Takes the ledger's ready entries as delivered and acknowledged (in Redis too).
  void Settle(const RedisServer& server, size_t max) {
    for (const EntryRef& ref : ledger_.TakeReady(max, loop_->clock().Now())) {
      ASSERT_EQ(ledger_.Accept(ref), EntryLedger::Applied::kApplied);
      server.Run({"XACK", sub_.stream, sub_.group, ref.id});
      ASSERT_TRUE(ledger_.AckConfirmed(ref.id));
    }
  }

  // Every source of these tests reads as a consumer of the group.
  GroupIntake& source() { return static_cast<GroupIntake&>(*source_); }
  EntryLedger& ledger() { return ledger_; }
  redis::AsyncConnection& read() { return *read_; }
  redis::AsyncConnection& command() { return *command_; }
  // What the routing counted (streamcar_deleted_entries_total, streamcar_claimed_total).
  const admin::SubscriptionMetrics& metrics() const { return metrics_; }

  config::Subscription sub_;
  std::shared_ptr<const Ownership> ownership_;
  std::unique_ptr<redis::SubscriptionOps> ops_;
  EntryLedger ledger_;
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription(sub_.name);
  MetricsObserver observer_{&metrics_};
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<redis::Connector> connector_;
  std::unique_ptr<redis::AsyncConnection> read_;
  std::unique_ptr<redis::AsyncConnection> command_;
  std::unique_ptr<Intake> intake_;
  std::unique_ptr<EntrySource> source_;
  std::vector<std::string> acks_;
  std::vector<std::string> dead_;
  int group_ready_ = 0;
  int admitted_ = 0;
  int drained_ = 0;
  std::optional<redis::AckMode> ack_mode_;
  std::optional<Status> fatal_;
  std::optional<int64_t> refused_by_;  // EntrySource::Callbacks::refused
  std::string refused_op_;             // streamcar_fenced_ops_total's op label
};

inline std::string Add(const RedisServer& server, const std::string& n) {
  return std::string(server.Run({"XADD", "orders", "*", "n", n}).view().Str());
}

// [id, consumer, idle, count] of one pending id, or an empty row.
struct PendingRow {
  std::string consumer;
  int64_t count = 0;
};
inline PendingRow Pending(const RedisServer& server, const std::string& id) {
  redis::Reply reply = server.Run({"XPENDING", "orders", "g", id, id, "1"});
  if (reply.view().Size() == 0) return {};
  return {std::string(reply.view()[0][1].Str()), reply.view()[0][3].Integer()};
}
inline int64_t PendingCount(const RedisServer& server) {
  return server.Run({"XPENDING", "orders", "g"}).view()[0].Integer();
}
// A client is blocked in Redis (our BLOCK read).
inline bool Blocked(const RedisServer& server) {
  return server.Run({"CLIENT", "LIST"}).view().Str().find(" flags=b ") != std::string::npos;
}

}  // namespace streamcar::runtime::intake_testing
