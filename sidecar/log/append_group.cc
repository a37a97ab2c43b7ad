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
  auto prepared = producer_->Prepare(group.requests);
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
  const size_t loads = lane.load_script && !prepared->plain ? 1 : 0;
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
  if (!result.failure.ok()) {
    const bool again = CountTry(lane, group);
    if (!result.written && again) {
      // Nothing reached Redis (the connection is moving to the slot's new master, or broke
      // before the write): sending it again cannot append twice.
      Requeue(lane, std::move(group));
      Hold(it);
      return;
    }
    Decide(group, result.failure);
  } else {
    // The first error reply: the script's own, or the first XADD of a plain group that Redis
    // turned away (the ones before it were appended).
    const auto error = std::ranges::find_if(replies, &redis::Reply::IsError);
    const size_t answered = static_cast<size_t>(error - replies.begin());
    const bool again = error == replies.end() || CountTry(lane, group);
    if (error != replies.end() && !prepared.plain && redis::IsNoScript(error->view()) && again) {
      // Redis lost the script (a restart, SCRIPT FLUSH): nothing ran; load it and send again.
      lane.load_script = true;
      Requeue(lane, std::move(group));
      SendNext(key);
      return;
    }
    const bool rerouted = error != replies.end() && redis::RouteAttempt::Reroutes(error->view());
    if (error != replies.end() && answered > 0) {
      // A plain group that Redis turned away part of the way (its slot moved while it was on its
      // way, a write refused): what Redis appended before is decided; the rest is the group from
      // here on.
      Group head = SplitFront(group, answered);
      Decide(head, Producer::Finish(Producer::PlainHead(answered), replies.first(answered)));
      replies = replies.subspan(answered);
      it = lanes_.find(key);  // the answers may have queued appends; the lane stays (in use)
    }
    Lane& current = it->second;
    if (rerouted && again) {
      // Sent elsewhere (MOVED, ASK ...): the script or the XADD ran nowhere. The connection
      // follows its slot; the group goes again once it has.
      Requeue(current, std::move(group));
      Hold(it);
      return;
    }
    current.load_script = false;
    // Still turned away after every try (a cluster between states, a server loading its data),
    // which a retry outlives (503), unlike an error of the append's own (WRONGTYPE: 500).
    Decide(group, rerouted ? Status(StatusCode::kIo, "Redis kept turning the appends away: " +
                                                         std::string(error->view().Str()))
                           : Producer::Finish(std::move(prepared), replies));
  }
  // The answers (a pipelined request among them may queue another append meanwhile), then what
  // waited while kMaxInFlight groups were out.
  it = lanes_.find(key);
  if (it != lanes_.end()) {
    it->second.tries = 0;
    it->second.held_since.reset();
  }
  SendNext(key);
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

AppendGroup::Group AppendGroup::SplitFront(Group& group, size_t count) {
  Group head;
  const auto take = [count](auto& from, auto& to) {
    to.assign(std::make_move_iterator(from.begin()),
              std::make_move_iterator(from.begin() + static_cast<std::ptrdiff_t>(count)));
    from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(count));
  };
  take(group.requests, head.requests);
  take(group.dones, head.dones);
  take(group.bytes, head.bytes);
  return head;
}

void AppendGroup::FailAll(Lanes::iterator it, const Status& status) {
  std::deque<Queued> waiting = std::move(it->second.waiting);
  it->second.waiting.clear();
  it->second.bytes = 0;
  it->second.requeued = 0;
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
