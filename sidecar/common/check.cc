#include "sidecar/common/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sidecar/common/log.h"

namespace streamcar {
namespace {

// STREAMCAR_SANITIZED is defined for every SANITIZE build (sidecar/CMakeLists.txt): UBSan alone
// defines no macro of its own.
#if !defined(NDEBUG) || defined(STREAMCAR_SANITIZED) || defined(__SANITIZE_ADDRESS__) || \
    defined(__SANITIZE_THREAD__)
constexpr bool kFatalByDefault = true;
#else
constexpr bool kFatalByDefault = false;
#endif

std::atomic<bool> fatal{kFatalByDefault};

}  // namespace

bool DchecksAreFatal() { return fatal.load(std::memory_order_relaxed); }

namespace check_internal {

void Failed(std::string_view condition, std::string_view detail, const char* file, int line,
            std::atomic<bool>* logged) {
  if (DchecksAreFatal()) {
    // Straight to stderr: the process stops here, and the log may be what is broken.
    std::fprintf(stderr, "%s:%d: internal check failed: %.*s (%.*s)\n", file, line,
                 static_cast<int>(condition.size()), condition.data(),
                 static_cast<int>(detail.size()), detail.data());
    std::fflush(stderr);
    std::abort();
  }
  if (logged->exchange(true)) return;
  // The site is in the message: the log's repeat limit is per message, and each check is its own.
  std::string_view path(file);
  if (auto at = path.rfind("sidecar/"); at != std::string_view::npos) path.remove_prefix(at);
  std::string msg = "internal check failed at ";
  msg += path;
  msg += ':';
  msg += std::to_string(line);
  msg += "; the step is skipped (logged once per check)";
  LogError(msg, {{"check", condition}, {"detail", detail}});
}

void SetFatalForTesting(bool fatal_checks) { fatal.store(fatal_checks); }

}  // namespace check_internal
}  // namespace streamcar
