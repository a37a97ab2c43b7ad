#include "sidecar/app/config_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

namespace streamcar::app {
namespace {

// Everything that may replace or rewrite a name in a folder, or the folder itself.
constexpr uint32_t kMask = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE |
                           IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

std::string FolderOf(const std::filesystem::path& path) {
  const auto parent = path.parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

ConfigWatch::ConfigWatch(std::string path, UniqueFd inotify)
    : path_(std::move(path)),
      name_(std::filesystem::path(path_).filename().string()),
      inotify_(std::move(inotify)) {}

StatusOr<std::unique_ptr<ConfigWatch>> ConfigWatch::Open(std::string path) {
  UniqueFd inotify(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify.get() < 0) {
    return Status(StatusCode::kIo, std::string("inotify: ") + std::strerror(errno));
  }
  std::unique_ptr<ConfigWatch> watch(new ConfigWatch(std::move(path), std::move(inotify)));
  if (!watch->WatchFolders()) {
    return Status(StatusCode::kIo,
                  "cannot watch the folder of " + watch->path_ + ": " + std::strerror(errno));
  }
  return watch;
}

bool ConfigWatch::WatchFolders() {
  const std::filesystem::path path(path_);
  // Adding a folder watched already returns its watch again: nothing doubles.
  if (inotify_add_watch(inotify_.get(), FolderOf(path).c_str(), kMask) < 0) return false;
  link_name_.clear();
  std::array<char, PATH_MAX> link{};
  const ssize_t length = readlink(path_.c_str(), link.data(), link.size() - 1);
  if (length > 0 && link[0] != '/') {
    const std::string target(link.data(), static_cast<size_t>(length));
    link_name_ = target.substr(0, target.find('/'));
  }
  target_name_.clear();
  char* resolved = realpath(path_.c_str(), nullptr);
  if (resolved == nullptr) return true;  // being replaced: the next event finds it
  const std::filesystem::path target(resolved);
  std::free(resolved);  // NOLINT(cppcoreguidelines-no-malloc): realpath's allocation
  target_name_ = target.filename().string();
  // A ConfigMap's timestamped folder goes away at the next swap, and its watch with it.
  inotify_add_watch(inotify_.get(), FolderOf(target).c_str(), kMask);
  return true;
}

void ConfigWatch::OnReadable(SteadyTime now) {
  alignas(inotify_event) std::array<char, 16384> buffer{};
  for (;;) {
    const ssize_t got = read(inotify_.get(), buffer.data(), buffer.size());
    if (got <= 0) return;
    for (ssize_t at = 0; at < got;) {
      inotify_event event{};
      std::memcpy(&event, buffer.data() + at, sizeof(event));
      const std::string_view name(buffer.data() + at + sizeof(event),
                                  strnlen(buffer.data() + at + sizeof(event), event.len));
      at += static_cast<ssize_t>(sizeof(event) + event.len);
      // Other files of the folder (a log written beside it) are not the file's change.
      const bool concerns =
          (event.mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0 ||
          name == name_ || (!link_name_.empty() && name == link_name_) ||
          (!target_name_.empty() && name == target_name_);
      if (concerns) due_ = now + kQuiet;
    }
  }
}

int ConfigWatch::PollTimeoutMs(SteadyTime now) const {
  if (!due_) return -1;
  const auto left = std::chrono::ceil<Millis>(*due_ - now).count();
  return static_cast<int>(std::max<int64_t>(left, 0));
}

bool ConfigWatch::Due(SteadyTime now) {
  if (!due_ || now < *due_) return false;
  due_.reset();
  WatchFolders();
  return true;
}

}  // namespace streamcar::app
