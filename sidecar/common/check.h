#pragma once
// SC_DCHECK(condition, detail): an internal invariant, such as the prior state of a transition.
// When it does not hold, debug and sanitizer builds stop at once (abort with the check, its file
// and line), so that a test or a sanitizer run cannot pass over a broken invariant. A release
// build logs it once per check site (an error line; later failures of the same check are silent)
// and carries on: the caller skips the step the check guards, which is always the safe choice
// for the callers here (an entry left held is delivered again or reclaimed; one settled twice
// is not).
//
// The expression is a bool: true when the condition holds, so a caller writes
//   if (!SC_DCHECK(entry.state == kInFlight, StateText(entry))) return;
// `detail` (anything convertible to std::string_view) is evaluated only when the check fails.

#include <atomic>
#include <string_view>

namespace streamcar {

// Whether a failed SC_DCHECK aborts: true in debug (no NDEBUG) and sanitizer builds.
bool DchecksAreFatal();

namespace check_internal {

// Reports a failed check; aborts when DchecksAreFatal(), else logs it unless `logged` was set.
void Failed(std::string_view condition, std::string_view detail, const char* file, int line,
            std::atomic<bool>* logged);

// Tests only: makes failed checks fatal (true) or logged (false) whatever the build.
void SetFatalForTesting(bool fatal);

}  // namespace check_internal
}  // namespace streamcar

// NOLINTBEGIN(cppcoreguidelines-macro-usage): the check needs the site's file, line and text.
#define SC_DCHECK(condition, detail)                                              \
  (static_cast<bool>(condition) ? true : [&]() {                                  \
    static std::atomic<bool> sc_dcheck_logged{false};                             \
    ::streamcar::check_internal::Failed(#condition, (detail), __FILE__, __LINE__, \
                                        &sc_dcheck_logged);                       \
    return false;                                                                 \
  }())
// NOLINTEND(cppcoreguidelines-macro-usage)
