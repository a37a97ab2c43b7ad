// Whether the follow hub's shared read may have skipped trimmed entries, and how the buffer's
// floor is raised past them (follow_gap.h, follow_feed.h; issue 29 F1).

#include "sidecar/log/follow_gap.h"

#include <gtest/gtest.h>

#include <limits>

#include "sidecar/log/follow_feed.h"

namespace streamcar::log {
namespace {

EntryId Id(uint64_t ms, uint64_t seq = 0) { return EntryId{ms, seq}; }

StreamRemovals Removals(std::optional<EntryId> first, std::optional<EntryId> max_deleted = {}) {
  return StreamRemovals{.exists = true, .first_entry = first, .max_deleted = max_deleted};
}

TEST(FollowGapTest, NothingLiesBetweenAnIdAndItsSuccessor) {
  EXPECT_EQ(SkippedUpTo(Id(10, 4), Id(10, 5), Id(12), std::nullopt), std::nullopt);
  // Nor between the read point and a first entry that is its successor.
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(10, 1))), std::nullopt);
}

TEST(FollowGapTest, NoTrimOrDeletionAboveTheReadPointMeansNoSkip) {
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(9))), std::nullopt);
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(10))), std::nullopt);
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(2), Id(10))), std::nullopt);
}

TEST(FollowGapTest, ATrimAboveTheReadPointRaisesTheFloorBelowTheFirstEntry) {
  // Everything from the first entry on was returned; what lay below it may be gone.
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(20))), Id(19, UINT64_MAX));
  // Trimmed after the read too (above what it returned): the whole read is below the floor.
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(35))), Id(30));
}

TEST(FollowGapTest, AnXdelAboveTheReadPointRaisesTheFloorPastIt) {
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(5), Id(15))), Id(15));
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(20), Id(25))), Id(25));
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(Id(5), Id(40))), Id(30));
}

TEST(FollowGapTest, AnUnansweredQuestionOrAnEmptyStreamSuspectsTheWholeRead) {
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), std::nullopt), Id(30));
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), StreamRemovals{}), Id(30));
  EXPECT_EQ(SkippedUpTo(Id(10), Id(20), Id(30), Removals(std::nullopt)), Id(30));
}

Feed FeedOf(std::initializer_list<uint64_t> ms) {
  Feed feed;
  for (uint64_t m : ms) feed.Append(StreamEntry{.id = FormatId(Id(m)), .fields = {{"k", "v"}}});
  return feed;
}

TEST(FollowFeedTest, RaiseFloorDropsWhatLiesBelowIt) {
  Feed feed = FeedOf({1, 2, 3, 4});
  const size_t bytes_of_one = feed.bytes / 4;
  feed.RaiseFloor(Id(2, 5));
  EXPECT_EQ(feed.floor, Id(2, 5));
  ASSERT_EQ(feed.buffer.size(), 2U);
  EXPECT_EQ(feed.buffer.front().id, Id(3));
  EXPECT_EQ(feed.bytes, 2 * bytes_of_one);
  // A follower below the floor must catch up elsewhere; one at it takes the rest.
  EntryId position = Id(2, 5);
  std::vector<StreamEntry> out;
  feed.TakeAfter(&position, &out, std::numeric_limits<size_t>::max());
  EXPECT_EQ(out.size(), 2U);
}

// The follow pump asks for what a slow client's share has room for: the take stops once it holds
// that many bytes, but always takes one entry, and the next take goes on after the last one taken.
TEST(FollowFeedTest, TakeAfterStopsAtItsByteBoundAndTheNextTakeGoesOn) {
  Feed feed = FeedOf({1, 2, 3, 4, 5});
  const size_t one = feed.bytes / 5;
  EntryId position = Id(0);
  std::vector<StreamEntry> out;
  feed.TakeAfter(&position, &out, 2 * one);
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(position, Id(2));
  out.clear();
  feed.TakeAfter(&position, &out, 1);  // less than one entry: still one
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].id, "3-0");
  out.clear();
  feed.TakeAfter(&position, &out, 0);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(position, Id(4));
  out.clear();
  feed.TakeAfter(&position, &out, std::numeric_limits<size_t>::max());
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(position, Id(5));
}

TEST(FollowFeedTest, RaiseFloorNeverLowersItNorPassesTheLastId) {
  Feed feed = FeedOf({1, 2, 3});
  feed.RaiseFloor(Id(2));
  feed.RaiseFloor(Id(1));
  EXPECT_EQ(feed.floor, Id(2));
  feed.RaiseFloor(Id(99));
  EXPECT_EQ(feed.floor, Id(3));
  EXPECT_TRUE(feed.buffer.empty());
  EXPECT_EQ(feed.bytes, 0U);
}

}  // namespace
}  // namespace streamcar::log
