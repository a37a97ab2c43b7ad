#pragma once
// Notices that the configuration file changed (SPEC 2, "Reload"): inotify on the file's folder,
// not on the file, so that what replaces it is seen too: an editor's rename over it, or a
// Kubernetes ConfigMap volume's atomic swap, where the mounted name is a symlink through `..data`
// to a timestamped folder and the kubelet renames a new `..data` over the old one. The folder the
// file resolves to is watched as well (a symlink elsewhere). Events are debounced: a change is due
// once they have been quiet for kQuiet. Whether the content changed is the caller's question
// (app/config_reload.h compares it with what it read last).
//
// No thread of its own: the main thread polls fd() beside its signals (app/run.cc).

#include <memory>
#include <optional>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/unique_fd.h"

namespace streamcar::app {

class ConfigWatch {
 public:
  static constexpr Millis kQuiet{200};

  // Fails when inotify cannot watch the file's folder (the caller logs it; SIGHUP still reloads).
  static StatusOr<std::unique_ptr<ConfigWatch>> Open(std::string path);

  // Readable when events are waiting: then OnReadable.
  int fd() const { return inotify_.get(); }
  // Reads the waiting events; one that may concern the file makes a change due kQuiet from now.
  void OnReadable(SteadyTime now);
  // How long a poll may sleep before Due() can be true: -1 while none is pending.
  int PollTimeoutMs(SteadyTime now) const;
  // True once per change, when it has been quiet for kQuiet; the watches follow the file again.
  bool Due(SteadyTime now);

 private:
  explicit ConfigWatch(std::string path, UniqueFd inotify);
  // (Re)adds the watches: the file's folder, and the folder its symlinks resolve to now. False
  // when the file's folder cannot be watched.
  bool WatchFolders();

  const std::string path_;
  const std::string name_;  // the file's name in its folder
  UniqueFd inotify_;
  std::string link_name_;    // in the file's folder: the name its symlink goes through ("..data")
  std::string target_name_;  // in the folder the file resolves to: its name there
  std::optional<SteadyTime> due_;
};

}  // namespace streamcar::app
