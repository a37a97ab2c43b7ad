#pragma once
// handler.auth.bearer_token_file while the sidecar runs (SPEC 11): the Authorization header every
// request carries, following the file as it rotates. A projected service-account token is
// rewritten under a running pod, by the kubelet's atomic swap of the volume's `..data` symlink
// (`token -> ..data/token`, `..data -> ..2026_...`), or a file may simply be rewritten in place.
//
// How a change is noticed: a request that finds the last look at the file kRecheck old stats the
// path (following the symlinks, so a swap shows as another inode) and reads the file again only
// when its device, inode, size or modification time moved. So at most one stat a second while
// requests flow and none while idle; a rotated token is on every request that starts kRecheck
// after the change. Not inotify: a watch on the directory has to follow the `..data` swap and be
// re-armed, costs a descriptor and a loop registration per subscription, and buys nothing over a
// one-second bound for a token the kubelet refreshes minutes before the old one expires.
//
// A file that becomes unreadable, empty or not a token keeps the last good token in use: one
// error is logged when that starts and one line when it is good again, never the token itself.
//
// Single-threaded (the subscription's loop); time is passed in.

#include <sys/types.h>

#include <ctime>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

namespace streamcar::delivery {

class BearerToken {
 public:
  static constexpr Millis kRecheck{1000};

  // Reads `path` now: kInvalid (common/token_file.h's message) when it holds no usable token.
  static StatusOr<BearerToken> Open(std::string path, SteadyTime now);

  // "Bearer <token>" as of `now`.
  const std::string& HeaderValue(SteadyTime now);

 private:
  // What stat says of the file; a change in any part means "read it again".
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec modified{};
    bool operator==(const Stamp& other) const;
  };
  explicit BearerToken(std::string path) : path_(std::move(path)) {}
  // Stats the file and reads it again if it moved; keeps the last good token on any failure.
  void Recheck(SteadyTime now);
  // Reads the file into header_value_; the failure, if any.
  Status Read();

  std::string path_;
  std::string header_value_;  // "Bearer <token>"
  Stamp stamp_;
  bool stamped_ = false;  // stamp_ describes the file as last read
  SteadyTime checked_at_{};
  bool failing_ = false;  // logged; reset (and logged) when the file is good again
};

}  // namespace streamcar::delivery
