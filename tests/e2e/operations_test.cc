// Day-two operations (SPEC 4.4, 1, 3.3): retention without consumers, `status`, and the
// dead-letter tools, against a real redis-server and the binary.

#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_monitor.h"

namespace streamcar::testing {
namespace {

class OperationsTest : public E2eTest {
 protected:
  void AddMany(int n, const std::string& stream = "orders") {
    std::vector<redis::Command> commands;
    for (int i = 0; i < n; ++i)
      commands.push_back(redis::Command("XADD").Arg(stream).Arg("*").Arg("n").Arg(int64_t{i}));
    auto c = redis_->Connect();
    ASSERT_TRUE(c->RunPipeline(commands).ok());
  }
};

TEST_F(OperationsTest, RetentionMaxLenTrimsAStreamNobodyDrains) {
  handler_.Stop();  // the handler is down: nothing is consumed
  AddMany(2000);
  SidecarConfig c;
  c.start = "new";
  c.subscription_extra = "    retention: { max_len: 100, interval: 200ms }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return Len("orders") < 300; }, seconds(10))) << sidecar->Logs();
  EXPECT_GE(Len("orders"), 100);  // approximate trimming keeps at least max_len
  ASSERT_TRUE(WaitMetric("streamcar_trimmed_total", {"stream=\"orders\""}, 1700));
}

TEST_F(OperationsTest, RetentionMaxAgeDropsOldEntries) {
  handler_.Stop();
  const int64_t old_ms = 1'000'000'000'000;  // 2001
  std::vector<redis::Command> commands;
  for (int i = 0; i < 300; ++i) {
    commands.push_back(redis::Command("XADD")
                           .Arg("orders")
                           .Arg(std::to_string(old_ms) + "-" + std::to_string(i))
                           .Arg("old")
                           .Arg("1"));
  }
  ASSERT_TRUE(redis_->Connect()->RunPipeline(commands).ok());
  for (int i = 0; i < 5; ++i) Add({"new", "1"});
  SidecarConfig c;
  c.start = "new";
  c.subscription_extra = "    retention: { max_age: 1h, interval: 200ms }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return Len("orders") < 200; }, seconds(10))) << sidecar->Logs();
  auto last = redis_->Run({"XREVRANGE", "orders", "+", "-", "COUNT", "5"});
  EXPECT_EQ(last.view().Size(), 5u);  // the new entries stay
  EXPECT_EQ(last.view()[0][1][0].Str(), "new");
}

TEST_F(OperationsTest, DeadLetterMaxLenTrimsTheDlq) {
  AddMany(1000, "orders:dlq");
  SidecarConfig c;
  c.subscription_extra = "    dead_letter: { max_len: 50 }\n    retention: { interval: 200ms }\n";
  auto sidecar = StartSidecar(c);
  // The start is bounded by the suite's readiness wait; the trim has its own bound after it. One
  // 10 s bound for both failed on a machine at load 5, where the start alone can take most of it.
  // The beat runs from the start on, and a first connection that fails waits 5 s before the next
  // try: 10 s after readiness covers that.
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return Len("orders:dlq") < 200; }, seconds(10)))
      << Len("orders:dlq") << " dead letters\n"
      << sidecar->Logs();
  EXPECT_GE(Len("orders:dlq"), 50);
}

// SPEC 4.4: every retention XTRIM (MAXLEN and MINID, of the stream and of its dead letters) carries
// a LIMIT that bounds the work of one call, so a large backlog never makes one long command.
TEST_F(OperationsTest, EveryRetentionTrimCarriesALimit) {
  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  handler_.Stop();  // nothing is consumed: only retention shortens the streams
  AddMany(2000);
  AddMany(1000, "orders:dlq");
  SidecarConfig c;
  c.start = "new";
  c.subscription_extra =
      "    dead_letter: { max_len: 50 }\n"
      "    retention: { max_len: 100, max_age: 1h, interval: 200ms }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(
      Eventually([&] { return Len("orders") < 300 && Len("orders:dlq") < 200; }, seconds(15)))
      << sidecar->Logs();
  // Each kind of trim seen at least once: the stream's MAXLEN and MINID, the dead letters' MAXLEN.
  auto trims_of = [&](const std::string& key, const std::string& strategy) {
    std::vector<std::vector<std::string>> out;
    for (auto& command : monitor.Commands()) {
      if (command.size() > 2 && command[0] == "XTRIM" && command[1] == key &&
          command[2] == strategy) {
        out.push_back(command);
      }
    }
    return out;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        return !trims_of("orders", "MAXLEN").empty() && !trims_of("orders", "MINID").empty() &&
               !trims_of("orders:dlq", "MAXLEN").empty();
      },
      seconds(10)))
      << sidecar->Logs();
  size_t checked = 0;
  for (const auto& command : monitor.Commands()) {
    if (command.empty() || command[0] != "XTRIM") continue;
    std::string line;
    for (const auto& word : command) line += word + " ";
    ++checked;
    auto limit = std::find(command.begin(), command.end(), "LIMIT");
    if (limit == command.end() || limit + 1 == command.end()) {
      ADD_FAILURE() << "an unbounded trim: " << line;
      continue;
    }
    EXPECT_GT(std::stoll(*(limit + 1)), 0) << line;
  }
  EXPECT_GE(checked, 3u);
}

TEST_F(OperationsTest, StatusJsonEqualsWhatRedisReports) {
  redis_->Run({"XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM"});
  for (int i = 0; i < 10; ++i) Add({"n", std::to_string(i)});
  redis_->Run(
      {"XREADGROUP", "GROUP", "billing", "worker-a", "COUNT", "3", "STREAMS", "orders", ">"});
  redis_->Run(
      {"XREADGROUP", "GROUP", "billing", "worker-b", "COUNT", "2", "STREAMS", "orders", ">"});
  AddMany(4, "orders:dlq");
  auto result = RunStreamcar({"status", "--json", "-c", WriteConfig(SidecarConfig{})});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  rapidjson::Document d;
  d.Parse(result.out.c_str());
  ASSERT_FALSE(d.HasParseError()) << result.out;
  const auto& s = d["subscriptions"][0];
  auto info = redis_->Run({"XINFO", "STREAM", "orders"});
  auto field = [](const redis::ReplyView& map, std::string_view key) {
    for (size_t i = 0; i + 1 < map.Size(); i += 2) {
      if (map[i].Str() == key) return map[i + 1];
    }
    return redis::ReplyView(nullptr);
  };
  EXPECT_EQ(s["length"].GetInt64(), field(info.view(), "length").Integer());
  EXPECT_EQ(std::string(s["first_id"].GetString()), field(info.view(), "first-entry")[0].Str());
  EXPECT_EQ(std::string(s["last_id"].GetString()), field(info.view(), "last-entry")[0].Str());
  auto groups = redis_->Run({"XINFO", "GROUPS", "orders"});
  auto group = groups.view()[0];
  EXPECT_EQ(s["pending"].GetInt64(), 5);
  EXPECT_EQ(s["pending"].GetInt64(), field(group, "pending").Integer());
  EXPECT_EQ(s["lag"].GetInt64(), field(group, "lag").Integer());
  EXPECT_TRUE(s["lag_exact"].GetBool());
  ASSERT_EQ(s["consumers"].Size(), 2u);
  EXPECT_STREQ(s["consumers"][0]["name"].GetString(), "worker-a");
  EXPECT_EQ(s["consumers"][0]["pending"].GetInt64(), 3);
  EXPECT_EQ(s["consumers"][1]["pending"].GetInt64(), 2);
  EXPECT_EQ(s["dead_letter"]["length"].GetInt64(), 4);
  // The oldest pending entry's age, as XPENDING's idle time of the oldest entry shows it (the
  // entries were read just now: both are small and close; status reads it after this test did).
  auto oldest = redis_->Run({"XPENDING", "orders", "billing", "-", "+", "1"});
  ASSERT_EQ(oldest.view().Size(), 1u);
  const int64_t idle_before = oldest.view()[0][2].Integer();
  const int64_t age = s["oldest_pending_age_ms"].GetInt64();
  EXPECT_GE(age, 0);
  auto again = redis_->Run({"XPENDING", "orders", "billing", "-", "+", "1"});
  const int64_t idle_after = again.view()[0][2].Integer();
  EXPECT_LE(age, idle_after + 1000) << "idle " << idle_before << ".." << idle_after;
  // The table for people says the same.
  auto table = RunStreamcar({"status", "-c", WriteConfig(SidecarConfig{})});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("10 entries"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("pending:  5"), std::string::npos) << table.out;
}

TEST_F(OperationsTest, StatusWhenLagIsUnknownEstimatesIt) {
  redis_->Run({"XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM"});
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  redis_->Run({"XREADGROUP", "GROUP", "billing", "c", "COUNT", "2", "STREAMS", "orders", ">"});
  redis_->Run({"XDEL", "orders", ids[4]});  // a deletion in the unread range: Redis gives up on lag
  auto result = RunStreamcar({"status", "--json", "-c", WriteConfig(SidecarConfig{})});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  rapidjson::Document d;
  d.Parse(result.out.c_str());
  const auto& s = d["subscriptions"][0];
  EXPECT_FALSE(s["lag_exact"].GetBool());
  EXPECT_EQ(s["lag"].GetInt64(), 3);
}

TEST_F(OperationsTest, StatusOfAStreamThatDoesNotExistYet) {
  auto result = RunStreamcar({"status", "--json", "-c", WriteConfig(SidecarConfig{})});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  rapidjson::Document d;
  d.Parse(result.out.c_str());
  EXPECT_FALSE(d["subscriptions"][0]["stream_exists"].GetBool());
  EXPECT_TRUE(d["subscriptions"][0]["lag"].IsNull());
}

TEST_F(OperationsTest, DlqListAndReplayRoundTripIntoADeliveredEntry) {
  std::atomic<bool> fixed{false};
  handler_.SetBehaviour([&](const ReceivedRequest&) {
    return HandlerReply{fixed ? 200 : 422, "schema mismatch"};
  });
  auto sidecar = StartSidecar({});
  std::string original = Add({"order", "7", "blob", std::string("\x00\xFF", 2)});
  ASSERT_TRUE(Eventually([&] { return Len("orders:dlq") == 1; }, seconds(10))) << sidecar->Logs();
  const std::string path = WriteConfig(SidecarConfig{});

  auto list =
      RunStreamcar({"dlq", "list", "-c", path, "--subscription", "orders/billing", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  rapidjson::Document d;
  d.Parse(list.out.c_str());
  ASSERT_EQ(d["dead_letters"].Size(), 1u);
  const auto& letter = d["dead_letters"][0];
  EXPECT_EQ(std::string(letter["original_id"].GetString()), original);
  EXPECT_STREQ(letter["reason"].GetString(), "rejected");
  EXPECT_STREQ(letter["status"].GetString(), "422");
  EXPECT_STREQ(letter["error"].GetString(), "schema mismatch");
  EXPECT_EQ(letter["attempts"].GetInt(), 1);
  auto table = RunStreamcar({"dlq", "list", "-c", path, "--subscription", "orders/billing"});
  EXPECT_NE(table.out.find(original), std::string::npos);

  auto dry =
      RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0);
  EXPECT_EQ(Len("orders:dlq"), 1);

  fixed = true;
  const size_t before = handler_.Count();
  auto replay = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(Len("orders:dlq"), 0);
  ASSERT_TRUE(handler_.WaitForCount(before + 1, seconds(10))) << sidecar->Logs();
  auto redelivered = handler_.Requests().back();
  // The original fields, byte for byte, and no streamcar.* metadata.
  EXPECT_NE(
      redelivered.body.find(R"("payload":{"order":"7","blob":"AP8="},"base64_fields":["blob"])"),
      std::string::npos)
      << redelivered.body;
  EXPECT_EQ(redelivered.body.find("streamcar."), std::string::npos);
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
}

TEST_F(OperationsTest, ReplaySelectedIdsAndCount) {
  for (int i = 0; i < 3; ++i) {
    Add({"n", std::to_string(i), "streamcar.stream", "orders", "streamcar.id",
         "1-" + std::to_string(i), "streamcar.group", "billing", "streamcar.attempts", "1",
         "streamcar.reason", "rejected", "streamcar.status", "422", "streamcar.error", "x",
         "streamcar.time", "1"},
        "orders:dlq");
  }
  // A dead letter of another group on the same DLQ is never touched.
  Add({"n", "other", "streamcar.stream", "orders", "streamcar.id", "1-9", "streamcar.group",
       "shipping", "streamcar.attempts", "1", "streamcar.reason", "rejected", "streamcar.status",
       "422", "streamcar.error", "x", "streamcar.time", "1"},
      "orders:dlq");
  const std::string path = WriteConfig(SidecarConfig{});
  auto letters = redis_->Run({"XRANGE", "orders:dlq", "-", "+"});
  std::string second_id(letters.view()[1][0].Str());
  auto one = RunStreamcar(
      {"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--id", second_id});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(Len("orders:dlq"), 3);
  EXPECT_EQ(Len("orders"), 1);
  auto counted = RunStreamcar(
      {"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--count", "1"});
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_EQ(Len("orders"), 2);
  auto rest = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(Len("orders"), 3);
  EXPECT_EQ(Len("orders:dlq"), 1);  // only the other group's dead letter is left
}

TEST_F(OperationsTest, BadArgumentsExitTwoWithAClearMessage) {
  const std::string path = WriteConfig(SidecarConfig{});
  auto unknown = RunStreamcar({"dlq", "list", "-c", path, "--subscription", "nope"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no subscription named \"nope\""), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("orders/billing"), std::string::npos);
  auto missing = RunStreamcar(
      {"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--id", "5-5"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no dead letter 5-5"), std::string::npos) << missing.err;
  auto count =
      RunStreamcar({"dlq", "list", "-c", path, "--subscription", "orders/billing", "--count", "x"});
  EXPECT_EQ(count.exit_code, 2);
}

TEST_F(OperationsTest, StatusAgainstUnreachableRedisExitsOne) {
  SidecarConfig c;
  c.redis_url = "redis://127.0.0.1:" + std::to_string(FreePort()) + "/0";
  auto result = RunStreamcar({"status", "-c", WriteConfig(c)});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot connect"), std::string::npos) << result.err;
  // One line saying what and where (SPEC 1).
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("127.0.0.1:"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace streamcar::testing
