#include "sidecar/redis/topology/sentinel_watch.h"

#include <hiredis.h>

#include "sidecar/redis/topology/sentinel_proto.h"

namespace streamcar::redis {
namespace {

constexpr std::string_view kChannel = "+switch-master";

}  // namespace

SwitchMasterWatch::SwitchMasterWatch(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)), reader_(NewReader()) {}

SwitchMasterWatch::~SwitchMasterWatch() = default;

StatusOr<std::unique_ptr<SwitchMasterWatch>> SwitchMasterWatch::Open(
    const ConnectionOptions& sentinel) {
  auto connection = Connection::Open(sentinel);
  if (!connection.ok()) return connection.status();
  // The connection's reader is in step (Open's PING answered, nothing else asked): from here on
  // the watch reads the pushed messages with its own reader, without breaking on a quiet period.
  auto transport = std::move(**connection).TakeTransport();
  if (!transport.ok()) return transport.status();
  std::unique_ptr<SwitchMasterWatch> watch(new SwitchMasterWatch(std::move(*transport)));
  std::string request;
  Command("SUBSCRIBE").Arg(kChannel).AppendTo(&request);
  const SteadyTime deadline = SteadyClock::now() + sentinel.command_timeout;
  if (auto s = watch->transport_->WriteAll(request, deadline); !s.ok()) return s;
  // The confirmation: ["subscribe", "+switch-master", 1].
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(watch->reader_.get(), &raw) != REDIS_OK) {
      return Status(StatusCode::kProtocol, "cannot decode the sentinel's reply");
    }
    if (raw != nullptr) {
      Reply reply{ReplyPtr(static_cast<redisReply*>(raw))};
      if (reply.IsError()) return ErrorOf(reply.view());
      if (reply.view().Size() < 1 || reply[0].Str() != "subscribe") {
        return Status(StatusCode::kProtocol, "the sentinel did not confirm SUBSCRIBE");
      }
      return watch;
    }
    char buffer[4096];
    auto n = watch->transport_->ReadSome(buffer, sizeof(buffer), deadline);
    if (!n.ok()) return n.status();
    if (redisReaderFeed(watch->reader_.get(), buffer, *n) != REDIS_OK) {
      return Status(StatusCode::kProtocol, "cannot buffer the sentinel's reply");
    }
  }
}

StatusOr<std::optional<keys::NodeAddress>> SwitchMasterWatch::Next(std::string_view master_name,
                                                                   SteadyTime deadline) {
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      return Status(StatusCode::kProtocol, "cannot decode a sentinel message");
    }
    if (raw != nullptr) {
      Reply reply{ReplyPtr(static_cast<redisReply*>(raw))};
      // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
      if (reply.view().Size() == 3 && reply[0].Str() == "message" && reply[1].Str() == kChannel) {
        auto parsed = ParseSwitchMaster(reply[2].Str());
        if (parsed && parsed->first == master_name) return std::optional(parsed->second);
      }
      continue;
    }
    char buffer[4096];
    auto n = transport_->ReadSome(buffer, sizeof(buffer), deadline);
    if (!n.ok()) {
      if (n.status().code() == StatusCode::kTimeout) return std::optional<keys::NodeAddress>();
      return n.status();
    }
    if (redisReaderFeed(reader_.get(), buffer, *n) != REDIS_OK) {
      return Status(StatusCode::kProtocol, "cannot buffer a sentinel message");
    }
  }
}

}  // namespace streamcar::redis
