#include "sidecar/redis/acl_refusal.h"

#include <string>

namespace streamcar::redis {

bool IsAclRefusal(const Status& status) {
  if (status.IsServerError("NOPERM")) return true;
  if (!status.IsServerError("ERR")) return false;
  // Redis 7.0 and 7.2+ / Valkey word a script's refusal differently.
  return status.message().find("The user executing the script can't") != std::string::npos ||
         status.message().find("ACL failure in script") != std::string::npos;
}

}  // namespace streamcar::redis
