#pragma once
// Whether this build (and so the binary under test) runs under ASan or TSan: figures of time
// and memory (latency bounds, resident memory) mean nothing there.

namespace streamcar::testing {

inline bool UnderSanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

}  // namespace streamcar::testing
