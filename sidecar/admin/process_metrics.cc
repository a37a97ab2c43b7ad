#include "sidecar/admin/process_metrics.h"

#include <dirent.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace streamcar::admin {
namespace {

template <typename T>
std::optional<T> NumberOf(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The whitespace-separated words of `text`.
std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {metric}};
}

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return std::nullopt;
  return text.str();
}

// The entries of /proc/self/fd, without the one this count opens to list them.
std::optional<int64_t> CountOpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  const std::string own = std::to_string(::dirfd(dir));
  int64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == ".." || name == own) continue;
    ++count;
  }
  ::closedir(dir);
  return count;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view stat) {
  // "pid (comm) state ppid ...": the command may hold anything, so fields count from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  const std::vector<std::string_view> words = Words(stat.substr(close + 1));
  // words[0] is field 3 (state): field N is words[N - 3].
  if (words.size() < 22) return std::nullopt;
  const auto utime = NumberOf<uint64_t>(words[14 - 3]);
  const auto stime = NumberOf<uint64_t>(words[15 - 3]);
  const auto starttime = NumberOf<uint64_t>(words[22 - 3]);
  const auto vsize = NumberOf<uint64_t>(words[23 - 3]);
  const auto rss = NumberOf<int64_t>(words[24 - 3]);
  if (!utime || !stime || !starttime || !vsize || !rss) return std::nullopt;
  return ProcStat{*utime, *stime, *starttime, *vsize, *rss};
}

std::optional<int64_t> ParseBootTime(std::string_view proc_stat) {
  size_t at = 0;
  while (at < proc_stat.size()) {
    size_t end = proc_stat.find('\n', at);
    if (end == std::string_view::npos) end = proc_stat.size();
    const std::vector<std::string_view> words = Words(proc_stat.substr(at, end - at));
    if (words.size() == 2 && words[0] == "btime") return NumberOf<int64_t>(words[1]);
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseMaxOpenFiles(std::string_view limits) {
  // "Max open files            1024                 1048576              files"
  constexpr std::string_view kName = "Max open files";
  size_t at = 0;
  while (at < limits.size()) {
    size_t end = limits.find('\n', at);
    if (end == std::string_view::npos) end = limits.size();
    const std::string_view line = limits.substr(at, end - at);
    if (line.starts_with(kName)) {
      const std::vector<std::string_view> words = Words(line.substr(kName.size()));
      if (words.empty()) return std::nullopt;
      // "unlimited" cannot be a file descriptor limit (the kernel caps it at nr_open).
      return NumberOf<int64_t>(words[0]);
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessTexts& texts) {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  std::optional<ProcStat> stat;
  if (texts.self_stat) stat = ParseProcStat(*texts.self_stat);
  const auto ticks = static_cast<double>(texts.ticks_per_second);
  if (stat && ticks > 0) {
    families.push_back(Family(
        "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        MetricType::Counter, static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks));
  }
  if (stat) {
    families.push_back(
        Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
               static_cast<double>(stat->rss_pages) * static_cast<double>(texts.page_size)));
    families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, static_cast<double>(stat->vsize_bytes)));
  }
  if (texts.open_fds) {
    families.push_back(Family("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(*texts.open_fds)));
  }
  if (texts.limits) {
    if (auto max = ParseMaxOpenFiles(*texts.limits)) {
      families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                                MetricType::Gauge, static_cast<double>(*max)));
    }
  }
  std::optional<int64_t> boot;
  if (texts.proc_stat) boot = ParseBootTime(*texts.proc_stat);
  if (stat && boot && ticks > 0) {
    families.push_back(
        Family("process_start_time_seconds",
               "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
               static_cast<double>(*boot) + static_cast<double>(stat->starttime_ticks) / ticks));
  }
  return families;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  const std::optional<std::string> self_stat = ReadFile("/proc/self/stat");
  const std::optional<std::string> proc_stat = ReadFile("/proc/stat");
  const std::optional<std::string> limits = ReadFile("/proc/self/limits");
  ProcessTexts texts;
  if (self_stat) texts.self_stat = *self_stat;
  if (proc_stat) texts.proc_stat = *proc_stat;
  if (limits) texts.limits = *limits;
  texts.open_fds = CountOpenFds();
  texts.ticks_per_second = ::sysconf(_SC_CLK_TCK);
  texts.page_size = ::sysconf(_SC_PAGESIZE);
  return ProcessFamilies(texts);
}

}  // namespace streamcar::admin
