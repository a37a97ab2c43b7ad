#pragma once
// The API's bearer token (SPEC section 10, api.token_file): every request needs
// "Authorization: Bearer <file content>". The file is re-read when it changes, so a rotated
// Kubernetes Secret takes effect without a restart: each check compares the file's inode, size
// and modification time with the last read (one stat per request; no read unless it moved).
// A file rewritten within one tick of the file system's clock with the same size would look
// unchanged, so the file is also re-read when the last read is over a second old.
// The content with trailing whitespace (a final newline) removed is the token. A missing,
// unreadable or empty file refuses every request: the API fails closed.

#include <sys/types.h>

#include <ctime>
#include <mutex>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"

namespace streamcar::log {

class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}

  // True when `authorization` (the Authorization field's value) is "Bearer <token>" with the
  // current token. Thread-safe. The comparison takes the same time wherever the first
  // difference is, so the token cannot be guessed byte by byte from response times.
  bool Allows(std::string_view authorization);

 private:
  // Re-reads the file when its identity or content may have moved. Holds mutex_.
  void Refresh();

  const std::string path_;
  std::mutex mutex_;
  bool known_ = false;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  off_t size_ = 0;
  timespec modified_{};
  SteadyTime read_at_{};
  std::string token_;
};

// Constant-time equality for secrets (time depends on the lengths only).
bool SecretEquals(std::string_view a, std::string_view b);

}  // namespace streamcar::log
