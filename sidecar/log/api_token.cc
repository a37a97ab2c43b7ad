#include "sidecar/log/api_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sidecar/common/log.h"
#include "sidecar/common/text.h"

namespace streamcar::log {

bool SecretEquals(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference = static_cast<unsigned char>(difference | (x ^ y));
  }
  return difference == 0;
}

void TokenFile::Refresh() {
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) {
    if (known_ || !token_.empty()) {
      LogError("api.token_file cannot be read: every API request is refused",
               {{"file", path_}, {"error", std::strerror(errno)}});
    }
    known_ = false;
    token_.clear();
    return;
  }
  if (known_ && info.st_dev == device_ && info.st_ino == inode_ && info.st_size == size_ &&
      info.st_mtim.tv_sec == modified_.tv_sec && info.st_mtim.tv_nsec == modified_.tv_nsec &&
      SteadyClock::now() - read_at_ < Millis(1000)) {
    return;
  }
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = in ? text.str() : std::string();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) {
    LogError("api.token_file is empty or unreadable: every API request is refused",
             {{"file", path_}});
  } else if (known_ && token != token_) {
    LogInfo("api.token_file changed: the new token is in force", {{"file", path_}});
  }
  known_ = true;
  device_ = info.st_dev;
  inode_ = info.st_ino;
  size_ = info.st_size;
  modified_ = info.st_mtim;
  read_at_ = SteadyClock::now();
  token_ = std::move(token);
}

bool TokenFile::Allows(std::string_view authorization) {
  static constexpr std::string_view kScheme = "Bearer ";
  std::lock_guard lock(mutex_);
  Refresh();
  if (token_.empty()) return false;
  // The scheme is case-insensitive (RFC 9110 11.1); the token is compared exactly.
  if (authorization.size() < kScheme.size() ||
      !EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return false;
  }
  return SecretEquals(authorization.substr(kScheme.size()), token_);
}

}  // namespace streamcar::log
