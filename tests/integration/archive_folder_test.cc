// The archive folder (sidecar/log/archive_folder.h) against a real redis-server and each archive
// backend: fold then trim, a stale folder fenced, a crash between any two steps (driven through
// the FoldPhase seam) finished by a new folder with nothing lost and nothing twice.

#include "sidecar/log/archive_folder.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <set>
#include <string>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/log/retention.h"
#include "tests/integration/archive_redis_fixture.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

using log::ArchiveFolder;
using log::FolderOptions;
using log::FoldPhase;

template <typename Backend>
using ArchiveFolderTest = ArchiveRedisTest<Backend>;

TYPED_TEST_SUITE(ArchiveFolderTest, Backends, BackendNames);

TYPED_TEST(ArchiveFolderTest, FoldsWhatRetentionTrimsThenTrimsOnlyThat) {
  const auto ids = this->Append(50);
  admin::Metrics metrics;
  ArchiveFolder folder(this->Options(), this->store_.get(), &metrics);
  auto step = folder.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_GT(step->token, 0);
  EXPECT_EQ(step->folded, 40);
  EXPECT_EQ(step->inserted, 40);
  EXPECT_EQ(step->trimmed, 40);
  EXPECT_FALSE(step->more);
  // The newest 10 stay in Redis; the 40 before them are in the archive, W is the 40th.
  EXPECT_EQ(this->RedisIds(), std::vector<std::string>(ids.begin() + 40, ids.end()));
  this->ExpectEachOnce(ids);
  EXPECT_EQ(*this->store_->Watermark("feed"), ids[39]);
  EXPECT_EQ(this->RedisWatermark(), ids[39]);
  const std::string text = metrics.Serialize();
  EXPECT_EQ(MetricValue(text, "streamcar_archive_folded_total", {"stream=\"feed\""}), 40);
  const double w_ms = std::stod(ids[39].substr(0, ids[39].find('-')));
  EXPECT_DOUBLE_EQ(MetricValue(text, "streamcar_archive_watermark_seconds", {"stream=\"feed\""}),
                   w_ms / 1000.0);

  // Nothing more is due: a second step changes nothing.
  auto idle = folder.Step(*this->session_);
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->folded, 0);
  this->ExpectEachOnce(ids);
}

// A long catch-up beats the caller's watchdog after every batch (a step of many batches must not
// look wedged to /healthz): 40 entries due in batches of 7 are 6 batches, each beaten.
TYPED_TEST(ArchiveFolderTest, EveryBatchOfAStepBeatsTheWatchdog) {
  const auto ids = this->Append(50);
  admin::Metrics metrics;
  FolderOptions options = this->Options();
  std::vector<size_t> archived_at_beat;
  options.on_batch = [&] { archived_at_beat.push_back(this->Archived().size()); };
  ArchiveFolder folder(options, this->store_.get(), &metrics);
  auto step = folder.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->folded, 40);
  // One beat per batch, as the batch lands: the archive grows by up to 7 between beats.
  ASSERT_GE(archived_at_beat.size(), 6u);
  EXPECT_EQ(archived_at_beat.front(), 7u);
  EXPECT_EQ(archived_at_beat[5], 40u);
}

TYPED_TEST(ArchiveFolderTest, MaxAgeFoldsOnlyWhatIsOlder) {
  const int64_t now_ms = SystemClock::Instance().WallMillis();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(std::to_string(now_ms - 3600 * 1000 + i) + "-0");
    this->redis_.Run({"XADD", "feed", ids.back(), "n", std::string("v\0\xff", 3), "n", "again"});
  }
  const auto recent = this->Append(5);
  ids.insert(ids.end(), recent.begin(), recent.end());
  auto options = this->Options();
  options.max_len = 0;
  options.max_age = Millis(10 * 60 * 1000);
  ArchiveFolder folder(options, this->store_.get(), nullptr);
  auto step = folder.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->folded, 5);
  EXPECT_EQ(this->RedisIds(), recent);
  this->ExpectEachOnce(ids);
}

// Every replica shows W, not only the one that folded it: a folder that does not hold the lease
// (or restarted after the last fold) reads the gauge from the archive on its step.
TYPED_TEST(ArchiveFolderTest, WatermarkGaugeComesFromTheArchiveOnEveryReplica) {
  const auto ids = this->Append(50);
  ArchiveFolder holder(this->Options("replica-a"), this->store_.get(), nullptr);
  ASSERT_TRUE(holder.Step(*this->session_).ok());
  admin::Metrics metrics;
  ArchiveFolder other(this->Options("replica-b"), this->store_.get(), &metrics);
  auto step = other.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->token, 0);  // replica-a holds the lease: nothing folded here
  const double w_ms = std::stod(ids[39].substr(0, ids[39].find('-')));
  EXPECT_DOUBLE_EQ(
      MetricValue(metrics.Serialize(), "streamcar_archive_watermark_seconds", {"stream=\"feed\""}),
      w_ms / 1000.0);
}

TYPED_TEST(ArchiveFolderTest, StaleFolderCannotWriteAfterAnotherTookOver) {
  const auto first = this->Append(20);
  auto options_a = this->Options("replica-a");
  options_a.lease_ttl = Millis(300);
  ArchiveFolder stale(options_a, this->store_.get(), nullptr);
  auto token_a = stale.TakeLease(*this->session_);
  ASSERT_TRUE(token_a.ok());
  ASSERT_GT(*token_a, 0);
  // A live holder keeps the other replica out.
  ArchiveFolder fresh(this->Options("replica-b"), this->store_.get(), nullptr);
  auto blocked = fresh.Step(*this->session_);
  ASSERT_TRUE(blocked.ok());
  EXPECT_EQ(blocked->token, 0);
  EXPECT_EQ(this->RedisIds().size(), 20u);

  // Replica A pauses past its lease; B takes over with a higher token and folds.
  ASSERT_TRUE(Eventually(
      [&] {
        return this->redis_.Run({"EXISTS", "{feed}:archive:lease"}).view().Integer() == 0;
      },
      std::chrono::seconds(10)));
  auto took_over = fresh.Step(*this->session_);
  ASSERT_TRUE(took_over.ok()) << took_over.status().ToString();
  EXPECT_GT(took_over->token, *token_a);
  EXPECT_EQ(took_over->folded, 10);

  // A wakes up and goes on with its old token: refused, nothing written, nothing trimmed.
  const auto more = this->Append(15);
  const auto before = this->RedisIds();
  auto late = stale.FoldBatch(*this->session_, *token_a);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kFatal);
  EXPECT_EQ(this->RedisIds(), before);
  EXPECT_EQ(this->Archived().size(), 10u);
  std::vector<std::string> all = first;
  all.insert(all.end(), more.begin(), more.end());
  this->ExpectEachOnce(all);
}

TYPED_TEST(ArchiveFolderTest, CrashAfterTheFoldIsFinishedByTheNextFolder) {
  const auto ids = this->Append(30);
  {
    ArchiveFolder crashed(this->Options(), this->store_.get(), nullptr);
    auto token = crashed.TakeLease(*this->session_);
    ASSERT_TRUE(token.ok());
    auto batch = crashed.FoldBatch(*this->session_, *token, FoldPhase::kFolded);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    EXPECT_EQ(batch->read, 7);
  }
  // Folded, not recorded, not trimmed: the 7 are in both places; a read through W sees them once.
  EXPECT_EQ(this->Archived().size(), 7u);
  EXPECT_EQ(this->RedisIds().size(), 30u);
  EXPECT_EQ(this->RedisWatermark(), "");
  // The restarted sidecar (same holder name) takes over at once and finishes the job.
  ArchiveFolder next(this->Options(), this->store_.get(), nullptr);
  auto step = next.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->folded, 20);
  EXPECT_EQ(step->inserted, 13);  // the 7 folded before the crash are not stored twice
  EXPECT_EQ(this->RedisIds(), std::vector<std::string>(ids.begin() + 20, ids.end()));
  EXPECT_EQ(this->RedisWatermark(), ids[19]);
  this->ExpectEachOnce(ids);
}

TYPED_TEST(ArchiveFolderTest, CrashAfterRecordingWIsFinishedByTheNextFolder) {
  const auto ids = this->Append(30);
  {
    ArchiveFolder crashed(this->Options(), this->store_.get(), nullptr);
    auto token = crashed.TakeLease(*this->session_);
    ASSERT_TRUE(token.ok());
    auto batch = crashed.FoldBatch(*this->session_, *token, FoldPhase::kRecorded);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  }
  EXPECT_EQ(this->RedisWatermark(), ids[6]);
  EXPECT_EQ(this->RedisIds().size(), 30u);
  ArchiveFolder next(this->Options(), this->store_.get(), nullptr);
  auto step = next.Step(*this->session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->trimmed, 20);
  EXPECT_EQ(this->RedisWatermark(), ids[19]);
  this->ExpectEachOnce(ids);
}

TYPED_TEST(ArchiveFolderTest, RecordedWatermarkIsNeverLowered) {
  const auto ids = this->Append(15);
  // A folder that committed a higher W earlier wrote it to Redis already.
  const std::string higher = "99999999999999-0";
  this->redis_.Run({"SET", "{feed}:archive:watermark", higher});
  ArchiveFolder folder(this->Options(), this->store_.get(), nullptr);
  ASSERT_TRUE(folder.Step(*this->session_).ok());
  EXPECT_EQ(this->RedisWatermark(), higher);
  // ... and a longer id with a smaller value does not win by its length as text.
  this->redis_.Run({"SET", "{feed}:archive:watermark", "9-0"});
  this->Append(5);
  ASSERT_TRUE(folder.Step(*this->session_).ok());
  EXPECT_EQ(this->RedisWatermark(), *this->store_->Watermark("feed"));
}

TYPED_TEST(ArchiveFolderTest, RetentionBeatFoldsBeforeItTrims) {
  // The beat as the engine builds it: a `streams:` entry with archive: true and no subscription.
  config::Config config;
  config::LogStream stream;
  stream.name = "feed";
  stream.retention.max_len = 10;
  stream.retention.interval = Millis(50);
  stream.archive = true;
  config.streams.push_back(stream);
  config.archive.interval = Millis(50);
  config.archive.batch = 3;
  const auto rules = log::TrimRulesOf(config);
  ASSERT_EQ(rules.size(), 1u);
  ASSERT_TRUE(rules[0].archive);

  const auto ids = this->Append(40);
  admin::Metrics metrics;
  admin::Watchdog watchdog;
  log::RetentionBeat beat(
      rules, std::make_unique<redis::Session>(this->redis_.ClientOptions(), "beat", &this->health_),
      &metrics, watchdog.Register("retention", Millis(60000)),
      log::ArchiveDeps{this->store_.get(), "c1", config.archive.batch});
  beat.Start();
  ASSERT_TRUE(Eventually([&] { return this->RedisIds().size() == 10; }, std::chrono::seconds(20)));
  beat.StopAndJoin();
  this->ExpectEachOnce(ids);
  EXPECT_EQ(MetricValue(metrics.Serialize(), "streamcar_archive_folded_total", {"stream=\"feed\""}),
            30);
}

TYPED_TEST(ArchiveFolderTest, ArchivedStreamIsNotTrimmedWithoutItsArchive) {
  config::Config config;
  config::LogStream stream;
  stream.name = "feed";
  stream.retention.max_len = 5;
  stream.retention.interval = Millis(20);
  stream.archive = true;
  config.streams.push_back(stream);
  this->Append(20);
  // A witness rule after it: once the witness is trimmed, the beat has been through the archived
  // rule (rules run in order in each round). MAXLEN ~ trims whole nodes of 100 entries.
  auto rules = log::TrimRulesOf(config);
  rules.push_back({"witness", 1, Millis(0), Millis(20)});
  for (int i = 0; i < 250; ++i) this->redis_.Run({"XADD", "witness", "*", "f", "v"});
  admin::Metrics metrics;
  admin::Watchdog watchdog;
  log::RetentionBeat beat(
      rules, std::make_unique<redis::Session>(this->redis_.ClientOptions(), "beat", &this->health_),
      &metrics, watchdog.Register("retention", Millis(60000)),
      log::ArchiveDeps{nullptr, "c1", 100});
  beat.Start();
  ASSERT_TRUE(Eventually(
      [&] {
        return this->redis_.Run({"XLEN", "witness"}).view().Integer() < 250;
      },
      std::chrono::seconds(10)));
  beat.StopAndJoin();
  EXPECT_EQ(this->RedisIds().size(), 20u);
}

}  // namespace
}  // namespace streamcar::testing
