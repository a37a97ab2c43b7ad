#include "sidecar/redis/consumer_lease.h"

#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/lua/consumer_lease.lua.h"
#include "sidecar/redis/lua/consumer_lease_release.lua.h"

namespace streamcar::redis {

Command TakeLease(std::string_view key, const LeaseIdentity& identity, Millis expiry) {
  Command command("EVAL");
  command.Arg(lua::kConsumerLease).Arg(int64_t{1}).Arg(key);
  command.Arg(identity.token).Arg(identity.instance).Arg(static_cast<int64_t>(expiry.count()));
  command.Arg(identity.own_pod);
  return command;
}

Command ReleaseLease(std::string_view key, std::string_view token) {
  Command command("EVAL");
  command.Arg(lua::kConsumerLeaseRelease).Arg(int64_t{1}).Arg(key).Arg(token);
  return command;
}

StatusOr<LeaseReply> ParseLease(const StatusOr<Reply>& answer, std::string_view key) {
  Status status = answer.ok() ? Status::Ok() : answer.status();
  if (answer.ok() && answer->IsError()) status = ErrorOf(answer->view());
  if (!status.ok()) {
    if (status.IsServerError("WRONGTYPE")) {
      return Status(StatusCode::kFatal,
                    "the consumer-name lease key \"" + std::string(key) +
                        "\" exists and is not a hash (WRONGTYPE); streamcar leaves it "
                        "untouched: remove it or give the consumer another name");
    }
    if (IsAclRefusal(status)) {
      return Status(StatusCode::kFatal,
                    "the ACL refuses the consumer-name lease on \"" + std::string(key) + "\" (" +
                        status.message() +
                        "): allow the key and +eval +hget +hset +hdel +pexpire +pttl");
    }
    return status;
  }
  const ReplyView reply = answer->view();
  if (!reply.IsArray() || reply.Size() < 2 || !reply[0].IsInteger()) {
    return Status(StatusCode::kProtocol, "the consumer-name lease script answered an odd reply");
  }
  LeaseReply parsed;
  parsed.ours = reply[0].Integer() == 1;
  if (parsed.ours) {
    parsed.how = std::string(reply[1].Str());
    return parsed;
  }
  parsed.holder = std::string(reply[1].Str());
  if (reply.Size() > 2) parsed.remaining_ms = reply[2].Integer();
  return parsed;
}

}  // namespace streamcar::redis
