// The manual trim (sidecar/log/manual_trim.h, `streamcar trim`) against a real redis-server and
// each archive backend: an archived stream folded up to the trim point first and trimmed at or
// below W only; the lease shared with the retention beat (waited for, never folded beside); a
// dry run that writes nothing; the exact XTRIM of a stream without archive.

#include "sidecar/log/manual_trim.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/log/retention.h"
#include "tests/integration/archive_redis_fixture.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

template <typename Backend>
class ManualTrimTest : public ArchiveRedisTest<Backend> {
 protected:
  log::ManualTrimOptions Trim(log::TrimPoint point, bool archived = true) {
    log::ManualTrimOptions options;
    options.stream = "feed";
    options.point = point;
    options.archive = archived ? this->store_.get() : nullptr;
    options.holder = "trim-cli";
    options.batch = 7;
    return options;
  }
  static log::TrimPoint MaxLen(int64_t n) {
    return {.kind = log::TrimPoint::Kind::kMaxLen, .max_len = n};
  }
  static log::TrimPoint MinId(const std::string& id) {
    return {.kind = log::TrimPoint::Kind::kMinId, .min_id = *ParseEntryId(id)};
  }
  bool Exists(const std::string& key) {
    return this->redis_.Run({"EXISTS", key}).view().Integer() == 1;
  }
};

TYPED_TEST_SUITE(ManualTrimTest, Backends, BackendNames);

TYPED_TEST(ManualTrimTest, FoldsUpToTheTrimPointThenTrimsOnlyThat) {
  const auto ids = this->Append(50);
  auto report = log::TrimNow(*this->session_, this->Trim(this->MaxLen(10)));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->archived);
  EXPECT_EQ(report->folded, 40);  // in batches of 7: six full ones and a last of 5
  EXPECT_EQ(report->inserted, 40);
  EXPECT_EQ(report->trimmed, 40);
  EXPECT_EQ(report->left, 10);
  EXPECT_EQ(report->watermark, ids[39]);
  EXPECT_EQ(this->RedisIds(), std::vector<std::string>(ids.begin() + 40, ids.end()));
  this->ExpectEachOnce(ids);
  EXPECT_EQ(*this->store_->Watermark("feed"), ids[39]);
  EXPECT_EQ(this->RedisWatermark(), ids[39]);
  // The lease was given back: the beat's next step need not wait for its expiry.
  EXPECT_FALSE(this->Exists("{feed}:archive:lease"));

  // Nothing more is due at that length; a shorter one folds the rest.
  auto again = log::TrimNow(*this->session_, this->Trim(this->MaxLen(10)));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->folded, 0);
  EXPECT_EQ(again->trimmed, 0);
  EXPECT_EQ(again->watermark, ids[39]);
  auto all = log::TrimNow(*this->session_, this->Trim(this->MaxLen(0)));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->folded, 10);
  EXPECT_EQ(all->left, 0);
  EXPECT_EQ(all->watermark, ids.back());
  this->ExpectEachOnce(ids);
}

TYPED_TEST(ManualTrimTest, MinIdAndMaxAgeFoldWhatIsBelowTheirCut) {
  // Five entries an hour old by Redis's clock, then five new ones.
  auto time = this->redis_.Run({"TIME"});
  const int64_t now_ms = std::stoll(std::string(time.view()[0].Str())) * 1000;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(std::to_string(now_ms - 3600 * 1000 + i) + "-0");
    this->redis_.Run({"XADD", "feed", ids.back(), "n", std::string("v\0\xff", 3), "n", "again"});
  }
  const auto recent = this->Append(5);
  ids.insert(ids.end(), recent.begin(), recent.end());

  auto by_id = log::TrimNow(*this->session_, this->Trim(this->MinId(ids[2])));
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(by_id->folded, 2);  // strictly below the id, as XTRIM MINID
  EXPECT_EQ(by_id->watermark, ids[1]);
  EXPECT_EQ(this->RedisIds(), std::vector<std::string>(ids.begin() + 2, ids.end()));

  auto by_age = this->Trim({.kind = log::TrimPoint::Kind::kMaxAge, .max_age = Millis(600000)});
  auto aged = log::TrimNow(*this->session_, by_age);
  ASSERT_TRUE(aged.ok()) << aged.status().ToString();
  EXPECT_EQ(aged->folded, 3);
  EXPECT_EQ(aged->watermark, ids[4]);
  EXPECT_EQ(this->RedisIds(), recent);
  this->ExpectEachOnce(ids);
}

TYPED_TEST(ManualTrimTest, DryRunWritesNothingAndSaysWhatTheTrimDoes) {
  const auto ids = this->Append(30);
  ASSERT_TRUE(log::TrimNow(*this->session_, this->Trim(this->MaxLen(25))).ok());  // W = ids[4]
  const std::string token(this->redis_.Run({"GET", "{feed}:archive:token"}).view().Str());
  const auto live = this->RedisIds();
  const auto archived = this->Archived().size();
  struct Case {
    log::TrimPoint point;
    int64_t due;
    std::string watermark;
  };
  for (const auto& c : std::vector<Case>{{this->MaxLen(12), 13, ids[17]},
                                         {this->MaxLen(0), 25, ids[29]},
                                         {this->MinId(ids[20]), 15, ids[19]},
                                         {this->MinId("1-0"), 0, ids[4]}}) {
    SCOPED_TRACE(c.due);
    auto options = this->Trim(c.point);
    options.dry_run = true;
    auto dry = log::TrimNow(*this->session_, options);
    ASSERT_TRUE(dry.ok()) << dry.status().ToString();
    EXPECT_EQ(dry->folded, c.due);
    EXPECT_EQ(dry->trimmed, c.due);
    EXPECT_EQ(dry->left, 25 - c.due);
    EXPECT_EQ(dry->watermark, c.watermark);
    // Nothing changed: the stream, the archive, W, the token counter, the lease.
    EXPECT_EQ(this->RedisIds(), live);
    EXPECT_EQ(this->Archived().size(), archived);
    EXPECT_EQ(*this->store_->Watermark("feed"), ids[4]);
    EXPECT_EQ(this->RedisWatermark(), ids[4]);
    EXPECT_EQ(this->redis_.Run({"GET", "{feed}:archive:token"}).view().Str(), token);
    EXPECT_FALSE(this->Exists("{feed}:archive:lease"));
  }
  // The prediction is what the trim then does.
  auto options = this->Trim(this->MaxLen(12));
  options.dry_run = true;
  auto dry = log::TrimNow(*this->session_, options);
  auto done = log::TrimNow(*this->session_, this->Trim(this->MaxLen(12)));
  ASSERT_TRUE(dry.ok() && done.ok());
  EXPECT_EQ(dry->folded, done->folded);
  EXPECT_EQ(dry->trimmed, done->trimmed);
  EXPECT_EQ(dry->left, done->left);
  EXPECT_EQ(dry->watermark, done->watermark);
}

TYPED_TEST(ManualTrimTest, WaitsForAFolderThatHoldsTheLeaseAndFoldsOnlyAfterIt) {
  const auto ids = this->Append(20);
  // A beat's step in progress: another holder has the lease (for 800 ms, then it expires).
  auto beat_options = this->Options("replica-a");
  beat_options.lease_ttl = Millis(800);
  log::ArchiveFolder beat(beat_options, this->store_.get(), nullptr);
  auto beat_token = beat.TakeLease(*this->session_);
  ASSERT_TRUE(beat_token.ok() && *beat_token > 0);

  auto options = this->Trim(this->MaxLen(5));
  std::string waited_for;
  options.on_wait = [&](const std::string& holder, Millis ttl) {
    waited_for = holder;
    EXPECT_GT(ttl.count(), 0);
    EXPECT_EQ(this->RedisIds().size(), 20u);  // nothing folded or trimmed while waiting
  };
  auto report = log::TrimNow(*this->session_, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(waited_for, "replica-a");
  EXPECT_EQ(report->folded, 15);
  this->ExpectEachOnce(ids);
  // The trim's token is newer than the holder's: a late fold of the paused holder, with entries
  // due for it, is refused and trims nothing.
  const auto more = this->Append(20);
  const auto live = this->RedisIds();
  auto late = beat.FoldBatch(*this->session_, *beat_token);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kFatal);
  EXPECT_EQ(this->RedisIds(), live);
  auto all = ids;
  all.insert(all.end(), more.begin(), more.end());
  this->ExpectEachOnce(all);
}

TYPED_TEST(ManualTrimTest, GivesUpWhenTheLeaseStaysTakenAndChangesNothing) {
  this->Append(20);
  log::ArchiveFolder beat(this->Options("replica-a"), this->store_.get(), nullptr);
  ASSERT_TRUE(beat.TakeLease(*this->session_).ok());
  auto options = this->Trim(this->MaxLen(5));
  options.lease_wait = Millis(300);
  auto report = log::TrimNow(*this->session_, options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kTimeout);
  EXPECT_NE(report.status().message().find("held by \"replica-a\""), std::string::npos)
      << report.status().message();
  EXPECT_EQ(this->RedisIds().size(), 20u);
  EXPECT_TRUE(this->Archived().empty());
  // The holder's lease is untouched.
  EXPECT_EQ(this->redis_.Run({"GET", "{feed}:archive:lease"}).view().Str(), "replica-a");
}

// The retention beat gives its lease back after each step; trims run beside it while entries are
// added, and no entry is ever folded by both (a fold by both would insert it once and read it
// twice: the trim's `inserted` would fall short of its `folded`).
TYPED_TEST(ManualTrimTest, RacingTheRetentionBeatFoldsEachEntryOnce) {
  config::Config config;
  config::LogStream stream;
  stream.name = "feed";
  stream.retention.max_len = 8;  // between the trims' 3 and 12: both fold in turn
  stream.retention.interval = Millis(20);
  stream.archive = true;
  config.streams.push_back(stream);
  config.archive.interval = Millis(20);
  admin::Metrics metrics;
  metrics.ArchiveFolded("feed");  // the series exists at 0, as the sidecar seeds it
  admin::Watchdog watchdog;
  log::RetentionBeat beat(
      log::TrimRulesOf(config),
      std::make_unique<redis::Session>(this->redis_.ClientOptions(), "beat", &this->health_),
      &metrics, watchdog.Register("retention", Millis(60000)),
      log::ArchiveDeps{this->store_.get(), "replica-a", 5});
  beat.Start();
  std::vector<std::string> ids;
  int64_t trim_inserted = 0;
  for (int round = 0; round < 30; ++round) {
    const auto added = this->Append(20);
    ids.insert(ids.end(), added.begin(), added.end());
    // Give the beat a turn on every other round (its interval is 20 ms).
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    auto report = log::TrimNow(*this->session_, this->Trim(this->MaxLen(round % 2 == 0 ? 3 : 12)));
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->inserted, report->folded) << "round " << round;
    trim_inserted += report->inserted;
  }
  beat.StopAndJoin();
  this->ExpectEachOnce(ids);
  const double beat_inserted =
      MetricValue(metrics.Serialize(), "streamcar_archive_folded_total", {"stream=\"feed\""});
  EXPECT_EQ(static_cast<double>(trim_inserted) + beat_inserted,
            static_cast<double>(this->Archived().size()));
  EXPECT_GT(trim_inserted, 0);
  EXPECT_GT(beat_inserted, 0) << "the beat never folded: no race was run";
}

TYPED_TEST(ManualTrimTest, WithoutArchiveItIsOneExactXtrim) {
  // 250 entries: XTRIM MAXLEN ~ would keep whole nodes of 100; the trim keeps exactly 7.
  for (int i = 0; i < 250; ++i)
    this->redis_.Run({"XADD", "feed", std::to_string(i + 1) + "-0", "f", "v"});
  auto report = log::TrimNow(*this->session_, this->Trim(this->MaxLen(7), false));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->archived);
  EXPECT_EQ(report->trimmed, 243);
  EXPECT_EQ(report->left, 7);
  auto by_id = log::TrimNow(*this->session_, this->Trim(this->MinId("247-0"), false));
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_id->trimmed, 3);
  EXPECT_EQ(this->RedisIds(), (std::vector<std::string>{"247-0", "248-0", "249-0", "250-0"}));
  EXPECT_TRUE(this->Archived().empty());
  EXPECT_FALSE(this->Exists("{feed}:archive:token"));
  // Ids near the epoch are older than any age: --max-age trims them all, by Redis's clock.
  auto aged = log::TrimNow(
      *this->session_,
      this->Trim({.kind = log::TrimPoint::Kind::kMaxAge, .max_age = Millis(60000)}, false));
  ASSERT_TRUE(aged.ok());
  EXPECT_EQ(aged->trimmed, 4);
  EXPECT_EQ(aged->left, 0);
}

TYPED_TEST(ManualTrimTest, AKeyOfAnotherTypeIsRefusedBeforeAnythingIsWritten) {
  this->redis_.Run({"SET", "feed", "text"});
  for (bool archived : {true, false}) {
    auto report = log::TrimNow(*this->session_, this->Trim(this->MaxLen(1), archived));
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), StatusCode::kFatal);
    EXPECT_NE(report.status().message().find("WRONGTYPE"), std::string::npos);
  }
  EXPECT_FALSE(this->Exists("{feed}:archive:token"));
  // A missing key is an empty stream: nothing to do, and no error.
  this->redis_.Run({"DEL", "feed"});
  auto empty = log::TrimNow(*this->session_, this->Trim(this->MaxLen(1)));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->folded, 0);
  EXPECT_EQ(empty->left, 0);
  EXPECT_EQ(empty->watermark, "0-0");
}

}  // namespace
}  // namespace streamcar::testing
