#include "sidecar/sharding/heartbeat_link.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <utility>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "sidecar/sharding/heartbeat_script.h"

namespace streamcar::sharding {
namespace {

const std::array<const redis::Script*, 1> kScripts = {&HeartbeatScript()};

// An error reply that says the script ran nowhere: the command is sent again (the connection
// follows a MOVED, ASK or READONLY to the slot's node by itself).
bool RanNowhere(const redis::ReplyView& reply) {
  switch (redis::Classify(reply, nullptr)) {
    case redis::ReplyKind::kMoved:
    case redis::ReplyKind::kAsk:
    case redis::ReplyKind::kTryAgain:
    case redis::ReplyKind::kClusterDown:
    case redis::ReplyKind::kLoading:
    case redis::ReplyKind::kMasterDown:
    case redis::ReplyKind::kReadOnly:
      return true;
    default:
      return false;
  }
}

}  // namespace

HeartbeatLink::HeartbeatLink(EventLoop& loop, redis::ConnectionOptions options, std::string role,
                             redis::RedisHealth* health)
    : loop_(loop),
      connector_(loop),
      connection_(loop, connector_, std::move(options), std::move(role), health, kScripts),
      retry_timer_(loop.CreateTimer([this] { Send(); })) {
  connection_.OnReady([this] { Ready(); });
}

HeartbeatLink::~HeartbeatLink() = default;

void HeartbeatLink::Beat(redis::Command call, SteadyTime deadline,
                         std::function<void(StatusOr<redis::Reply>)> done) {
  beat_ = std::make_unique<InFlight>(
      InFlight{.call = std::move(call), .deadline = deadline, .done = std::move(done)});
  Send();
}

void HeartbeatLink::Send() {
  // A try gets what is left of the beat's deadline (a command timeout at most), so that a beat
  // ends within about one command timeout, as the blocking session's did, and the member's lease
  // check never waits long on it.
  const auto left = std::chrono::duration_cast<Millis>(beat_->deadline - loop_.clock().Now());
  const Millis timeout = std::clamp(left, kShortestTry, connection_.command_timeout());
  connection_.SendBatch({beat_->call}, timeout,
                        [this](redis::BatchResult result) { OnResult(std::move(result)); });
}

void HeartbeatLink::Ready() {
  if (beat_ != nullptr && retry_timer_->armed()) {
    retry_timer_->Cancel();
    Send();
  }
  if (on_ready_) on_ready_();
}

void HeartbeatLink::OnResult(redis::BatchResult result) {
  if (result.written || result.failure.ok()) beat_->reached_redis = true;
  if (!result.failure.ok()) {
    // Not written: it ran nowhere. Written without an answer: it may have run.
    if (!result.written) return RetryOrFail(result.failure);
    return End(result.failure);
  }
  redis::Reply& reply = result.replies.front();
  if (redis::IsNoScript(reply.view()) && !beat_->loaded) return LoadAndSend();
  if (RanNowhere(reply.view())) return RetryOrFail(redis::ErrorOf(reply.view()));
  if (reply.IsError()) return End(redis::ErrorOf(reply.view()));
  End(std::move(reply));
}

void HeartbeatLink::LoadAndSend() {
  beat_->loaded = true;
  connection_.SendBatch(
      {HeartbeatScript().Load()}, connection_.command_timeout(), [this](redis::BatchResult r) {
        const bool answered = r.failure.ok();
        if (answered && !r.replies.front().IsError()) return Send();
        if (!answered && r.written) return End(r.failure);
        const Status why = answered ? redis::ErrorOf(r.replies.front().view()) : r.failure;
        if (!answered || RanNowhere(r.replies.front().view())) {
          beat_->loaded = false;  // loaded nowhere: the call's NOSCRIPT comes again
          return RetryOrFail(why);
        }
        // A refused SCRIPT LOAD (an ACL rule) is the answer to report, not its NOSCRIPT.
        End(why);
      });
}

void HeartbeatLink::RetryOrFail(Status why) {
  const Millis delay = beat_->retries.Failed();
  if (loop_.clock().Now() + delay >= beat_->deadline) return End(std::move(why));
  retry_timer_->ArmIn(delay);
}

void HeartbeatLink::End(StatusOr<redis::Reply> answer) {
  std::unique_ptr<InFlight> beat = std::move(beat_);
  last_reached_redis_ = beat->reached_redis;
  beat->done(std::move(answer));
}

}  // namespace streamcar::sharding
