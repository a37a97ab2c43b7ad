// One shared blocking read for every followed stream (SPEC 10: "all followers of a stream share
// one blocking read per stream").
//
// The hub thread owns one connection and issues one XREAD BLOCK over all followed streams, each
// from the last id it has read (`last`). What it reads goes into the stream's bounded buffer.
// The buffer holds EVERY entry of the stream with floor < id <= last (`floor` is where the shared
// read started, or the id of the last entry dropped from the buffer's front), so a follower at
// position p (the last id it returned) can take the entries above p from the buffer whenever
// floor <= p, with no gap and no duplicate.
//
// A follower below the floor (a new follower that starts in the past, or one that fell behind
// more than the buffer holds) catches up through a LogReader (archive, then Redis) on its own
// thread, a page per call, until a page ends at the top of the stream. It then joins the shared
// read when floor <= p, or starts it when nobody follows the stream yet, at floor = last =
// min(p, top), `top` being the stream's last-generated id read just before the page: a resume
// point above the top must not make the shared read wait above it for every follower.
// A caught-up follower whose position is still below the floor may jump to the floor it saw
// before that final page when that floor is at or below `top`: the page read everything up to
// the top, so nothing lies between (entries deleted with XDEL are the only way such a gap can
// exist). Ids only grow, so nothing can be added below it later.
//
// The buffer's "every entry" needs one more step: XREAD from `last` silently leaves out entries
// above `last` that a trim (a fold's, retention's) or an XDEL removed before the read ran (Redis
// was away and the lane reconnected late, or the read lagged behind a small retention: issue 29
// F1). So after an answer that does not continue right after `last`, the lane asks the stream
// where it starts now (FindSkips, follow_gap.h) and, when entries above `last` may be gone,
// raises the floor past them: the followers below it catch up through a LogReader, which reads
// them from the archive, then rejoin. Raising the floor is always safe; it only costs catch-ups.
//
// A new stream must join the XREAD at once: a second thread sends CLIENT UNBLOCK to the hub's
// connection until the hub has issued an XREAD that includes it.
//
// Redis Cluster (SPEC 8): one XREAD may only name keys of one slot (else -CROSSSLOT), so the
// shared read is split into lanes, one per slot among the followed streams (streams that share a
// hash tag share a lane), each with its own thread and blocking connection to the master of its
// slot. Every other deployment has one lane for all streams: the threads are those of a single
// hub. A lane talks to one node at a time: the one the topology names for its slot; a -MOVED,
// a lost connection, a role change or a topology change that moves the slot sends it to the new
// master, and the waker sends CLIENT UNBLOCK to the very node whose connection id it holds (an id
// means nothing on another node).

#include "sidecar/log/follow_hub.h"

#include <algorithm>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/follow_gap.h"
#include "sidecar/log/follow_hub_impl.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::log {

FollowHub::Impl::Impl(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
    : sessions_(std::move(options)), archive_(archive), tuning_(tuning) {
  tuning_.buffer_entries = std::max<size_t>(tuning_.buffer_entries, 1);
  tuning_.buffer_bytes = std::max<size_t>(tuning_.buffer_bytes, 1);
  // A cluster splits the read by slot; under Sentinel (and standalone) one node has every key.
  topology_ = sessions_.topology();
  by_slot_ = topology_ != nullptr && topology_->mode() == redis::ResolvedMode::kCluster;
  if (!by_slot_) {
    std::lock_guard lock(mutex_);
    LaneLocked(-1);  // the one lane, started now as a single hub's thread always was
  }
  waker_thread_ = std::thread([this] { WakerLoop(); });
}

void FollowHub::Impl::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.Request();
  changed_.notify_all();
  NotifyListeners();
  // No lane is added once stopping_ is set: the map is stable from here on.
  for (auto& [slot, lane] : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  if (waker_thread_.joinable()) waker_thread_.join();
}

int FollowHub::Impl::FollowerCount(const std::string& stream) const {
  std::lock_guard lock(mutex_);
  auto it = followers_.find(stream);
  return it == followers_.end() ? 0 : it->second;
}

int FollowHub::Impl::AddListener(std::function<void()> on_change) {
  std::lock_guard lock(listeners_mutex_);
  const int id = ++next_listener_;
  listeners_.emplace(id, std::move(on_change));
  return id;
}

void FollowHub::Impl::RemoveListener(int id) {
  std::lock_guard lock(listeners_mutex_);
  listeners_.erase(id);
}

void FollowHub::Impl::NotifyListeners() {
  std::lock_guard lock(listeners_mutex_);
  for (const auto& [id, on_change] : listeners_) on_change();
}

void FollowHub::Impl::AddFollower(const std::string& stream) {
  std::lock_guard lock(mutex_);
  ++followers_[stream];
}

void FollowHub::Impl::RemoveFollower(const std::string& stream) {
  std::lock_guard lock(mutex_);
  if (--followers_[stream] <= 0) {
    followers_.erase(stream);
    feeds_.erase(stream);  // its lane leaves it out of its next XREAD
  }
}

Status FollowHub::Impl::ReadErrorLocked(const std::string& stream) const {
  auto it = lanes_.find(SlotOf(stream));
  return it == lanes_.end() ? Status::Ok() : it->second->error;
}

void FollowHub::Impl::StartFeedLocked(const std::string& stream, const EntryId& from) {
  Feed feed;
  feed.floor = from;
  feed.last = from;
  feeds_.emplace(stream, std::move(feed));
  if (Lane* lane = LaneLocked(SlotOf(stream))) ++lane->wanted_version;
  changed_.notify_all();
}

void FollowHub::Impl::PauseUntil(SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return stopping_; });
}

int FollowHub::Impl::SlotOf(const std::string& stream) const {
  return by_slot_ ? keys::KeySlot(stream) : -1;
}

Lane* FollowHub::Impl::LaneLocked(int slot) {
  auto it = lanes_.find(slot);
  if (it != lanes_.end()) return it->second.get();
  if (stopping_) return nullptr;
  auto lane = std::make_unique<Lane>();
  lane->slot = slot;
  Lane* raw = lane.get();
  lanes_.emplace(slot, std::move(lane));
  // The thread waits for mutex_ (held here) before it reads anything of the lane.
  raw->thread = std::thread([this, raw] { HubLoop(*raw); });
  return raw;
}

void FollowHub::Impl::HubLoop(Lane& lane) {
  LaneConnection connection;
  while (!RunOnce(lane, connection)) {
  }
  std::lock_guard lock(mutex_);
  lane.done = true;
  changed_.notify_all();
}

bool FollowHub::Impl::RunOnce(Lane& lane, LaneConnection& connection) {
  if (WaitForReadableFeed(lane)) return true;
  if (auto answer = ConnectLane(lane, connection)) return *answer;
  std::vector<std::pair<std::string, EntryId>> reads;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return true;
    for (const auto& [name, feed] : feeds_) {
      if (feed.error.ok() && SlotOf(name) == lane.slot) reads.emplace_back(name, feed.last);
    }
    if (reads.empty()) return false;
    // Every stream added to the lane so far is in this XREAD: the waker may rest.
    lane.issued_version = lane.wanted_version;
  }
  redis::Command xread("XREAD");
  xread.Arg("COUNT").Arg(int64_t{kFollowBatch});
  xread.Arg("BLOCK").Arg(static_cast<int64_t>(tuning_.block.count()));
  xread.Arg("STREAMS");
  for (const auto& read : reads) xread.Arg(read.first);
  for (const auto& read : reads) xread.Arg(FormatId(read.second));
  auto reply = connection.session->RunBlocking(xread, tuning_.block);
  if (!reply.ok()) return AfterReadFailed(lane, connection, reads, reply.status());
  Deliver(lane, reply->view(), FindSkips(*connection.session, reads, reply->view()));
  return false;
}

std::map<std::string, EntryId> FollowHub::Impl::FindSkips(
    redis::Session& session, const std::vector<std::pair<std::string, EntryId>>& reads,
    const redis::ReplyView& reply) {
  struct Returned {
    std::string stream;
    EntryId read_from, first, last;
  };
  std::vector<Returned> suspects;
  for (size_t i = 0; i < reply.Size(); ++i) {
    const auto item = reply[i];
    const auto entries = item[1];
    if (entries.Size() == 0) continue;
    std::string stream(item[0].Str());
    auto read =
        std::find_if(reads.begin(), reads.end(), [&](const auto& r) { return r.first == stream; });
    auto first = ParseId(entries[0][0].Str());
    auto last = ParseId(entries[entries.Size() - 1][0].Str());
    if (read == reads.end() || !first || !last) continue;
    // The common case asks nothing: nothing can lie between an id and its successor.
    if (Successor(read->second) == *first) continue;
    suspects.push_back({std::move(stream), read->second, *first, *last});
  }
  std::map<std::string, EntryId> skips;
  if (suspects.empty()) return skips;
  // One round trip for every stream of the lane (one node: they share a slot, or there is one).
  std::vector<redis::Command> questions;
  questions.reserve(suspects.size());
  for (const auto& suspect : suspects) {
    questions.push_back(redis::Command("XINFO").Arg("STREAM").Arg(suspect.stream));
  }
  auto answers = session.RunPipeline(questions);
  for (size_t i = 0; i < suspects.size(); ++i) {
    std::optional<StreamRemovals> removals;  // unknown when the question went unanswered
    if (answers.ok() && i < answers->size()) removals = ParseStreamRemovals((*answers)[i].view());
    const Returned& s = suspects[i];
    if (auto floor = SkippedUpTo(s.read_from, s.first, s.last, removals)) {
      skips.emplace(s.stream, *floor);
    }
  }
  return skips;
}

bool FollowHub::Impl::WaitForReadableFeed(Lane& lane) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    if (stopping_ || HasReadableFeedLocked(lane)) return true;
    lane.issued_version = lane.wanted_version;  // nothing to read: nothing to interrupt
    return false;
  });
  return stopping_;
}

std::optional<bool> FollowHub::Impl::ConnectLane(Lane& lane, LaneConnection& connection) {
  if (Status status = sessions_.Target(lane.slot, connection, "follow"); !status.ok()) {
    SetLaneError(lane, status);
    return stop_.WaitFor(Millis(100));
  }
  redis::Session& session = *connection.session;
  Millis retry_in{0};
  if (Status status = session.ConnectOnce(&retry_in); !status.ok()) {
    SetLaneError(lane, status);
    if (topology_ != nullptr) {
      // The next attempt may go to another node (a new session): the backoff is the lane's.
      retry_in =
          ReconnectDelay(connection.failures++, kReconnectInitial, kReconnectCap, UnitRandom());
      sessions_.Retarget(connection, status.message());
    }
    return stop_.WaitFor(retry_in);
  }
  connection.failures = 0;
  if (connection.id_generation != session.generation()) {
    // The waker interrupts this connection by its id; a new connection has a new one.
    auto id = session.Run(redis::Command("CLIENT").Arg("ID"));
    if (!id.ok()) {
      SetLaneError(lane, id.status());
      if (id.status().code() != StatusCode::kServerError) sessions_.Retarget(connection, "lost");
      return false;
    }
    std::lock_guard lock(mutex_);
    lane.node = connection.node;
    lane.client_id = id->view().Integer();
    connection.id_generation = session.generation();
  }
  return std::nullopt;
}

bool FollowHub::Impl::AfterReadFailed(Lane& lane, LaneConnection& connection,
                                      const std::vector<std::pair<std::string, EntryId>>& reads,
                                      const Status& error) {
  redis::Redirect redirect;
  // Only a topology's nodes answer where a slot is served.
  const LaneErrorKind kind =
      topology_ != nullptr ? LaneErrorKindOf(error, &redirect) : LaneErrorKind::kNone;
  switch (kind) {
    case LaneErrorKind::kMoved:
      // The slot moved (a migration, a failover): read there next.
      if (connection.node) topology_->OnMoved(redirect, *connection.node);
      connection.session.reset();
      return false;
    case LaneErrorKind::kWait:
      SetLaneError(lane, error);
      return stop_.WaitFor(Millis(100));
    case LaneErrorKind::kNodeFailed:
      SetLaneError(lane, error);
      sessions_.Retarget(connection, error.message());
      return stop_.WaitFor(Millis(100));
    case LaneErrorKind::kNone:
      break;
  }
  if (error.code() == StatusCode::kServerError) {
    FindUnreadableStreams(lane, *connection.session, reads, error);
  } else {
    SetLaneError(lane, error);
    LogWarn("follow: the shared read failed; reconnecting", {{"error", error.message()}});
    sessions_.Retarget(connection, error.message());
  }
  return false;
}

bool FollowHub::Impl::HasReadableFeedLocked(const Lane& lane) const {
  return std::any_of(feeds_.begin(), feeds_.end(), [&](const auto& feed) {
    return feed.second.error.ok() && SlotOf(feed.first) == lane.slot;
  });
}

void FollowHub::Impl::FindUnreadableStreams(
    Lane& lane, redis::Session& session, const std::vector<std::pair<std::string, EntryId>>& reads,
    const Status& error) {
  bool found = false;
  for (const auto& [name, from] : reads) {
    auto type = session.Run(redis::Command("TYPE").Arg(name));
    if (!type.ok()) break;
    const auto kind = type->view().Str();
    if (kind == "stream" || kind == "none") continue;
    std::lock_guard lock(mutex_);
    if (auto it = feeds_.find(name); it != feeds_.end()) {
      it->second.error =
          Status(StatusCode::kServerError, "WRONGTYPE the Redis key \"" + PrintableOneLine(name) +
                                               "\" holds another type, not a stream");
      found = true;
    }
  }
  changed_.notify_all();
  if (found) NotifyListeners();
  if (!found) {
    SetLaneError(lane, error);
    stop_.WaitFor(Millis(500));  // an error no key explains: do not spin on it
  }
}

void FollowHub::Impl::SetLaneError(Lane& lane, const Status& status) {
  std::lock_guard lock(mutex_);
  lane.error = status;
  changed_.notify_all();
}

void FollowHub::Impl::Deliver(Lane& lane, const redis::ReplyView& reply,
                              const std::map<std::string, EntryId>& skips) {
  FillFeeds(lane, reply, skips);
  if (reply.Size() > 0) NotifyListeners();
}

void FollowHub::Impl::FillFeeds(Lane& lane, const redis::ReplyView& reply,
                                const std::map<std::string, EntryId>& skips) {
  std::lock_guard lock(mutex_);
  lane.error = Status::Ok();
  for (size_t i = 0; i < reply.Size(); ++i) {
    const auto item = reply[i];
    const std::string stream(item[0].Str());
    auto it = feeds_.find(stream);
    if (it == feeds_.end()) continue;  // nobody follows it any more
    Feed& feed = it->second;
    for (auto& entry : redis::SubscriptionOps::ParseEntries(item[1])) feed.Append(std::move(entry));
    if (auto skip = skips.find(stream); skip != skips.end()) feed.RaiseFloor(skip->second);
    feed.Trim(tuning_.buffer_entries, tuning_.buffer_bytes);
  }
  changed_.notify_all();
}

bool FollowHub::Impl::BehindLocked(const Lane& lane) const {
  return !lane.done && (stopping_ || lane.issued_version < lane.wanted_version);
}

bool FollowHub::Impl::AllLanesDoneLocked() const {
  return std::all_of(lanes_.begin(), lanes_.end(),
                     [](const auto& lane) { return lane.second->done; });
}

void FollowHub::Impl::WakerLoop() {
  std::map<std::optional<keys::NodeAddress>, std::unique_ptr<redis::Session>> sessions;
  while (true) {
    std::vector<std::pair<std::optional<keys::NodeAddress>, int64_t>> targets;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        return stopping_ || std::any_of(lanes_.begin(), lanes_.end(), [&](const auto& lane) {
                 return BehindLocked(*lane.second);
               });
      });
      if (stopping_ && AllLanesDoneLocked()) return;
      for (const auto& [slot, lane] : lanes_) {
        if (BehindLocked(*lane)) targets.emplace_back(lane->node, lane->client_id.load());
      }
    }
    for (const auto& [node, client] : targets) {
      if (client <= 0) continue;
      auto& session = sessions[node];
      if (session == nullptr) {
        redis::ConnectionOptions options =
            topology_ != nullptr && node ? topology_->OptionsFor(*node) : sessions_.options();
        options.client_name = "streamcar-follow-waker";
        session = std::make_unique<redis::Session>(options, "follow-waker", &sessions_.health());
      }
      Millis retry_in{0};
      if (session->ConnectOnce(&retry_in).ok()) {
        // 0 when the lane is not blocked yet (it is about to issue the XREAD): again shortly.
        (void)session->Run(redis::Command("CLIENT").Arg("UNBLOCK").Arg(client));
      }
    }
    // The pace of retries, not a synchronization: the loop re-checks the state it waits for.
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, Millis(10), [&] { return stopping_ && AllLanesDoneLocked(); });
  }
}

FollowHub::FollowHub(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
    : impl_(std::make_shared<Impl>(std::move(options), archive, tuning)) {}

FollowHub::~FollowHub() { impl_->Stop(); }

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream,
                                            const std::string& after_id) {
  return MakeHubFollower(impl_, stream, after_id, impl_->archive());
}

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream, const std::string& after_id,
                                            ArchiveStore* archive) {
  return MakeHubFollower(impl_, stream, after_id, archive);
}

int FollowHub::FollowerCount(const std::string& stream) const {
  return impl_->FollowerCount(stream);
}

int FollowHub::AddListener(std::function<void()> on_change) {
  return impl_->AddListener(std::move(on_change));
}

void FollowHub::RemoveListener(int id) { impl_->RemoveListener(id); }

void FollowHub::Stop() { impl_->Stop(); }

}  // namespace streamcar::log
