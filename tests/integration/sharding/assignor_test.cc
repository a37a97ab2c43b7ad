// The uniform-sticky assignor inside the heartbeat script (SHARDING.md B4.2, B10.2), driven
// through the script on a real redis-server by random joins and leaves: sizes differ by at most
// one, each change moves no more shards than it must, and the same history gives the same
// targets.

#include <random>

#include "tests/integration/sharding/coordinator_fixture.h"

namespace streamcar::sharding::testing {
namespace {

struct Step {
  bool join = true;
  std::string member;
};

// A random history of joins and leaves keeping 1..20 members (the first step is a join).
std::vector<Step> RandomHistory(uint32_t seed, int steps) {
  std::mt19937 random(seed);
  std::vector<std::string> live;
  std::vector<Step> history;
  int next_id = 0;
  for (int i = 0; i < steps; ++i) {
    const bool join = live.empty() || (live.size() < 20 && random() % 3 != 0);
    if (join) {
      live.push_back("member-" + std::to_string(next_id++));
      history.push_back({true, live.back()});
    } else {
      const size_t at = random() % live.size();
      history.push_back({false, live[at]});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return history;
}

class AssignorTest : public CoordinatorTest, public ::testing::WithParamInterface<int> {
 protected:
  // Plays `history` on the group `stream`; returns the target after each step.
  std::vector<std::map<std::string, std::set<int>>> Play(const std::vector<Step>& history,
                                                         const std::string& stream) {
    keys_ = keys::CoordinatorKeysFor(stream, "billing");
    std::map<std::string, Member> members;
    std::vector<std::map<std::string, std::set<int>>> targets;
    for (const Step& step : history) {
      if (step.join) {
        members.emplace(step.member, Member(step.member));
        Beat(members.at(step.member));
      } else {
        members.at(step.member).Leave();
        Beat(members.at(step.member));
        members.erase(step.member);
        // A leave answers at once; the next heartbeat of anyone computes the target.
        if (!members.empty()) Beat(members.begin()->second);
      }
      targets.push_back(Target());
    }
    return targets;
  }
};

TEST_P(AssignorTest, SizesDifferByAtMostOneAndEachChangeMovesOnlyWhatItMust) {
  const int shards = GetParam();
  timing_.shards = shards;
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Step> history = RandomHistory(seed, 30);
    const auto targets = Play(history, "orders-" + std::to_string(seed));
    std::set<std::string> live;
    std::map<int, std::string> owner_before;
    for (size_t i = 0; i < history.size(); ++i) {
      const Step& step = history[i];
      SCOPED_TRACE("step " + std::to_string(i) + (step.join ? " join " : " leave ") + step.member);
      if (step.join) {
        live.insert(step.member);
      } else {
        live.erase(step.member);
      }
      const auto& target = targets[i];
      if (live.empty()) {
        owner_before.clear();  // nobody is left to heartbeat: the target is not recomputed
        continue;
      }
      std::map<int, std::string> owner;
      for (const auto& [member, owned] : target) {
        EXPECT_TRUE(live.contains(member)) << member << " is not a member";
        for (int shard : owned) owner[shard] = member;
      }
      EXPECT_EQ(owner.size(), static_cast<size_t>(shards)) << "every shard has a target";
      size_t smallest = SIZE_MAX, largest = 0;
      for (const std::string& member : live) {
        const size_t size = target.contains(member) ? target.at(member).size() : 0;
        smallest = std::min(smallest, size);
        largest = std::max(largest, size);
      }
      EXPECT_LE(largest - smallest, 1u);
      // Moved: shards whose member changed, not counting the shards of a member who left.
      size_t moved = 0;
      for (const auto& [shard, member] : owner) {
        auto was = owner_before.find(shard);
        if (was != owner_before.end() && was->second != member &&
            (step.join || was->second != step.member)) {
          ++moved;
        }
      }
      const size_t quota = static_cast<size_t>(shards) / live.size();
      if (step.join && live.size() > 1 && static_cast<size_t>(shards) >= live.size()) {
        EXPECT_EQ(moved, quota) << "a joiner takes floor(S/M), only from members above quota";
        EXPECT_EQ(target.at(step.member).size(), quota);
      }
      if (!step.join) {
        EXPECT_EQ(moved, 0u) << "a leave moves only the leaver's shards";
      }
      owner_before = owner;
    }
  }
}

TEST_P(AssignorTest, TheSameHistoryGivesTheSameTargets) {
  timing_.shards = GetParam();
  const std::vector<Step> history = RandomHistory(7, 25);
  EXPECT_EQ(Play(history, "first"), Play(history, "second"));
}

INSTANTIATE_TEST_SUITE_P(ShardCounts, AssignorTest, ::testing::Values(1, 7, 16, 64, 256));

// Stickiness by instance id: StatefulSet pods that left for good (epoch -1: no reservation)
// and come back as new processes score the same shards highest again (HRW on the instance id).
TEST_F(CoordinatorTest, ARestartedInstanceScoresTheSameShardsAgain) {
  timing_.shards = 16;
  Member a("a-1", "pod-a"), b("b-1", "pod-b");
  Beat(a);
  Beat(b);
  Beat(a);
  const auto before = Target();
  // Both leave for good and come back as new processes.
  a.Leave();
  Beat(a);
  b.Leave();
  Beat(b);
  Member a2("a-2", "pod-a"), b2("b-2", "pod-b");
  Beat(a2);
  Beat(b2);
  Beat(a2);
  const auto after = Target();
  ASSERT_TRUE(before.contains("a-1") && after.contains("a-2"));
  EXPECT_EQ(before.at("a-1"), after.at("a-2"));
  EXPECT_EQ(before.at("b-1"), after.at("b-2"));
}

}  // namespace
}  // namespace streamcar::sharding::testing
