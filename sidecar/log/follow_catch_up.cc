// The follow hub's catch-up reads (follow_hub.cc): where "now" is in a stream, and the pages a
// follower below the shared read's floor reads through a LogReader (archive, then Redis) until
// it reaches the top. They share one connection per slot, apart from the lanes' blocking ones.

#include <algorithm>

#include "sidecar/log/follow_hub_impl.h"

namespace streamcar::log {

std::optional<EntryId> FollowHub::Impl::ResolveNow(const std::string& stream, Status* error) {
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
    if (reply.ok() || !sessions_.AfterFailure(connection, reply.status())) break;
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
      if (auto id = ParseId(info[i + 1].Str())) return id;
    }
  }
  *error = Status(StatusCode::kProtocol, "XINFO STREAM gave no last-generated-id");
  return std::nullopt;
}

StatusOr<LogPage> FollowHub::Impl::CatchUpPage(const std::string& stream, const EntryId& after,
                                               ArchiveStore* archive, int count, EntryId* top) {
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
  query.count = std::clamp(count, 1, kFollowBatch);
  auto page = reader.Read(stream, query);
  // The follower asks again on its next call, then on the slot's master.
  if (!page.ok()) sessions_.AfterFailure(connection, page.status());
  return page;
}

StatusOr<redis::Session*> FollowHub::Impl::CatchUpSessionLocked(int slot,
                                                                LaneConnection& connection) {
  if (Status status = sessions_.Target(slot, connection, "follow-catchup"); !status.ok()) {
    return status;
  }
  if (!connection.session->connected()) {
    Millis retry_in{0};
    if (Status status = connection.session->ConnectOnce(&retry_in); !status.ok()) {
      sessions_.AfterFailure(connection, status);
      return status;
    }
  }
  return connection.session.get();
}

}  // namespace streamcar::log
