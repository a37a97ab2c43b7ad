#pragma once
// Whether Redis refused a command for the ACL user's rights: NOPERM for a command sent as it
// is, and an ERR for one a script runs: "The user executing the script can't ..." (Redis 7.0),
// "ACL failure in script: ..." (Redis 7.2 and later, Valkey).
// No retry changes either: the subscription cannot work until the user's rules do.

#include "sidecar/common/status.h"

namespace streamcar::redis {

bool IsAclRefusal(const Status& status);

}  // namespace streamcar::redis
