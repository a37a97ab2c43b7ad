#pragma once
// The follow hub's shared state (follow_hub.h), kept apart so that each of its jobs is a file:
// the lanes' shared reads and the waker (follow_hub.cc), the catch-up reads (follow_catch_up.cc)
// and the followers (hub_follower.cc). Not for other users.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/log/follow_feed.h"
#include "sidecar/log/follow_hub.h"
#include "sidecar/log/follow_lane.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::log {

class FollowHub::Impl {
 public:
  Impl(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning);
  ~Impl() { Stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Stop();
  int FollowerCount(const std::string& stream) const;
  void AddFollower(const std::string& stream);
  void RemoveFollower(const std::string& stream);
  int AddListener(std::function<void()> on_change);
  void RemoveListener(int id);

  // The catch-up reads (follow_catch_up.cc), on connections of their own.
  // "$": the id the stream's next entry will be above (its last-generated id, which counts
  // deleted entries too; 0-0 when the stream does not exist). nullopt when Redis cannot say.
  std::optional<EntryId> ResolveNow(const std::string& stream, Status* error);
  // One page of up to `count` entries (1..kFollowBatch) of catch-up after `after`, through
  // `archive` (null: Redis only) and Redis, and in *top the stream's last-generated id read just
  // before it: a page without `next` holds every entry up to at least that top.
  StatusOr<LogPage> CatchUpPage(const std::string& stream, const EntryId& after,
                                ArchiveStore* archive, int count, EntryId* top);

  ArchiveStore* archive() const { return archive_; }

  std::mutex& mutex() { return mutex_; }
  std::condition_variable& changed() { return changed_; }
  // The accessors below need mutex() held.
  bool stopping() const { return stopping_; }
  std::map<std::string, Feed>& feeds() { return feeds_; }
  // Why the shared read of `stream` last failed (Ok after a successful read).
  Status ReadErrorLocked(const std::string& stream) const;
  // Starts the shared read of `stream` after `from`, and has its lane's XREAD interrupted so that
  // it includes the stream at once. Needs mutex() held.
  void StartFeedLocked(const std::string& stream, const EntryId& from);

  // Waits until `deadline` or Stop.
  void PauseUntil(SteadyTime deadline);

 private:
  // The lane of `stream`: its cluster slot, or the one lane (-1).
  int SlotOf(const std::string& stream) const;
  // The connected catch-up session of `slot` (one per slot in a cluster; one in all). Needs
  // catch_up_mutex_ held.
  StatusOr<redis::Session*> CatchUpSessionLocked(int slot, LaneConnection& connection);

  // The lane of `slot`, started when it is new; null once the hub stops. Needs mutex_ held.
  Lane* LaneLocked(int slot);
  void HubLoop(Lane& lane);
  // One shared XREAD of the lane (or one connection attempt); true when the hub is stopping.
  bool RunOnce(Lane& lane, LaneConnection& connection);
  // Waits until the lane has a stream to read; true when the hub is stopping instead.
  bool WaitForReadableFeed(Lane& lane);
  // Connects the lane (and reads its CLIENT ID on a new connection). nullopt when connected; else
  // RunOnce's answer for this round.
  std::optional<bool> ConnectLane(Lane& lane, LaneConnection& connection);
  // The lane's XREAD failed: go where the slot is now, wait, or find the key that is not a
  // stream. RunOnce's answer.
  bool AfterReadFailed(Lane& lane, LaneConnection& connection,
                       const std::vector<std::pair<std::string, EntryId>>& reads,
                       const Status& error);
  bool HasReadableFeedLocked(const Lane& lane) const;
  // An error reply to the XREAD: find the keys that are not streams (TYPE) and stop reading them
  // rather than stall every other stream; their followers get the error.
  void FindUnreadableStreams(Lane& lane, redis::Session& session,
                             const std::vector<std::pair<std::string, EntryId>>& reads,
                             const Status& error);
  void SetLaneError(Lane& lane, const Status& status);
  // After an XREAD reply: the streams whose read may have skipped entries that a trim or XDEL
  // removed before it ran (follow_gap.h), each with the floor its buffer must be raised to. Asks
  // the lane's connection (XINFO STREAM, one pipeline) only about streams whose first returned id
  // is not the successor of the one read from.
  std::map<std::string, EntryId> FindSkips(
      redis::Session& session, const std::vector<std::pair<std::string, EntryId>>& reads,
      const redis::ReplyView& reply);
  // The XREAD reply: [[stream, [[id, fields], ...]], ...], or nil after the block; `skips` (by
  // FindSkips) raise the floors of the streams they name.
  void Deliver(Lane& lane, const redis::ReplyView& reply,
               const std::map<std::string, EntryId>& skips);
  // Deliver's part under mutex_: the entries into their feeds' buffers.
  void FillFeeds(Lane& lane, const redis::ReplyView& reply,
                 const std::map<std::string, EntryId>& skips);
  // A lane the waker must interrupt: it has not issued an XREAD with every stream added to it,
  // or the hub stops (so Stop never waits out a BLOCK). Needs mutex_ held.
  bool BehindLocked(const Lane& lane) const;
  bool AllLanesDoneLocked() const;
  // Tells the listeners (FollowHub::AddListener) that followers may have news. Call with mutex_
  // not held, after the change is visible under it.
  void NotifyListeners();
  // Interrupts each lane's XREAD until it has issued one that includes every stream added to it;
  // on Stop, until every lane's thread has ended. One connection per node the lanes are on.
  void WakerLoop();

  SlotSessions sessions_;
  ArchiveStore* archive_;
  FollowOptions tuning_;
  redis::Topology* topology_ = nullptr;  // sessions_'s; null: standalone
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

  // Held while a listener runs, so that RemoveListener waits for a call in progress.
  std::mutex listeners_mutex_;
  std::map<int, std::function<void()>> listeners_;
  int next_listener_ = 0;
};

// A follower of `stream` from just after `after` (hub_follower.cc).
std::unique_ptr<Follower> MakeHubFollower(std::shared_ptr<FollowHub::Impl> hub, std::string stream,
                                          const std::string& after, ArchiveStore* archive);

}  // namespace streamcar::log
