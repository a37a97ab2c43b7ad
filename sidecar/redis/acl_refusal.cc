#include "sidecar/redis/acl_refusal.h"

#include <string>

namespace streamcar::redis {

bool IsAclRefusal(const Status& status) {
  return status.IsServerError("NOPERM") ||
         (status.IsServerError("ERR") &&
          status.message().find("The user executing the script can't") != std::string::npos);
}

}  // namespace streamcar::redis
