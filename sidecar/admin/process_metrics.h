#pragma once
// The standard Prometheus process series, named and typed as the official client libraries
// export them (client_golang's process collector): process_cpu_seconds_total (counter),
// process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds and process_start_time_seconds (gauges). Computed at each scrape from
// /proc/self; the parsing is pure (tested on fixed text), the reads are at the edge (Collect).
// A figure that cannot be read (no /proc) is left out of that scrape rather than shown as 0.

#include <prometheus/collectable.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace streamcar::admin {

// The fields of /proc/<pid>/stat the series need (proc(5): after the command's closing
// parenthesis, which may itself contain spaces and parentheses).
struct ProcStat {
  uint64_t utime_ticks = 0;      // field 14
  uint64_t stime_ticks = 0;      // field 15
  uint64_t starttime_ticks = 0;  // field 22: clock ticks after boot
  uint64_t vsize_bytes = 0;      // field 23
  int64_t rss_pages = 0;         // field 24
};
std::optional<ProcStat> ParseProcStat(std::string_view stat);
// The "btime" line of /proc/stat: boot time, seconds since the epoch.
std::optional<int64_t> ParseBootTime(std::string_view proc_stat);
// The soft limit of "Max open files" in /proc/<pid>/limits (RLIMIT_NOFILE).
std::optional<int64_t> ParseMaxOpenFiles(std::string_view limits);

// The raw texts and counts one scrape reads, and what the host says about its units.
struct ProcessTexts {
  std::optional<std::string_view> self_stat;  // /proc/self/stat
  std::optional<std::string_view> proc_stat;  // /proc/stat
  std::optional<std::string_view> limits;     // /proc/self/limits
  std::optional<int64_t> open_fds;            // entries of /proc/self/fd
  int64_t ticks_per_second = 100;             // sysconf(_SC_CLK_TCK)
  int64_t page_size = 4096;                   // sysconf(_SC_PAGESIZE)
};
// The families of one scrape, in the order above; each one whose inputs are missing is omitted.
std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessTexts& texts);

// Reads /proc/self at each Collect().
class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace streamcar::admin
