#include "sidecar/redis/replica_wait.h"

#include "sidecar/redis/connection.h"

namespace streamcar::redis {

Command RoleProbe() { return Command("ROLE"); }

StatusOr<int> ParseReplicaCount(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() < 1 || !reply[0].IsString()) {
    return Status(StatusCode::kProtocol, "unexpected reply to ROLE");
  }
  if (reply[0].Str() != "master") return kNotAMaster;
  // ["master", offset, [[ip, port, offset], ...]]: a list cut short is no count of none.
  if (reply.Size() < 3 || !reply[2].IsArray()) {
    return Status(StatusCode::kProtocol, "unexpected reply to ROLE");
  }
  return static_cast<int>(reply[2].Size());
}

Command WaitForReplicas(int replicas, Millis timeout) {
  Command command("WAIT");
  command.Arg(int64_t{replicas}).Arg(static_cast<int64_t>(timeout.count()));
  return command;
}

StatusOr<int64_t> ParseReplicasAcked(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsInteger()) return Status(StatusCode::kProtocol, "unexpected reply to WAIT");
  return reply.Integer();
}

}  // namespace streamcar::redis
