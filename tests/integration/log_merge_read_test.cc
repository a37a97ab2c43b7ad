// The merge-read (SPEC 10) while the real folder folds and trims, on every archive backend
// (SQLite, and PostgreSQL when built in) against a standalone redis-server: the check is
// tests/integration/merge_read_check.h, which the guarantee suite also runs on every topology.

#include <gtest/gtest.h>

#include "sidecar/common/stop_signal.h"
#include "tests/integration/merge_read_check.h"

namespace streamcar::testing {
namespace {

template <typename Backend>
class LogMergeReadTest : public ::testing::Test {
 protected:
  Backend backend_;
  RedisServer redis_;
  redis::RedisHealth health_;

  std::unique_ptr<redis::Session> Connected(const std::string& role) {
    auto session = std::make_unique<redis::Session>(redis_.ClientOptions(), role, &health_);
    StopSignal stop;
    EXPECT_TRUE(session->EnsureConnected(stop).ok());
    return session;
  }
};

TYPED_TEST_SUITE(LogMergeReadTest, Backends, BackendNames);

TYPED_TEST(LogMergeReadTest, EveryPassIsGapFreeAndDuplicateFreeWhileFoldsAndTrimsRun) {
  ExpectMergeReadGapFree(
      {.archive_url = this->backend_.url(),
       .connect = [this](const std::string& role) { return this->Connected(role); }});
}

}  // namespace
}  // namespace streamcar::testing
