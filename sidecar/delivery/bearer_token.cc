#include "sidecar/delivery/bearer_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/common/token_file.h"

namespace streamcar::delivery {

bool BearerToken::Stamp::operator==(const Stamp& other) const {
  return device == other.device && inode == other.inode && size == other.size &&
         modified.tv_sec == other.modified.tv_sec && modified.tv_nsec == other.modified.tv_nsec;
}

StatusOr<BearerToken> BearerToken::Open(std::string path, SteadyTime now) {
  BearerToken token(std::move(path));
  token.checked_at_ = now;
  if (Status read = token.Read(); !read.ok()) {
    return Status(StatusCode::kInvalid, "handler.auth.bearer_token_file: " + read.message());
  }
  return token;
}

const std::string& BearerToken::HeaderValue(SteadyTime now) {
  if (now - checked_at_ >= kRecheck) Recheck(now);
  return header_value_;
}

void BearerToken::Recheck(SteadyTime now) {
  checked_at_ = now;
  struct stat info {};
  Status problem;
  if (::stat(path_.c_str(), &info) != 0) {
    problem = Status(StatusCode::kIo, "cannot read " + path_ + ": " + std::strerror(errno));
  } else {
    const Stamp seen{info.st_dev, info.st_ino, info.st_size, info.st_mtim};
    if (stamped_ && seen == stamp_ && !failing_) return;
    const std::string before = header_value_;
    problem = Read();
    if (problem.ok() && header_value_ != before) {
      LogInfo("handler.auth.bearer_token_file changed: requests carry the new token",
              {{"file", path_}});
    }
  }
  if (problem.ok()) {
    if (failing_) {
      LogInfo("handler.auth.bearer_token_file is readable again", {{"file", path_}});
    }
    failing_ = false;
    return;
  }
  if (!failing_) {
    LogError(
        "handler.auth.bearer_token_file has no usable token: requests keep the last good one "
        "until it has",
        {{"file", path_}, {"error", problem.message()}});
  }
  failing_ = true;
}

Status BearerToken::Read() {
  // The stamp is taken before the read: a change during the read shows at the next check.
  struct stat info {};
  const bool stamped = ::stat(path_.c_str(), &info) == 0;
  auto token = ReadTokenFile(path_);
  if (!token.ok()) return token.status();
  header_value_ = "Bearer " + *token;
  stamped_ = stamped;
  if (stamped) stamp_ = Stamp{info.st_dev, info.st_ino, info.st_size, info.st_mtim};
  return Status::Ok();
}

}  // namespace streamcar::delivery
