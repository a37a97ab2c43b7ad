// The guarantee suite's log case (issue 33; docs/reliability.md): the log API's merge-read is
// gap-free and duplicate-free while the folder folds and trims, on every topology. The check is
// LogMergeReadTest's (tests/integration/merge_read_check.h), run here through the product's own
// routing (redis::Topology) on the deployment of the parameter, with a SQLite archive. One suite
// with tests/e2e/guarantee_test.cc, which instantiates it.

#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/session.h"
#include "tests/e2e/guarantee_fixture.h"
#include "tests/integration/merge_read_check.h"

namespace streamcar::testing {
namespace {

// (7) SPEC 10: every pass over the whole window sees exactly the entries appended, in order,
// whichever side (Redis or the archive) each page came from, while the watermark moves.
TEST_P(GuaranteeTest, TheMergeReadIsGapFree) {
  const std::string feed = topology_->NewStream("feed-");
  redis::TopologyOptions options = topology_->ProductTopology();
  options.used_slots = {keys::KeySlot(feed)};
  const redis::ConnectionOptions data = options.data;
  auto routing = std::make_shared<redis::Topology>(std::move(options), nullptr);
  ASSERT_TRUE(routing->Resolve(SteadyClock::now() + seconds(20)).ok());
  redis::RedisHealth health;
  SqliteBackend archive;
  ExpectMergeReadGapFree({.stream = feed,
                          .archive_url = archive.url(),
                          .connect =
                              [&](const std::string& role) {
                                redis::ConnectionOptions routed = data;
                                routed.topology = routing;
                                auto session =
                                    std::make_unique<redis::Session>(routed, role, &health);
                                StopSignal stop;
                                const Status connected = session->EnsureConnected(stop);
                                EXPECT_TRUE(connected.ok()) << role << ": " << connected.ToString();
                                return connected.ok() ? std::move(session) : nullptr;
                              },
                          // Fewer than LogMergeReadTest's: three topologies, and CI's two cores.
                          .initial = 300,
                          .appended_while_reading = 300,
                          .min_passes = 15});
}

}  // namespace
}  // namespace streamcar::testing
