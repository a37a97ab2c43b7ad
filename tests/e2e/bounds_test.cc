// Resource bounds and the smaller at-least-once edges of issue 11, against the real binary, a real
// redis-server and a real HTTP handler: memory bounded in bytes (SPEC 4.2), `dlq replay` that
// never loses a dead letter and replays an id once (3.3), Retry-After on batch failures (3.2,
// 3.4), `check` that does not print header secrets (2).

#include <dirent.h>
#include <rapidjson/document.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class BoundsTest : public E2eTest {
 protected:
  std::string WriteConfig(const SidecarConfig& c) {
    std::string path = MakeTempDir("streamcar-bounds-") + "/streamcar.yaml";
    std::ofstream(path) << Yaml(c);
    return path;
  }

  void AddDeadLetter(const std::string& original_id, const std::string& payload) {
    Add({"n", payload, "streamcar.stream", "orders", "streamcar.id", original_id, "streamcar.group",
         "billing", "streamcar.attempts", "1", "streamcar.reason", "rejected", "streamcar.status",
         "422", "streamcar.error", "x", "streamcar.time", "1"},
        "orders:dlq");
  }
};

// The pid of the `streamcar run` whose command line names `config_path` (the support library's
// SidecarProcess does not expose its pid).
pid_t PidOf(const std::string& config_path) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    const std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(std::string("run") + '\0') != std::string::npos &&
        cmdline.find(config_path) != std::string::npos) {
      found = static_cast<pid_t>(std::stol(name));
      break;
    }
  }
  closedir(proc);
  return found;
}

// A field of /proc/<pid>/status in KiB ("VmHWM": the peak resident set size); -1 if unreadable.
int64_t StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream values(line.substr(field.size() + 1));
      int64_t kib = -1;
      values >> kib;
      return kib;
    }
  }
  return -1;
}

// Issue 13: one subscription runs on one event loop; the process has the main thread (signals,
// the stop order), the admin server's thread and that loop, whatever handler.concurrency is. A
// Redis connection being opened borrows a short-lived thread, so the count is read once the
// sidecar is ready and has delivered.
// ThreadSanitizer's runtime runs one background thread of its own in every process it instruments.
#if defined(__SANITIZE_THREAD__)
constexpr int64_t kSanitizerThreads = 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int64_t kSanitizerThreads = 1;
#else
constexpr int64_t kSanitizerThreads = 0;
#endif
#else
constexpr int64_t kSanitizerThreads = 0;
#endif

TEST_F(BoundsTest, ThreadsForOneDefaultSubscriptionAreAtMostThree) {
  for (const std::string concurrency : {"1", "64"}) {
    SidecarConfig c;
    c.group = "g" + concurrency;
    c.handler_extra = "concurrency: " + concurrency;
    auto sidecar = StartSidecar(c);
    ASSERT_TRUE(WaitReady());
    const std::string id = Add({"n", concurrency});
    ASSERT_TRUE(Eventually([&] { return !RequestsFor(id).empty(); }, seconds(15)));
    ASSERT_TRUE(Eventually([&] { return PendingCount("orders", c.group) == 0; }, seconds(15)));
    int64_t threads = -1;
    // The connector's thread ends right after the connection it opened is handed over.
    EXPECT_TRUE(Eventually(
        [&] {
          threads = StatusKiB(sidecar->pid(), "Threads");
          return threads >= 1 && threads <= 3 + kSanitizerThreads;
        },
        seconds(5)))
        << "concurrency " << concurrency << ": " << threads << " threads";
    sidecar->Terminate();
    EXPECT_EQ(sidecar->Wait(seconds(15)), 0);
  }
}

// The review's measurement (M5): 110 entries of 1 MiB, default settings, a handler that takes
// 1 s. Counting room in entries only, the sidecar peaked at 159-185 MiB; the byte budget
// (handler.max_held_bytes, 32 MiB by default) keeps it under the 128 MiB the chart allowed then.
TEST_F(BoundsTest, OneMebibyteEntriesStayWithinTheMemoryBudget) {
  if (UnderSanitizer()) GTEST_SKIP() << "a sanitizer's shadow memory makes RSS meaningless";
  handler_.SetBehaviour([](const ReceivedRequest&) {
    return HandlerReply{204, "", {}, milliseconds(1000)};  // the handler's own work
  });
  constexpr int kEntries = 110;
  const std::string payload(1 << 20, 'p');
  for (int i = 0; i < kEntries; ++i) Add({"data", payload});
  SidecarConfig c;  // every handler default: concurrency 16, batch_size 1, max_held_bytes 32MiB
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const pid_t pid = PidOf(sidecar->config_path());
  ASSERT_GT(pid, 0);
  int64_t peak_kib = 0;
  // Sample while it works too, in case the process is gone before the final read.
  ASSERT_TRUE(Eventually(
      [&] {
        peak_kib = std::max(peak_kib, StatusKiB(pid, "VmHWM"));
        return Metric("streamcar_acked_total") >= kEntries;
      },
      seconds(120)))
      << sidecar->Logs();
  peak_kib = std::max(peak_kib, StatusKiB(pid, "VmHWM"));
  EXPECT_EQ(PendingCount(), 0);
  EXPECT_EQ(handler_.Count(), static_cast<size_t>(kEntries));  // every entry, once
  RecordProperty("peak_rss_kib", std::to_string(peak_kib));
  std::cout << "peak RSS of the sidecar: " << peak_kib / 1024 << " MiB\n";
  EXPECT_GT(peak_kib, 0);
  EXPECT_LT(peak_kib, 128 * 1024) << "peak RSS " << peak_kib / 1024 << " MiB";
}

// An entry larger than the whole budget is still delivered (alone), not stuck.
TEST_F(BoundsTest, AnEntryLargerThanTheBudgetIsStillDelivered) {
  SidecarConfig c;
  c.handler_extra = "max_held_bytes: 64KiB";
  const std::string big(256 * 1024, 'b');
  std::vector<std::string> ids;
  ids.push_back(Add({"data", "small-1"}));
  ids.push_back(Add({"data", big}));
  ids.push_back(Add({"data", "small-2"}));
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return Metric("streamcar_acked_total") >= 3; }, seconds(20)))
      << sidecar->Logs();
  for (const auto& id : ids) EXPECT_EQ(RequestsFor(id).size(), 1u) << id;
  EXPECT_NE(RequestsFor(ids[1]).at(0).body.find(big), std::string::npos);
}

// MULTI/EXEC does not roll back: an XADD failing at EXEC time (the source key is a string) used
// to leave the XDEL applied, and the dead letter was gone with nothing replayed.
TEST_F(BoundsTest, ReplayOntoAWrongTypeKeyKeepsTheDeadLetterAndExitsOne) {
  AddDeadLetter("1-1", "precious");
  redis_->Run({"SET", "orders", "not a stream"});
  const std::string path = WriteConfig({});
  auto replay = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing"});
  EXPECT_EQ(replay.exit_code, 1) << replay.out << replay.err;
  EXPECT_NE(replay.err.find("WRONGTYPE"), std::string::npos) << replay.err;
  EXPECT_NE(replay.err.find("kept"), std::string::npos) << replay.err;
  EXPECT_EQ(Len("orders:dlq"), 1);  // nothing lost
  EXPECT_EQ(std::string(redis_->Run({"GET", "orders"}).view().Str()), "not a stream");
  // Once the key is fixed, the same dead letter replays normally.
  redis_->Run({"DEL", "orders"});
  auto again = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Len("orders:dlq"), 0);
  auto entries = redis_->Run({"XRANGE", "orders", "-", "+"});
  ASSERT_EQ(entries.view().Size(), 1u);
  EXPECT_EQ(std::string(entries.view()[0][1][1].Str()), "precious");
}

TEST_F(BoundsTest, AnIdGivenTwiceIsReplayedOnce) {
  AddDeadLetter("1-1", "a");
  AddDeadLetter("1-2", "b");
  auto letters = redis_->Run({"XRANGE", "orders:dlq", "-", "+"});
  const std::string first(letters.view()[0][0].Str());
  const std::string path = WriteConfig({});
  auto replay = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing",
                              "--id", first, "--id", first});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(Len("orders"), 1);
  EXPECT_EQ(Len("orders:dlq"), 1);  // the other dead letter is untouched
  EXPECT_NE(replay.out.find("1 dead letters replayed"), std::string::npos) << replay.out;
}

// SPEC 3.2: a Retry-After header replaces the backoff; 3.4 applies it to the entries a batch
// answer lists as RETRY.
TEST_F(BoundsTest, BatchRetryFailuresHonourRetryAfter) {
  std::atomic<int> calls{0};
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    if (++calls > 1) return HandlerReply{200};
    rapidjson::Document d;
    d.Parse(request.body.c_str());
    const std::string id = d["entries"][0]["id"].GetString();
    return HandlerReply{
        200, R"({"failures":[{"id":")" + id + R"(","status":"RETRY"}]})", {{"Retry-After", "1"}}};
  });
  SidecarConfig c;  // initial_backoff 50ms, max_backoff 1s, jitter 0
  c.handler_extra = "batch_size: 10, concurrency: 1";
  const std::string id = Add({"n", "1"});
  Add({"n", "2"});
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(handler_.WaitForCount(2, seconds(10))) << sidecar->Logs();
  auto requests = handler_.Requests();
  rapidjson::Document second;
  second.Parse(requests[1].body.c_str());
  ASSERT_EQ(second["entries"].Size(), 1u);
  EXPECT_EQ(std::string(second["entries"][0]["id"].GetString()), id);
  // Retry-After: 1 second, not the 50 ms backoff.
  EXPECT_GE(requests[1].at - requests[0].at, milliseconds(900));
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
}

// Review F9 (issue 29): Retry-After: 0, or a date in the past, gave a zero delay, so a handler
// answering 503 to every delivery with max_attempts: 0 met a tight loop through Redis (hundreds of
// deliveries a second). Every retry now waits at least initial_backoff.
TEST_F(BoundsTest, RetryAfterZeroOrPastStillWaitsTheInitialBackoff) {
  std::atomic<int> calls{0};
  handler_.SetBehaviour([&](const ReceivedRequest&) {
    const bool date = ++calls % 2 == 0;
    return HandlerReply{
        503, "busy", {{"Retry-After", date ? "Thu, 01 Jan 1970 00:00:00 GMT" : "0"}}};
  });
  SidecarConfig c;
  c.max_attempts = 0;  // retry forever
  c.initial_backoff = "200ms";
  c.max_backoff = "1s";
  c.handler_extra = "concurrency: 1";
  Add({"n", "1"});
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(2000));
  const auto requests = handler_.Requests();
  ASSERT_GE(requests.size(), 3u) << "the entry is still retried";
  // About 2 s / 200 ms of them; a zero delay gave hundreds.
  EXPECT_LE(requests.size(), 13u);
  for (size_t i = 1; i < requests.size(); ++i) {
    EXPECT_GE(requests[i].at - requests[i - 1].at, milliseconds(190)) << "retry " << i;
  }
  EXPECT_EQ(Len("orders:dlq"), 0);
}

TEST_F(BoundsTest, CheckMasksSecretHeaders) {
  SidecarConfig c;
  c.handler_extra =
      "headers: { Authorization: \"Bearer s3cr3t-token\", X-Api-Key: k3y-value, X-Tenant: acme }";
  const std::string path = WriteConfig(c);
  auto check = RunStreamcar({"check", "-c", path});
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(check.out.find("s3cr3t-token"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("k3y-value"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("Authorization: \"***\""), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("X-Tenant: acme"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("max_held_bytes: 32MiB"), std::string::npos) << check.out;
}

}  // namespace
}  // namespace streamcar::testing
