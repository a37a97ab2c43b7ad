// The standard process series (admin/process_metrics.h) from fixed /proc text: names, types and
// values as the Prometheus client libraries give them, and what happens to text that is not.

#include "sidecar/admin/process_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <map>
#include <string>

namespace streamcar::admin {
namespace {

// /proc/<pid>/stat of a process whose command holds spaces and parentheses: utime 250,
// stime 50, starttime 123456 ticks, vsize 3133440 bytes, rss 392 pages.
const std::string kSelfStat =
    "1005 (stream car) (x) S 1001 1001 5736 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 123456 "
    "3133440 392 18446744073709551615 93943389450240 93943389470121 140732025452624 0 0 0 0 0 0 "
    "0 0 0 17 1 0 0 0 0 0\n";
const std::string kProcStat =
    "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 10 0 10 100 0 0 0 0 0 0\nintr 1 2 3\nctxt 99\n"
    "btime 1796183451\nprocesses 1005\n";
const std::string kLimits =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 1048576              files     \n"
    "Max locked memory         8388608              8388608              bytes     \n";

struct Sample {
  prometheus::MetricType type;
  double value;
};
std::map<std::string, Sample> ByName(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, Sample> out;
  for (const auto& family : families) {
    EXPECT_EQ(family.metric.size(), 1u) << family.name;
    EXPECT_TRUE(family.metric.front().label.empty()) << family.name;
    const auto& metric = family.metric.front();
    const double value =
        family.type == prometheus::MetricType::Counter ? metric.counter.value : metric.gauge.value;
    EXPECT_FALSE(family.help.empty()) << family.name;
    out[family.name] = {family.type, value};
  }
  return out;
}

TEST(ProcessMetrics, ParsesStatAfterTheCommandsLastParenthesis) {
  auto stat = ParseProcStat(kSelfStat);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->utime_ticks, 250u);
  EXPECT_EQ(stat->stime_ticks, 50u);
  EXPECT_EQ(stat->starttime_ticks, 123456u);
  EXPECT_EQ(stat->vsize_bytes, 3133440u);
  EXPECT_EQ(stat->rss_pages, 392);
  EXPECT_EQ(ParseBootTime(kProcStat), 1796183451);
  EXPECT_EQ(ParseMaxOpenFiles(kLimits), 1024);
}

TEST(ProcessMetrics, EverySeriesNamedAndTypedAsTheClientLibrariesDo) {
  const auto series = ByName(ProcessFamilies({.self_stat = kSelfStat,
                                              .proc_stat = kProcStat,
                                              .limits = kLimits,
                                              .open_fds = 17,
                                              .ticks_per_second = 100,
                                              .page_size = 4096}));
  using prometheus::MetricType;
  ASSERT_EQ(series.size(), 6u);
  EXPECT_EQ(series.at("process_cpu_seconds_total").type, MetricType::Counter);
  EXPECT_DOUBLE_EQ(series.at("process_cpu_seconds_total").value, 3.0);  // (250 + 50) / 100
  EXPECT_EQ(series.at("process_resident_memory_bytes").type, MetricType::Gauge);
  EXPECT_DOUBLE_EQ(series.at("process_resident_memory_bytes").value, 392.0 * 4096);
  EXPECT_EQ(series.at("process_virtual_memory_bytes").type, MetricType::Gauge);
  EXPECT_DOUBLE_EQ(series.at("process_virtual_memory_bytes").value, 3133440);
  EXPECT_EQ(series.at("process_open_fds").type, MetricType::Gauge);
  EXPECT_DOUBLE_EQ(series.at("process_open_fds").value, 17);
  EXPECT_EQ(series.at("process_max_fds").type, MetricType::Gauge);
  EXPECT_DOUBLE_EQ(series.at("process_max_fds").value, 1024);
  EXPECT_EQ(series.at("process_start_time_seconds").type, MetricType::Gauge);
  EXPECT_DOUBLE_EQ(series.at("process_start_time_seconds").value, 1796183451 + 1234.56);
}

TEST(ProcessMetrics, WhatCannotBeReadIsLeftOutNotShownAsZero) {
  EXPECT_TRUE(ProcessFamilies({}).empty());
  // Only the fd count was had.
  auto only_fds = ByName(ProcessFamilies({.open_fds = 3}));
  EXPECT_EQ(only_fds.size(), 1u);
  EXPECT_TRUE(only_fds.contains("process_open_fds"));
  // No /proc/stat: no start time, the rest as usual.
  auto no_boot = ByName(ProcessFamilies({.self_stat = kSelfStat, .limits = kLimits}));
  EXPECT_FALSE(no_boot.contains("process_start_time_seconds"));
  EXPECT_TRUE(no_boot.contains("process_cpu_seconds_total"));
  EXPECT_TRUE(no_boot.contains("process_max_fds"));
}

TEST(ProcessMetrics, MalformedTextIsRefused) {
  EXPECT_FALSE(ParseProcStat("").has_value());
  EXPECT_FALSE(ParseProcStat("1005 cat R 1 2").has_value());          // no parenthesis
  EXPECT_FALSE(ParseProcStat("1005 (cat) R 1001 1001").has_value());  // too few fields
  std::string bad = kSelfStat;
  bad.replace(bad.find(" 250 "), 5, " 2x0 ");
  EXPECT_FALSE(ParseProcStat(bad).has_value());
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\nbtime\n").has_value());
  EXPECT_FALSE(ParseBootTime("btime 12z\n").has_value());
  EXPECT_FALSE(ParseMaxOpenFiles("Max processes 10 10 processes\n").has_value());
  EXPECT_FALSE(ParseMaxOpenFiles("Max open files            unlimited  unlimited files\n"));
  // Garbage in: no series at all from it, and no crash.
  EXPECT_TRUE(ProcessFamilies({.self_stat = "x)", .proc_stat = "y", .limits = "z"}).empty());
}

// The real /proc of this test process (the edge): every series is there and plausible.
TEST(ProcessMetrics, TheCollectorReadsThisProcess) {
  const auto series = ByName(ProcessCollector().Collect());
  ASSERT_EQ(series.size(), 6u);
  EXPECT_GT(series.at("process_resident_memory_bytes").value, 0);
  EXPECT_GT(series.at("process_open_fds").value, 2);  // stdin, stdout, stderr at least
  EXPECT_GE(series.at("process_max_fds").value, series.at("process_open_fds").value);
  EXPECT_GT(series.at("process_start_time_seconds").value, 1.7e9);
}

}  // namespace
}  // namespace streamcar::admin
