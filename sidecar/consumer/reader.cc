#include "sidecar/consumer/reader.h"

#include <prometheus/counter.h>

#include <algorithm>
#include <map>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"

namespace streamcar::consumer {
namespace {

// Upper bound of one read's COUNT, even when there is more room.
constexpr size_t kMaxReadCount = 1000;

}  // namespace

Reader::Reader(const config::Subscription& subscription, redis::StreamOps ops,
               std::unique_ptr<redis::Session> session, Dispatcher* dispatcher, Settler* settler,
               admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop,
               ReaderCallbacks callbacks)
    : sub_(subscription),
      ops_(std::move(ops)),
      session_(std::move(session)),
      dispatcher_(dispatcher),
      settler_(settler),
      metrics_(metrics),
      loop_(loop),
      callbacks_(std::move(callbacks)) {}

Reader::~Reader() { StopAndJoin(); }

void Reader::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Reader::Join() {
  if (thread_.joinable()) thread_.join();
}

void Reader::Run() {
  if (Setup() && DrainOwnPending()) {
    drained_ = true;
    settler_->EnableAutoClaim();
    ReadNew();
  }
  loop_->Retire();
}

bool Reader::Setup() {
  int failures = 0;
  while (true) {
    loop_->Beat();
    Status status = session_->EnsureConnected(stop_);
    if (status.code() == StatusCode::kCancelled) return false;
    if (status.code() == StatusCode::kFatal) {
      callbacks_.fatal(status);
      return false;
    }
    status = ops_.EnsureGroup(*session_, sub_.StartId());
    if (status.ok()) break;
    if (status.code() == StatusCode::kFatal) {
      callbacks_.fatal(status);
      return false;
    }
    LogError("cannot ensure consumer group",
             {{"subscription", sub_.name}, {"error", status.message()}});
    if (stop_.WaitFor(ReconnectDelay(failures++, Millis(200), Millis(5000), UnitRandom())))
      return false;
  }

  // A dead-letter key of another type would make every dead letter fail (SPEC 3.3): say so now.
  auto dlq_type = session_->Run(redis::Command("TYPE").Arg(sub_.dead_letter.stream));
  if (!dlq_type.ok()) return Recover(dlq_type.status()) && Setup();
  if (auto type = dlq_type->view().Str(); type != "stream" && type != "none") {
    callbacks_.fatal(Status(StatusCode::kFatal,
                            "subscription " + sub_.name + ": dead_letter.stream key \"" +
                                sub_.dead_letter.stream + "\" exists and is a " +
                                std::string(type) +
                                ", not a stream (WRONGTYPE); streamcar leaves it untouched: fix "
                                "the key or the configuration"));
    return false;
  }
  if (sub_.ack.delete_entries) {
    auto has_ackdel = redis::StreamOps::HasAckDel(*session_);
    if (!has_ackdel.ok()) return Recover(has_ackdel.status()) && Setup();
    if (*has_ackdel) {
      settler_->SetAckMode(AckMode::kAckDel);
    } else {
      auto groups = ops_.GroupCount(*session_);
      if (!groups.ok()) return Recover(groups.status()) && Setup();
      if (*groups != 1) {
        callbacks_.fatal(Status(
            StatusCode::kFatal,
            "subscription " + sub_.name + ": ack.delete needs XACKDEL (not on this server) or " +
                "its group to be the only group of stream \"" + sub_.stream + "\" (it has " +
                std::to_string(*groups) + "): deleting would take entries from the other groups"));
        return false;
      }
      settler_->SetAckMode(AckMode::kAckThenDelete);
    }
  }
  LogInfo("consumer group ready", {{"subscription", sub_.name},
                                   {"stream", sub_.stream},
                                   {"group", sub_.group},
                                   {"consumer", ops_.consumer()}});
  callbacks_.group_ready();
  return true;
}

size_t Reader::Route(std::vector<StreamEntry> entries) {
  std::vector<std::string> deleted;
  std::vector<StreamEntry> deliverable;
  deliverable.reserve(entries.size());
  for (auto& entry : entries) {
    if (entry.deleted) {
      deleted.push_back(entry.id);  // DESIGN.md trap 1: acknowledge, count, never POST
      continue;
    }
    if (settler_->ExhaustedOnArrival(entry)) {
      settler_->DeadLetterExhausted(std::move(entry));
      continue;
    }
    deliverable.push_back(std::move(entry));
  }
  if (!deleted.empty()) {
    metrics_->deleted_entries->Increment(static_cast<double>(deleted.size()));
    settler_->DirectAckDeleted(std::move(deleted));
  }
  return dispatcher_->Admit(std::move(deliverable));
}

bool Reader::DrainOwnPending() {
  // History reads from an advancing cursor: re-reading from 0 would count every delivery again
  // (DESIGN.md trap 2). Each read of an entry counts one delivery, as a redelivery should.
  std::string cursor = "0";
  size_t drained = 0;
  while (!stop_.requested()) {
    loop_->Beat();
    const size_t room = dispatcher_->WaitForRoom(Millis(500));
    if (room == 0) continue;
    auto entries =
        ops_.ReadOwnPending(*session_, cursor, static_cast<int>(std::min(room, kMaxReadCount)));
    if (!entries.ok()) {
      if (!Recover(entries.status())) return false;
      continue;
    }
    if (entries->empty()) {
      if (drained > 0) {
        LogInfo("recovered own pending entries",
                {{"subscription", sub_.name}, {"count", static_cast<int64_t>(drained)}});
      }
      return true;
    }
    cursor = entries->back().id;
    const size_t count = entries->size();
    const size_t admitted = Route(std::move(*entries));
    metrics_->claimed_drain->Increment(static_cast<double>(admitted));
    drained += count;
  }
  return false;
}

StatusOr<size_t> Reader::StillOwned(std::vector<std::string>* ids) {
  auto reply = session_->Run(ops_.KeepAlive(*ids));
  if (!reply.ok() && reply.status().IsServerError("NOSCRIPT")) {
    for (const auto* script : redis::StreamOps::Scripts()) {
      if (auto loaded = session_->Run(script->Load()); !loaded.ok()) return loaded.status();
    }
    reply = session_->Run(ops_.KeepAlive(*ids));
  }
  if (!reply.ok()) return reply.status();
  const auto lost = redis::StreamOps::ParseIds(reply->view());
  std::erase_if(*ids, [&](const std::string& id) {
    return std::find(lost.begin(), lost.end(), id) != lost.end();
  });
  return lost.size();
}

void Reader::RecoverOwnPending() {
  constexpr int kPage = 1000;
  std::string start = "-";
  size_t recovered = 0;
  while (!stop_.requested()) {
    auto page = ops_.OwnPendingIds(*session_, start, kPage);
    if (!page.ok()) {
      // Tried again on the next lost connection or ambiguous settlement; the reclaim beat covers
      // the rest after claim.min_idle.
      LogWarn("cannot read own pending entries",
              {{"subscription", sub_.name}, {"error", page.status().message()}});
      return;
    }
    if (page->empty()) break;
    std::vector<std::string> missing;
    std::map<std::string, int> counts;
    for (const auto& [id, count] : *page) {
      if (dispatcher_->Holds(id) || settler_->Settling(id)) continue;
      missing.push_back(id);
      counts[id] = count;
    }
    if (!missing.empty()) {
      // Refresh their lease in the same step as checking they are still ours: a peer's reclaim
      // after an outage longer than claim.min_idle must not deliver them at the same time.
      auto lost = StillOwned(&missing);
      if (!lost.ok()) {
        LogWarn("cannot read own pending entries",
                {{"subscription", sub_.name}, {"error", lost.status().message()}});
        return;
      }
    }
    if (!missing.empty()) {
      auto entries = ops_.Fetch(*session_, missing);
      if (!entries.ok()) {
        LogWarn("cannot read own pending entries",
                {{"subscription", sub_.name}, {"error", entries.status().message()}});
        return;
      }
      for (auto& entry : *entries) entry.attempts = counts[entry.id];
      recovered += entries->size();
      metrics_->claimed_drain->Increment(static_cast<double>(Route(std::move(*entries))));
    }
    if (page->size() < static_cast<size_t>(kPage)) break;
    start = "(" + page->back().first;
  }
  if (recovered > 0) {
    LogInfo("recovered own pending entries nothing here held",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(recovered)}});
  }
}

void Reader::ReadNew() {
  while (!stop_.requested()) {
    loop_->Beat();
    if (settler_->TakeRecoveryRequest()) RecoverOwnPending();
    const size_t room = dispatcher_->WaitForRoom(Millis(500));
    if (room == 0) continue;
    auto entries = ops_.ReadNew(*session_, static_cast<int>(std::min(room, kMaxReadCount)), kBlock);
    if (!entries.ok()) {
      if (!Recover(entries.status())) return;
      continue;
    }
    if (!entries->empty()) Route(std::move(*entries));
  }
}

bool Reader::Recover(const Status& status) {
  if (status.IsServerError("NOGROUP")) {
    // The key was deleted or evicted with its groups: re-create at 0 so nothing written since is
    // skipped (DESIGN.md trap 10: log once, not a flood).
    LogWarn("consumer group missing; re-creating it at 0",
            {{"subscription", sub_.name}, {"stream", sub_.stream}, {"group", sub_.group}});
    Status created = ops_.EnsureGroup(*session_, "0");
    if (created.code() == StatusCode::kFatal) {
      callbacks_.fatal(created);
      return false;
    }
    if (created.ok()) {
      nogroup_failures_ = 0;
      return true;
    }
    // Out of memory, read-only, or no permission: wait a growing step rather than spin.
    LogError("cannot re-create the consumer group",
             {{"subscription", sub_.name}, {"error", created.message()}});
    return !stop_.WaitFor(
        ReconnectDelay(nogroup_failures_++, Millis(200), Millis(5000), UnitRandom()));
  }
  if (status.IsServerError("WRONGTYPE")) {
    callbacks_.fatal(Status(StatusCode::kFatal, "key \"" + sub_.stream +
                                                    "\" is no longer a stream (WRONGTYPE); "
                                                    "streamcar leaves it untouched"));
    return false;
  }
  if (status.code() == StatusCode::kServerError) {
    LogError("read failed", {{"subscription", sub_.name}, {"error", status.message()}});
    return !stop_.WaitFor(Millis(1000));
  }
  LogWarn("redis read failed; reconnecting",
          {{"subscription", sub_.name}, {"error", status.message()}});
  Status connected = session_->EnsureConnected(stop_);
  if (connected.code() == StatusCode::kFatal) {
    callbacks_.fatal(connected);
    return false;
  }
  // A reply lost with the connection may have carried entries that are now pending for this
  // consumer and held by nobody: deliver them now, not after claim.min_idle.
  if (connected.ok() && drained_) RecoverOwnPending();
  return connected.ok();
}

}  // namespace streamcar::consumer
