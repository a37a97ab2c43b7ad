#include "sidecar/log/append_group.h"

#include <algorithm>
#include <utility>

#include "sidecar/redis/script.h"
#include "sidecar/redis/topology/route_attempt.h"

namespace streamcar::log {
namespace {

// While a lane waits for its connection (connecting, following its slot) or for a node that said
// "later" (TRYAGAIN), it looks again after this, doubling up to the cap.
constexpr Millis kHoldFirst{10};
constexpr Millis kHoldCap{500};

size_t BytesOf(const AppendRequest& request) {
  size_t bytes =
      request.entry_id.size() + request.idempotency_key.size() + request.shard_key.size();
  for (const auto& [name, value] : request.fields) bytes += name.size() + value.size();
  return bytes;
}

}  // namespace

AppendGroup::AppendGroup(const Producer* producer, AppendLinks* links)
    : producer_(producer), links_(links), kick_(links->loop().CreateTimer([this] { Kick(); })) {}

AppendGroup::~AppendGroup() { lifeline_.reset(); }

std::optional<AppendGroup::Outcome> AppendGroup::Append(AppendRequest request, Done done) {
  // Refused alone: a malformed append in a group would make the call refuse the whole group.
  if (Status valid = producer_->Validate(request); !valid.ok()) return Outcome{valid, {}, 1};
  auto target = producer_->Target(request);
  if (!target.ok()) return Outcome{target.status(), {}, 1};
  const size_t bytes = BytesOf(request);
  Lane& lane = lanes_[*target];
  if (!lane.waiting.empty() &&
      (lane.waiting.size() >= kMaxQueued || lane.bytes + bytes > kMaxQueuedBytes)) {
    return Outcome{
        Status(StatusCode::kTimeout, std::to_string(lane.waiting.size()) + " appends to " +
                                         *target + " are waiting for Redis already; try again"),
        {},
        1};
  }
  lane.bytes += bytes;
  lane.waiting.push_back(Queued{std::move(request), std::move(done), bytes});
  // It goes at the end of the round, with what the round's other reads queue; a lane with
  // kMaxInFlight groups out sends when one answers, and a held one when its wait ends.
  if (lane.in_flight < kMaxInFlight && !lane.held_since) KickIn(Millis(0));
  return std::nullopt;
}

void AppendGroup::KickIn(Millis delay) {
  const SteadyTime at = links_->loop().clock().Now() + delay;
  if (!kick_->armed() || *kick_->deadline() > at) kick_->ArmAt(at);
}

void AppendGroup::Kick() {
  // A held lane waits out its backoff even when another lane's append kicks sooner: each early
  // send would spend one of its tries on a connection that is still following its slot.
  const SteadyTime now = links_->loop().clock().Now();
  std::vector<std::string> idle;
  for (const auto& [key, lane] : lanes_) {
    if (lane.in_flight >= kMaxInFlight || lane.waiting.empty()) continue;
    if (lane.hold_until && *lane.hold_until > now) {
      KickIn(std::chrono::ceil<Millis>(*lane.hold_until - now));
      continue;
    }
    idle.push_back(key);
  }
  for (const std::string& key : idle) SendNext(key);
}

void AppendGroup::SendNext(const std::string& key) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return;
  Lane& lane = it->second;
  lane.hold_until.reset();
  if (lane.waiting.empty()) {
    if (lane.in_flight == 0) lanes_.erase(it);
    return;
  }
  if (lane.in_flight >= kMaxInFlight) return;  // the next answer sends it
  // What went back is sent again only once every group sent before it has answered: those may
  // go back too, behind it, and none of them may land ahead of it.
  if (lane.requeued > 0 && lane.in_flight > 0) return;
  redis::AsyncConnection& connection = links_->For(key);
  if (connection.unreachable()) {
    FailAll(it, Status(StatusCode::kIo, "Redis is unreachable"));
    return;
  }
  if (!connection.ready()) {
    Hold(it);
    return;
  }
  // The group: what fits one call, in arrival order.
  Group group;
  group.number = ++lane.sent;
  size_t group_bytes = 0;
  while (!lane.waiting.empty() && group.requests.size() < Producer::kMaxBatch &&
         (group.requests.empty() || group_bytes + lane.waiting.front().bytes <= kMaxGroupBytes)) {
    Queued& next = lane.waiting.front();
    group_bytes += next.bytes;
    group.requests.push_back(std::move(next.request));
    group.dones.push_back(std::move(next.done));
    group.bytes.push_back(next.bytes);
    lane.waiting.pop_front();
  }
  lane.bytes -= group_bytes;
  lane.requeued -= std::min(lane.requeued, group.requests.size());
  auto prepared = producer_->Prepare(group.requests, Producer::Grouping::kIndependent);
  if (!prepared.ok() || prepared->commands.empty()) {
    // Decided without Redis (every id out of range; or refused, which Validate rules out).
    StatusOr<std::vector<AppendResult>> results = prepared.status();
    if (prepared.ok()) {
      std::vector<AppendResult> decided;
      for (auto& one : prepared->decided) decided.push_back(std::move(*one));
      results = std::move(decided);
    }
    Decide(group, std::move(results));
    SendNext(key);
    return;
  }
  std::vector<redis::Command> commands;
  const bool plain = prepared->form == Producer::Form::kPlain;
  const size_t loads = lane.load_script && !plain ? 1 : 0;
  if (loads > 0) commands.push_back(Producer::Script().Load());
  for (redis::Command& command : prepared->commands) commands.push_back(std::move(command));
  prepared->commands.clear();
  ++lane.in_flight;
  ++groups_sent_;
  appends_sent_ += group.requests.size();
  std::weak_ptr<bool> alive = lifeline_;
  // std::function needs a copyable callback: the group rides in a shared box.
  auto box = std::make_shared<std::pair<Group, Producer::Prepared>>(std::move(group),
                                                                    std::move(*prepared));
  connection.SendBatch(commands, links_->command_timeout(),
                       [this, alive, key, box, loads](redis::BatchResult result) {
                         if (alive.expired()) return;
                         std::span<const redis::Reply> replies(result.replies);
                         // Without the SCRIPT LOAD's reply: the append's own, in order.
                         if (result.failure.ok()) replies = replies.subspan(loads);
                         OnAnswer(key, std::move(box->first), std::move(box->second), replies,
                                  result);
                       });
  // More than one group's worth waited: the next goes too.
  if (!lanes_.at(key).waiting.empty()) SendNext(key);
}

void AppendGroup::OnAnswer(const std::string& key, Group group, Producer::Prepared prepared,
                           std::span<const redis::Reply> replies,
                           const redis::BatchResult& result) {
  auto it = lanes_.find(key);  // a lane with a call out stays
  Lane& lane = it->second;
  --lane.in_flight;
  bool settled = true;
  if (!result.failure.ok()) {
    if (!result.written && CountTry(lane, group)) {
      // Nothing reached Redis (the connection is moving to the slot's new master, or broke
      // before the write): sending it again cannot append twice.
      Requeue(lane, std::move(group));
      Hold(it);
      return;
    }
    // The XADDs of a plain group that answered before the connection failed have their
    // answers; the rest share the failure (the script's call has one answer, which did not come).
    const bool plain = prepared.form == Producer::Form::kPlain;
    const size_t answered = plain ? std::min(replies.size(), group.dones.size()) : 0;
    for (size_t i = 0; i < group.dones.size(); ++i) {
      group.dones[i](i < answered ? OutcomeOf(Producer::PlainResult(replies[i].view()))
                                  : Outcome{result.failure, {}, 1});
    }
    // What was written may have run without its answer coming back: sent again, what went back
    // before it could land behind it.
    FailRequeued(key);
  } else if (prepared.form == Producer::Form::kPlain) {
    settled = SettlePlain(it, std::move(group), replies);
  } else {
    settled = SettleScript(it, std::move(group), std::move(prepared), replies);
  }
  if (!settled) return;  // it went back: the lane waits, or sent it again
  // The answers (a pipelined request among them may queue another append meanwhile), then what
  // waited while kMaxInFlight groups were out.
  it = lanes_.find(key);
  if (it != lanes_.end()) {
    it->second.tries = 0;
    it->second.held_since.reset();
  }
  SendNext(key);
}

bool AppendGroup::SettleScript(Lanes::iterator it, Group group, Producer::Prepared prepared,
                               std::span<const redis::Reply> replies) {
  Lane& lane = it->second;
  if (replies.size() != 1) {
    Decide(group, Status(StatusCode::kProtocol, "unexpected replies to the append script"));
    return true;
  }
  const redis::Reply& reply = replies.front();
  const bool again = !reply.IsError() || CountTry(lane, group);
  if (reply.IsError() && redis::IsNoScript(reply.view()) && again) {
    // Redis lost the script (a restart, SCRIPT FLUSH): nothing ran; load it and send again.
    lane.load_script = true;
    Requeue(lane, std::move(group));
    const std::string key = it->first;  // SendNext may end the lane
    SendNext(key);
    return false;
  }
  const bool rerouted = reply.IsError() && redis::RouteAttempt::Reroutes(reply.view());
  if (rerouted && again) {
    // Sent elsewhere (MOVED, ASK ...): the script ran nowhere. The connection follows its slot;
    // the group goes again once it has.
    Requeue(lane, std::move(group));
    Hold(it);
    return false;
  }
  lane.load_script = false;  // the script ran (or was refused for a reason of its own)
  auto results = rerouted ? Status(StatusCode::kIo, "Redis kept turning the appends away: " +
                                                        std::string(reply.view().Str()))
                          : Producer::Finish(std::move(prepared), reply);
  // Still turned away after every try (a cluster between states, a server loading its data),
  // which a retry outlives (503), unlike an error of the script's own (WRONGTYPE: 500).
  const bool appended =
      results.ok() && std::ranges::any_of(*results, [](const AppendResult& result) {
        return result.kind == AppendResult::Kind::kAppended;
      });
  Decide(group, std::move(results));
  if (appended) FailRequeued(it->first);
  return true;
}

bool AppendGroup::SettlePlain(Lanes::iterator it, Group group,
                              std::span<const redis::Reply> replies) {
  // Each XADD has its own reply: a receipt, an error of its own (OOM: the ones around it may
  // have been appended), or a redirect (a slot that moved while the pipeline was on its way, a
  // cluster between states): that one ran nowhere. A redirected XADD goes again only when none
  // after it was appended; else it would land behind them, and it is answered that it was not
  // appended (503, to retry).
  size_t landed_before = 0;  // one past the last XADD that appended: a redirect after it goes again
  for (size_t i = 0; i < replies.size() && i < group.dones.size(); ++i) {
    if (!replies[i].IsError()) landed_before = i + 1;
  }
  bool appended = false;
  Group back;
  back.number = group.number;
  std::string redirect;
  for (size_t i = 0; i < group.dones.size(); ++i) {
    if (i >= replies.size()) {
      group.dones[i](Outcome{Status(StatusCode::kProtocol, "no reply to an XADD"), {}, 1});
    } else if (i >= landed_before && Producer::Redirected(replies[i])) {
      if (redirect.empty()) redirect = std::string(replies[i].view().Str());
      back.requests.push_back(std::move(group.requests[i]));
      back.dones.push_back(std::move(group.dones[i]));
      back.bytes.push_back(group.bytes[i]);
    } else if (Producer::Redirected(replies[i])) {
      group.dones[i](Outcome{Status(StatusCode::kIo, "Redis turned the append away (" +
                                                         std::string(replies[i].view().Str()) +
                                                         ") and appends after it landed: "
                                                         "nothing was appended; try again"),
                             {},
                             1});
    } else {
      auto result = Producer::PlainResult(replies[i].view());
      appended = appended || result.ok();
      group.dones[i](OutcomeOf(std::move(result)));
    }
  }
  // The answers may have queued appends; the lane stays (it was in use).
  it = lanes_.find(it->first);
  if (appended) FailRequeued(it->first);
  if (back.requests.empty()) return true;
  if (CountTry(it->second, back)) {
    Requeue(it->second, std::move(back));
    Hold(it);
    return false;
  }
  Decide(back, Status(StatusCode::kIo, "Redis kept turning the appends away: " + redirect));
  return true;
}

AppendGroup::Outcome AppendGroup::OutcomeOf(StatusOr<AppendResult> result) {
  return result.ok() ? Outcome{Status::Ok(), std::move(*result), 1}
                     : Outcome{result.status(), {}, 1};
}

void AppendGroup::FailRequeued(const std::string& key) {
  // Appends that went back were sent before the group that just landed: sent again now they
  // would land behind it. They ran nowhere, so a retry is safe.
  Lane& lane = lanes_.at(key);
  if (lane.requeued == 0) return;
  std::vector<Queued> failed;
  for (size_t i = 0; i < lane.requeued; ++i) {
    lane.bytes -= lane.waiting.front().bytes;
    failed.push_back(std::move(lane.waiting.front()));
    lane.waiting.pop_front();
  }
  lane.requeued = 0;
  lane.held_since.reset();
  lane.hold_until.reset();
  for (Queued& queued : failed) {
    queued.done(Outcome{Status(StatusCode::kIo,
                               "Redis turned the append away and appends sent after it landed: "
                               "nothing was appended; try again"),
                        {},
                        1});
  }
}

void AppendGroup::Hold(Lanes::iterator it) {
  Lane& lane = it->second;
  const SteadyTime now = links_->loop().clock().Now();
  if (!lane.held_since) lane.held_since = now;
  const Millis held = std::chrono::duration_cast<Millis>(now - *lane.held_since);
  if (held >= links_->connect_timeout() + links_->command_timeout()) {
    FailAll(it, Status(StatusCode::kTimeout, "no Redis connection took the appends in time"));
    return;
  }
  Millis delay = kHoldFirst;
  for (int i = 1; i < lane.tries && delay < kHoldCap; ++i) delay *= 2;
  delay = std::min(delay, kHoldCap);
  lane.hold_until = now + delay;
  KickIn(delay);
}

void AppendGroup::Requeue(Lane& lane, Group group) {
  const auto at = lane.waiting.begin() + static_cast<std::ptrdiff_t>(lane.requeued);
  std::vector<Queued> back;
  back.reserve(group.requests.size());
  for (size_t i = 0; i < group.requests.size(); ++i) {
    lane.bytes += group.bytes[i];
    back.push_back(Queued{std::move(group.requests[i]), std::move(group.dones[i]), group.bytes[i]});
  }
  lane.waiting.insert(at, std::make_move_iterator(back.begin()),
                      std::make_move_iterator(back.end()));
  lane.requeued += back.size();
}

bool AppendGroup::CountTry(Lane& lane, const Group& group) {
  if (group.number > lane.counted_through) {
    ++lane.tries;
    lane.counted_through = lane.sent;
  }
  return lane.tries < kMaxTries;
}

void AppendGroup::FailAll(Lanes::iterator it, const Status& status) {
  std::deque<Queued> waiting = std::move(it->second.waiting);
  it->second.waiting.clear();
  it->second.bytes = 0;
  it->second.requeued = 0;
  it->second.held_since.reset();  // a lane that stays (groups out) starts its next wait afresh
  it->second.hold_until.reset();
  if (it->second.in_flight == 0) lanes_.erase(it);
  for (Queued& queued : waiting) queued.done(Outcome{status, {}, 1});
}

void AppendGroup::Decide(Group& group, StatusOr<std::vector<AppendResult>> results) {
  for (size_t i = 0; i < group.dones.size(); ++i) {
    group.dones[i](results.ok() ? Outcome{Status::Ok(), std::move((*results)[i]), 1}
                                : Outcome{results.status(), {}, 1});
  }
}

}  // namespace streamcar::log
