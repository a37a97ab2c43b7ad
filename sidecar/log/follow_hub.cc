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
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::log {
namespace {

// Entries handed to a follower per Next(), read per stream per shared XREAD, and per catch-up
// page: small enough that a batch of large entries (say 1 MiB each) stays ~100 MiB at most.
constexpr int kBatch = 100;

size_t EntryBytes(const StreamEntry& entry) {
  size_t bytes = entry.id.size();
  for (const auto& [name, value] : entry.fields) bytes += name.size() + value.size();
  return bytes;
}

struct Buffered {
  EntryId id;
  StreamEntry entry;
  size_t bytes = 0;
};

// The shared read's state of one followed stream.
struct Feed {
  EntryId floor;  // the buffer holds every entry with floor < id <= last
  EntryId last;
  std::deque<Buffered> buffer;
  size_t bytes = 0;  // the sum of the buffered entries' bytes
  Status error;      // set when the key cannot be read as a stream (WRONGTYPE); not retried
};

// One blocking read and its thread: every followed stream of one cluster slot, or every followed
// stream when there is no cluster. The fields are guarded by the hub's mutex, except `thread`
// (started once, joined by Stop) and `client_id` (read by the waker without the lock).
struct Lane {
  int slot = -1;                // the slot its streams share; -1 without a cluster
  uint64_t wanted_version = 0;  // bumped when a stream joins this lane
  uint64_t issued_version = 0;  // the wanted version its last issued XREAD includes
  bool done = false;            // its thread has ended (the hub stops)
  Status error;                 // why its last read failed; Ok after a read
  // Where its blocking connection is, and that connection's CLIENT ID (0: none yet).
  std::optional<keys::NodeAddress> node;
  std::atomic<int64_t> client_id{0};
  std::thread thread;
};

// A lane's connection: a plain session to one node (never routed: CLIENT ID and the XREAD must
// reach the same connection, and the waker must find it), replaced when its node no longer
// serves the lane's slot.
struct LaneConnection {
  std::unique_ptr<redis::Session> session;
  std::optional<keys::NodeAddress> node;  // with a topology: the node `session` talks to
  uint64_t topology_version = 0;          // the topology's version when `node` was checked
  uint64_t id_generation = 0;             // the session generation its CLIENT ID was read on
  int failures = 0;                       // connects failed in a row (the backoff's step)
};

// An error reply that says where the lane's slot is (or is not) served, rather than answering
// the read: the lane must go elsewhere or wait, not blame a key.
enum class LaneErrorKind { kNone, kMoved, kWait, kNodeFailed };

LaneErrorKind LaneErrorKindOf(const Status& status, redis::Redirect* redirect) {
  if (status.code() != StatusCode::kServerError) return LaneErrorKind::kNone;
  const std::string& text = status.message();
  const std::string_view word = std::string_view(text).substr(0, text.find(' '));
  if (word == "MOVED") {
    // "MOVED <slot> <endpoint>:<port>"
    const size_t slot_end = text.find(' ', word.size() + 1);
    if (slot_end == std::string::npos) return LaneErrorKind::kNodeFailed;
    const std::string slot_text = text.substr(word.size() + 1, slot_end - word.size() - 1);
    auto to = keys::ParseRedirectEndpoint(std::string_view(text).substr(slot_end + 1));
    if (!to || slot_text.empty() || slot_text.size() > 5 ||
        slot_text.find_first_not_of("0123456789") != std::string::npos) {
      return LaneErrorKind::kNodeFailed;
    }
    int slot = 0;
    std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
    redirect->slot = slot;
    redirect->to = *to;
    return LaneErrorKind::kMoved;
  }
  // ASK: the slot is migrating and this lane's key already left; the migration ends with a
  // MOVED. TRYAGAIN, LOADING: transient on this node.
  if (word == "ASK" || word == "TRYAGAIN" || word == "LOADING") return LaneErrorKind::kWait;
  if (word == "CLUSTERDOWN" || word == "MASTERDOWN" || word == "READONLY" || word == "UNBLOCKED") {
    return LaneErrorKind::kNodeFailed;
  }
  return LaneErrorKind::kNone;
}

}  // namespace

class FollowHub::Impl {
 public:
  Impl(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
      : options_(std::move(options)), archive_(archive), tuning_(tuning) {
    tuning_.buffer_entries = std::max<size_t>(tuning_.buffer_entries, 1);
    tuning_.buffer_bytes = std::max<size_t>(tuning_.buffer_bytes, 1);
    // A cluster splits the read by slot; under Sentinel (and standalone) one node has every key.
    topology_ = options_.topology.get();
    by_slot_ = topology_ != nullptr && topology_->mode() == redis::ResolvedMode::kCluster;
    if (!by_slot_) {
      std::lock_guard lock(mutex_);
      LaneLocked(-1);  // the one lane, started now as a single hub's thread always was
    }
    waker_thread_ = std::thread([this] { WakerLoop(); });
  }
  ~Impl() { Stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stop_.Request();
    changed_.notify_all();
    // No lane is added once stopping_ is set: the map is stable from here on.
    for (auto& [slot, lane] : lanes_) {
      if (lane->thread.joinable()) lane->thread.join();
    }
    if (waker_thread_.joinable()) waker_thread_.join();
  }

  int FollowerCount(const std::string& stream) const {
    std::lock_guard lock(mutex_);
    auto it = followers_.find(stream);
    return it == followers_.end() ? 0 : it->second;
  }

  void AddFollower(const std::string& stream) {
    std::lock_guard lock(mutex_);
    ++followers_[stream];
  }

  void RemoveFollower(const std::string& stream) {
    std::lock_guard lock(mutex_);
    if (--followers_[stream] <= 0) {
      followers_.erase(stream);
      feeds_.erase(stream);  // its lane leaves it out of its next XREAD
    }
  }

  // "$": the id the stream's next entry will be above (its last-generated id, which counts
  // deleted entries too; 0-0 when the stream does not exist). nullopt when Redis cannot say.
  std::optional<EntryId> ResolveNow(const std::string& stream, Status* error) {
    std::lock_guard lock(catch_up_mutex_);
    StatusOr<redis::Reply> reply = Status(StatusCode::kIo, "not sent");
    // Twice at most: once more on the slot's new master after a redirect or a lost node.
    for (int attempt = 0; attempt < 2; ++attempt) {
      LaneConnection& connection = catch_up_[SlotOf(stream)];
      auto session = CatchUpSessionLocked(SlotOf(stream), connection);
      if (!session.ok()) {
        *error = session.status();
        return std::nullopt;
      }
      reply = (*session)->Run(redis::Command("XINFO").Arg("STREAM").Arg(stream));
      if (reply.ok() || !AfterFailure(connection, reply.status())) break;
    }
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError &&
          reply.status().message().find("no such key") != std::string::npos) {
        return kMinId;
      }
      *error = reply.status();
      return std::nullopt;
    }
    const auto info = reply->view();
    for (size_t i = 0; i + 1 < info.Size(); i += 2) {
      if (info[i].Str() == "last-generated-id") {
        if (auto id = ParseId(info[i + 1].Str())) return *id;
      }
    }
    *error = Status(StatusCode::kProtocol, "XINFO STREAM gave no last-generated-id");
    return std::nullopt;
  }

  // One page of catch-up after `after`, through `archive` (null: Redis only) and Redis, and in
  // *top the stream's last-generated id read just before it: the page holds every entry up to
  // at least that top.
  StatusOr<LogPage> CatchUpPage(const std::string& stream, const EntryId& after,
                                ArchiveStore* archive, EntryId* top) {
    Status error;
    auto now = ResolveNow(stream, &error);
    if (!now) return error;
    *top = *now;
    std::lock_guard lock(catch_up_mutex_);
    LaneConnection& connection = catch_up_[SlotOf(stream)];
    auto session = CatchUpSessionLocked(SlotOf(stream), connection);
    if (!session.ok()) return session.status();
    LogReader reader(*session, archive);
    WindowQuery query;
    query.after = FormatId(after);
    query.count = kBatch;
    auto page = reader.Read(stream, query);
    // The follower asks again on its next call, then on the slot's master.
    if (!page.ok()) AfterFailure(connection, page.status());
    return page;
  }

  ArchiveStore* archive() const { return archive_; }

  std::mutex& mutex() { return mutex_; }
  std::condition_variable& changed() { return changed_; }
  // The accessors below need mutex() held.
  bool stopping() const { return stopping_; }
  std::map<std::string, Feed>& feeds() { return feeds_; }
  // Why the shared read of `stream` last failed (Ok after a successful read).
  Status ReadErrorLocked(const std::string& stream) const {
    auto it = lanes_.find(SlotOf(stream));
    return it == lanes_.end() ? Status::Ok() : it->second->error;
  }

  // Starts the shared read of `stream` after `from`, and has its lane's XREAD interrupted so that
  // it includes the stream at once. Needs mutex() held.
  void StartFeedLocked(const std::string& stream, const EntryId& from) {
    Feed feed;
    feed.floor = from;
    feed.last = from;
    feeds_.emplace(stream, std::move(feed));
    if (Lane* lane = LaneLocked(SlotOf(stream))) ++lane->wanted_version;
    changed_.notify_all();
  }

  // Waits until `deadline` or Stop.
  void PauseUntil(SteadyTime deadline) {
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, deadline, [&] { return stopping_; });
  }

 private:
  // The lane of `stream`: its cluster slot, or the one lane (-1).
  int SlotOf(const std::string& stream) const { return by_slot_ ? keys::KeySlot(stream) : -1; }

  // The connected catch-up session of `slot` (one per slot in a cluster; one in all). Needs
  // catch_up_mutex_ held.
  StatusOr<redis::Session*> CatchUpSessionLocked(int slot, LaneConnection& connection) {
    if (Status status = Target(slot, connection, "follow-catchup"); !status.ok()) return status;
    if (!connection.session->connected()) {
      Millis retry_in{0};
      if (Status status = connection.session->ConnectOnce(&retry_in); !status.ok()) {
        AfterFailure(connection, status);
        return status;
      }
    }
    return connection.session.get();
  }

  // A command on `connection` failed: when it says the slot is served elsewhere (or the node is
  // gone), the topology hears of it and the connection is replaced. True when it was replaced
  // (sending again may succeed).
  bool AfterFailure(LaneConnection& connection, const Status& status) {
    if (topology_ == nullptr) return false;
    redis::Redirect redirect;
    switch (LaneErrorKindOf(status, &redirect)) {
      case LaneErrorKind::kMoved:
        if (connection.node) topology_->OnMoved(redirect, *connection.node);
        connection.session.reset();
        return true;
      case LaneErrorKind::kNodeFailed:
        Retarget(connection, status.message());
        return true;
      case LaneErrorKind::kWait:
        return false;
      case LaneErrorKind::kNone:
        if (status.code() == StatusCode::kServerError) return false;
        Retarget(connection, status.message());  // lost, refused, timed out
        return true;
    }
    return false;
  }

  // The lane of `slot`, started when it is new; null once the hub stops. Needs mutex_ held.
  Lane* LaneLocked(int slot) {
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

  void HubLoop(Lane& lane) {
    LaneConnection connection;
    while (!RunOnce(lane, connection)) {
    }
    std::lock_guard lock(mutex_);
    lane.done = true;
    changed_.notify_all();
  }

  // A session (named `role`) to the node now serving `slot`. Without a topology: the url, as
  // always.
  Status Target(int slot, LaneConnection& connection, const std::string& role) {
    if (topology_ == nullptr) {
      if (connection.session == nullptr) {
        redis::ConnectionOptions options = options_;
        options.client_name = "streamcar-" + role;
        connection.session = std::make_unique<redis::Session>(options, role, &health_);
      }
      return Status::Ok();
    }
    const uint64_t version = topology_->version();
    if (connection.session != nullptr && connection.topology_version == version) {
      return Status::Ok();
    }
    auto master = topology_->MasterFor(slot);
    if (!master.ok()) return master.status();
    connection.topology_version = version;
    if (connection.session != nullptr && connection.node == *master) return Status::Ok();
    redis::ConnectionOptions options = topology_->OptionsFor(*master);
    options.client_name = "streamcar-" + role;
    connection.session = std::make_unique<redis::Session>(options, role, &health_);
    connection.node = *master;
    connection.id_generation = 0;
    return Status::Ok();
  }

  // The lane's node failed it (or said the slot is elsewhere): the topology hears of it, and the
  // next read goes where the topology then says.
  void Retarget(LaneConnection& connection, std::string_view why) {
    if (topology_ != nullptr && connection.node) topology_->OnNodeFailed(*connection.node, why);
    if (topology_ != nullptr) connection.session.reset();
  }

  // One shared XREAD of the lane (or one connection attempt); true when the hub is stopping.
  bool RunOnce(Lane& lane, LaneConnection& connection) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        if (stopping_ || HasReadableFeedLocked(lane)) return true;
        lane.issued_version = lane.wanted_version;  // nothing to read: nothing to interrupt
        return false;
      });
      if (stopping_) return true;
    }
    if (Status status = Target(lane.slot, connection, "follow"); !status.ok()) {
      SetLaneError(lane, status);
      return stop_.WaitFor(Millis(100));
    }
    redis::Session& session = *connection.session;
    Millis retry_in{0};
    if (Status status = session.ConnectOnce(&retry_in); !status.ok()) {
      SetLaneError(lane, status);
      if (topology_ != nullptr) {
        // The next attempt may go to another node (a new session): the backoff is the lane's.
        retry_in = ReconnectDelay(connection.failures++, Millis(100), Millis(5000), UnitRandom());
        Retarget(connection, status.message());
      }
      return stop_.WaitFor(retry_in);
    }
    connection.failures = 0;
    if (connection.id_generation != session.generation()) {
      // The waker interrupts this connection by its id; a new connection has a new one.
      auto id = session.Run(redis::Command("CLIENT").Arg("ID"));
      if (!id.ok()) {
        SetLaneError(lane, id.status());
        if (id.status().code() != StatusCode::kServerError) Retarget(connection, "lost");
        return false;
      }
      std::lock_guard lock(mutex_);
      lane.node = connection.node;
      lane.client_id = id->view().Integer();
      connection.id_generation = session.generation();
    }
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
    xread.Arg("COUNT").Arg(int64_t{kBatch});
    xread.Arg("BLOCK").Arg(static_cast<int64_t>(tuning_.block.count()));
    xread.Arg("STREAMS");
    for (const auto& read : reads) xread.Arg(read.first);
    for (const auto& read : reads) xread.Arg(FormatId(read.second));
    auto reply = session.RunBlocking(xread, tuning_.block);
    if (!reply.ok()) {
      redis::Redirect redirect;
      // Only a topology's nodes answer where a slot is served.
      const LaneErrorKind kind =
          topology_ != nullptr ? LaneErrorKindOf(reply.status(), &redirect) : LaneErrorKind::kNone;
      switch (kind) {
        case LaneErrorKind::kMoved:
          // The slot moved (a migration, a failover): read there next.
          if (connection.node) topology_->OnMoved(redirect, *connection.node);
          connection.session.reset();
          return false;
        case LaneErrorKind::kWait:
          SetLaneError(lane, reply.status());
          return stop_.WaitFor(Millis(100));
        case LaneErrorKind::kNodeFailed:
          SetLaneError(lane, reply.status());
          Retarget(connection, reply.status().message());
          return stop_.WaitFor(Millis(100));
        case LaneErrorKind::kNone:
          break;
      }
      if (reply.status().code() == StatusCode::kServerError) {
        FindUnreadableStreams(lane, session, reads, reply.status());
      } else {
        SetLaneError(lane, reply.status());
        LogWarn("follow: the shared read failed; reconnecting",
                {{"error", reply.status().message()}});
        Retarget(connection, reply.status().message());
      }
      return false;
    }
    Deliver(lane, reply->view());
    return false;
  }

  bool HasReadableFeedLocked(const Lane& lane) const {
    return std::any_of(feeds_.begin(), feeds_.end(), [&](const auto& feed) {
      return feed.second.error.ok() && SlotOf(feed.first) == lane.slot;
    });
  }

  // An error reply to the XREAD: find the keys that are not streams (TYPE) and stop reading them
  // rather than stall every other stream; their followers get the error.
  void FindUnreadableStreams(Lane& lane, redis::Session& session,
                             const std::vector<std::pair<std::string, EntryId>>& reads,
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
    if (!found) {
      SetLaneError(lane, error);
      stop_.WaitFor(Millis(500));  // an error no key explains: do not spin on it
    }
  }

  void SetLaneError(Lane& lane, const Status& status) {
    std::lock_guard lock(mutex_);
    lane.error = status;
    changed_.notify_all();
  }

  // The XREAD reply: [[stream, [[id, fields], ...]], ...], or nil after the block.
  void Deliver(Lane& lane, const redis::ReplyView& reply) {
    std::lock_guard lock(mutex_);
    lane.error = Status::Ok();
    for (size_t i = 0; i < reply.Size(); ++i) {
      const auto item = reply[i];
      auto it = feeds_.find(std::string(item[0].Str()));
      if (it == feeds_.end()) continue;  // nobody follows it any more
      Feed& feed = it->second;
      for (auto& entry : redis::SubscriptionOps::ParseEntries(item[1])) {
        auto id = ParseId(entry.id);
        if (!id || *id <= feed.last) continue;
        feed.last = *id;
        const size_t bytes = EntryBytes(entry);
        feed.bytes += bytes;
        feed.buffer.push_back({*id, std::move(entry), bytes});
      }
      while (!feed.buffer.empty() &&
             (feed.buffer.size() > tuning_.buffer_entries || feed.bytes > tuning_.buffer_bytes)) {
        feed.floor = feed.buffer.front().id;
        feed.bytes -= feed.buffer.front().bytes;
        feed.buffer.pop_front();
      }
    }
    changed_.notify_all();
  }

  // A lane the waker must interrupt: it has not issued an XREAD with every stream added to it,
  // or the hub stops (so Stop never waits out a BLOCK). Needs mutex_ held.
  bool BehindLocked(const Lane& lane) const {
    return !lane.done && (stopping_ || lane.issued_version < lane.wanted_version);
  }

  bool AllLanesDoneLocked() const {
    return std::all_of(lanes_.begin(), lanes_.end(),
                       [](const auto& lane) { return lane.second->done; });
  }

  // Interrupts each lane's XREAD until it has issued one that includes every stream added to it;
  // on Stop, until every lane's thread has ended. One connection per node the lanes are on.
  void WakerLoop() {
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
              topology_ != nullptr && node ? topology_->OptionsFor(*node) : options_;
          options.client_name = "streamcar-follow-waker";
          session = std::make_unique<redis::Session>(options, "follow-waker", &health_);
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

  redis::ConnectionOptions options_;
  ArchiveStore* archive_;
  FollowOptions tuning_;
  redis::RedisHealth health_;
  redis::Topology* topology_ = nullptr;  // borrowed from options_; null: standalone
  bool by_slot_ = false;                 // a cluster: one lane per slot

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::map<std::string, int> followers_;
  std::map<std::string, Feed> feeds_;
  std::map<int, std::unique_ptr<Lane>> lanes_;  // by slot (-1: the one lane); only grows
  StopSignal stop_;

  std::mutex catch_up_mutex_;
  std::map<int, LaneConnection> catch_up_;  // by slot (-1: the one), like the lanes

  std::thread waker_thread_;
};

namespace {

class HubFollower final : public Follower {
 public:
  HubFollower(std::shared_ptr<FollowHub::Impl> hub, std::string stream, const std::string& after,
              ArchiveStore* archive)
      : hub_(std::move(hub)), stream_(std::move(stream)), archive_(archive) {
    hub_->AddFollower(stream_);
    if (after == "$") {
      Status error;
      if (auto now = hub_->ResolveNow(stream_, &error))
        position_ = *now;
      else
        resolve_now_ = true;  // Redis is unreachable: "now" is decided by the first Next()
    } else {
      position_ = ParseId(after).value_or(kMinId);
    }
  }
  ~HubFollower() override { hub_->RemoveFollower(stream_); }

  Status Next(std::vector<StreamEntry>* out, Millis wait) override {
    out->clear();
    const SteadyTime deadline = SteadyClock::now() + wait;
    if (resolve_now_) {
      Status error;
      auto now = hub_->ResolveNow(stream_, &error);
      if (!now) return error;
      position_ = *now;
      resolve_now_ = false;
    }
    while (true) {
      if (!joined_) {
        Status status = CatchUp(out);
        if (status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout) {
          // Redis is unreachable: report it after `wait`, so a caller that loops on Next does
          // not spin; the position is kept and the next call resumes from it.
          hub_->PauseUntil(deadline);
          return status;
        }
        if (!status.ok() || !out->empty()) return status;
        if (!joined_) continue;  // the floor moved on meanwhile: another page
      }
      std::unique_lock lock(hub_->mutex());
      if (hub_->stopping()) return Status(StatusCode::kCancelled, "the follow hub stopped");
      auto it = hub_->feeds().find(stream_);
      if (it == hub_->feeds().end()) {
        joined_ = false;  // cannot happen while we follow; recover by catching up
        continue;
      }
      Feed& feed = it->second;
      if (!feed.error.ok()) return feed.error;
      if (position_ < feed.floor) {
        joined_ = false;  // fell behind more than the buffer holds: catch up from the log
        continue;
      }
      TakeFromBuffer(feed, out);
      if (!out->empty()) return Status::Ok();
      const EntryId seen = feed.last;
      const EntryId floor = feed.floor;
      const bool woke = hub_->changed().wait_until(lock, deadline, [&] {
        if (hub_->stopping()) return true;
        auto again = hub_->feeds().find(stream_);
        return again == hub_->feeds().end() || again->second.last != seen ||
               again->second.floor != floor || !again->second.error.ok();
      });
      if (!woke) {
        // Nothing new in time: not an error, unless the shared read cannot reach Redis.
        return hub_->ReadErrorLocked(stream_);
      }
    }
  }

 private:
  // One page from the log; joins (or starts) the shared read once a page reaches the top.
  Status CatchUp(std::vector<StreamEntry>* out) {
    std::optional<EntryId> floor_before;
    {
      std::lock_guard lock(hub_->mutex());
      if (hub_->stopping()) return Status(StatusCode::kCancelled, "the follow hub stopped");
      auto it = hub_->feeds().find(stream_);
      if (it != hub_->feeds().end()) {
        if (!it->second.error.ok()) return it->second.error;
        if (position_ >= it->second.floor) {
          joined_ = true;
          return Status::Ok();
        }
        floor_before = it->second.floor;
      }
    }
    EntryId top;
    auto page = hub_->CatchUpPage(stream_, position_, archive_, &top);
    if (!page.ok()) return page.status();
    for (auto& entry : page->entries) out->push_back(std::move(entry));
    if (!out->empty()) position_ = *ParseId(out->back().id);
    if (page->next) return Status::Ok();  // more to catch up on
    // The page reached the stream's top: see the comment at the top of the file. The jump is
    // safe only to a floor the page has read up to.
    if (floor_before && position_ < *floor_before && *floor_before <= top) {
      position_ = *floor_before;
    }
    std::lock_guard lock(hub_->mutex());
    auto it = hub_->feeds().find(stream_);
    if (it == hub_->feeds().end()) {
      // A position above the top (a resume point from the future) must not start the shared
      // read there: it would wait for ids above it and starve every later follower. The
      // follower's own position still skips entries at or below it.
      hub_->StartFeedLocked(stream_, std::min(position_, top));
      joined_ = true;
    } else if (position_ >= it->second.floor) {
      joined_ = true;
    }
    return Status::Ok();
  }

  void TakeFromBuffer(const Feed& feed, std::vector<StreamEntry>* out) {
    auto first = std::upper_bound(feed.buffer.begin(), feed.buffer.end(), position_,
                                  [](const EntryId& id, const Buffered& b) { return id < b.id; });
    for (auto it = first; it != feed.buffer.end() && out->size() < static_cast<size_t>(kBatch);
         ++it) {
      out->push_back(it->entry);
      position_ = it->id;
    }
  }

  std::shared_ptr<FollowHub::Impl> hub_;
  std::string stream_;
  ArchiveStore* archive_;
  EntryId position_ = kMinId;
  bool resolve_now_ = false;
  bool joined_ = false;
};

}  // namespace

FollowHub::FollowHub(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
    : impl_(std::make_shared<Impl>(std::move(options), archive, tuning)) {}

FollowHub::~FollowHub() { impl_->Stop(); }

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream,
                                            const std::string& after_id) {
  return std::make_unique<HubFollower>(impl_, stream, after_id, impl_->archive());
}

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream, const std::string& after_id,
                                            ArchiveStore* archive) {
  return std::make_unique<HubFollower>(impl_, stream, after_id, archive);
}

int FollowHub::FollowerCount(const std::string& stream) const {
  return impl_->FollowerCount(stream);
}

void FollowHub::Stop() { impl_->Stop(); }

}  // namespace streamcar::log
