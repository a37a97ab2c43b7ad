// The consumer's guarantees, written once and run on every topology (issue 33): a standalone
// server, a Redis Cluster and a Sentinel set (tests/e2e/guarantee_topology.h), and with
// STREAMCAR_TEST_REDIS_SERVER on another server build (Valkey, Redis 8: the XACKDEL path).
// docs/reliability.md's table names each test. Every test is built to fail without its
// guarantee: the order of a restart's deliveries, the header against XPENDING's count read during
// the request, the dead letter's commands as Redis executed them (MONITOR), an acknowledgement
// Redis never applied.

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

#include "tests/e2e/guarantee_fixture.h"
#include "tests/support/redis_monitor.h"

namespace streamcar::testing {
namespace {

// Holds a request while `hold` is set (at most 10 s): a sidecar killed meanwhile dies holding the
// entry, and the handler's thread is free as soon as the test lets go, not a fixed delay later.
void HoldWhile(const std::atomic<bool>& hold) {
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (hold && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// (1) SPEC 4.1.3: after kill -9 the same consumer reads its own pending list before anything new,
// and each entry arrives with the delivery count Redis holds (2).
TEST_P(GuaranteeTest, OwnPendingListFirstAfterARestart) {
  std::atomic<bool> hang{true};
  Reply([&](const ReceivedRequest&) {
    HoldWhile(hang);
    return HandlerReply{};
  });
  std::vector<std::string> held;
  for (int i = 0; i < 3; ++i) held.push_back(Add({"n", std::to_string(i)}));
  // One pod whose container restarts (SPEC 4.7: the restart takes the name's lease at once).
  const std::vector<std::string> pod = {"POD_UID=guarantee-pod"};
  auto first = Start(Config("c1", {.handler_extra = "timeout: 10s"}), pod);
  ASSERT_TRUE(WaitUntil([&] { return All().size() == 3; }, seconds(20))) << first->Logs();
  first->Kill();
  ASSERT_EQ(Pending(), 3);

  hang = false;
  const std::string fresh = Add({"n", "new"});
  // One request at a time: arrival order is dispatch order.
  auto second = Start(Config("c1", {.handler_extra = "timeout: 10s, concurrency: 1"}), pod);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0 && For(fresh).size() == 1; }, seconds(20)))
      << second->Logs();
  for (const auto& id : held) {
    const auto got = For(id);
    ASSERT_EQ(got.size(), 2u) << id;
    EXPECT_EQ(got[1].attempts, 2) << id;
    EXPECT_LT(got[1].at, For(fresh)[0].at) << id << ": own pending entries come before new ones";
  }
  EXPECT_EQ(For(fresh)[0].attempts, 1);
  ExpectAttemptsAreDeliveryCounts();
  EXPECT_TRUE(WaitMetric("streamcar_claimed_total", {"source=\"drain\""}, 3)) << Metrics();
}

// (2) SPEC 4.1.4: a consumer that died holding entries loses them to a live peer's XAUTOCLAIM once
// they are idle for claim.min_idle; the peer owns them while it delivers them (attempts 2).
TEST_P(GuaranteeTest, ADeadPeersEntriesAreReclaimed) {
  std::atomic<bool> hang{true};
  Reply([&](const ReceivedRequest& r) {
    if (r.Header("streamcar-attempts") == "1") HoldWhile(hang);
    return HandlerReply{};
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  auto dead = Start(Config("dead", {.handler_extra = "timeout: 10s"}));
  ASSERT_TRUE(WaitUntil([&] { return All().size() == 4; }, seconds(20))) << dead->Logs();
  dead->Kill();
  hang = false;

  const int alive_port = FreePort();
  auto alive =
      Start(Config("alive", {.min_idle = "1s", .claim_interval = "300ms"}), {}, alive_port);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }, seconds(20))) << alive->Logs();
  for (const auto& id : ids) {
    const auto got = For(id);
    ASSERT_EQ(got.size(), 2u) << id;
    EXPECT_EQ(got[0].owner, "dead") << id;
    EXPECT_EQ(got[1].owner, "alive") << id;
    EXPECT_EQ(got[1].attempts, 2) << id;
  }
  ExpectAttemptsAreDeliveryCounts();
  EXPECT_TRUE(WaitUntil(
      [&] {
        return MetricAt(alive_port, "streamcar_claimed_total", {"source=\"autoclaim\""}) >= 4;
      },
      seconds(15)));
}

// (3) SPEC 3.1: attempts is the XPENDING delivery count, not a count kept by the sidecar. During
// the first request someone else claims the entry for the same consumer (a delivery Redis counts
// and streamcar never saw): the retry must say 3, where a local count would say 2.
TEST_P(GuaranteeTest, AttemptsAreTheDeliveryCount) {
  Reply([&](const ReceivedRequest& r) {
    const std::string id = r.Header("streamcar-id");
    if (For(id).size() == 1) {
      topology_->Run(stream_, {"XCLAIM", stream_, "billing", "c1", "0", id});
      return HandlerReply{500, "once more"};
    }
    return HandlerReply{For(id).size() == 2 ? 503 : 200, ""};
  });
  const std::string id = Add({"n", "counted"});
  auto sidecar = Start(Config("c1", {.max_attempts = 6}));
  ASSERT_TRUE(WaitUntil([&] { return For(id).size() == 3 && Pending() == 0; }, seconds(20)))
      << sidecar->Logs();
  const auto got = For(id);
  EXPECT_EQ(got[0].attempts, 1);
  EXPECT_EQ(got[1].attempts, 3);
  EXPECT_EQ(got[2].attempts, 4);
  ExpectAttemptsAreDeliveryCounts();
  EXPECT_EQ(Len(Dlq()), 0);
}

// The commands Redis executed, as "[script] WORDS..." or "[client] WORDS..." lines, for messages.
std::string Printable(const std::vector<RedisMonitor::Seen>& seen) {
  std::ostringstream out;
  for (const auto& s : seen) {
    out << (s.from_script ? "[script]" : "[client]");
    for (const auto& w : s.words) out << ' ' << w;
    out << '\n';
  }
  return out.str();
}

// The value of `name=` in a CLIENT LIST line, or "".
std::string Field(const std::string& line, const std::string& name) {
  const std::string key = name + "=";
  size_t at = 0;
  if (line.compare(0, key.size(), key) == 0) {
    at = key.size();
  } else {
    at = line.find(" " + key);
    if (at == std::string::npos) return "";
    at += key.size() + 1;
  }
  return line.substr(at, line.find(' ', at) - at);
}

bool Names(const RedisMonitor::Seen& seen, const std::string& word) {
  return std::find(seen.words.begin(), seen.words.end(), word) != seen.words.end();
}

// (4) SPEC 3.3: a dead letter and the acknowledgement of its original are one step: the XADD to
// the dead-letter stream and the acknowledgement (with ack.delete: XACKDEL where the server has
// it, else XACK and XDEL) run in one script, with nothing between them, so no client ever sees
// the letter without the acknowledgement or the reverse. Redis's own record (MONITOR on the
// stream's master) is the proof: a two-step path or a MULTI would show client commands.
TEST_P(GuaranteeTest, ADeadLetterIsAtomicWithTheAcknowledgement) {
  const bool ackdel = topology_->HasAckDel(stream_);
  RedisMonitor monitor(topology_->MasterPort(stream_));
  ASSERT_TRUE(monitor.ok());
  Reply([](const ReceivedRequest&) { return HandlerReply{422, "no"}; });
  const std::string id = Add({"kind", "poison"});
  auto sidecar = Start(Config("c1", {.extra = "    ack: { delete: true }\n"}));
  ASSERT_TRUE(WaitUntil([&] { return Len(Dlq()) == 1 && Pending() == 0; }, seconds(20)))
      << sidecar->Logs();
  EXPECT_EQ(Len(stream_), 0) << "ack.delete: the original is deleted with its acknowledgement";

  // The script that wrote the letter: the run of script commands around its XADD, and the
  // EVALSHA (or EVAL) that ran them beside it (MONITOR logs the call before or after its
  // commands, by version).
  const auto seen = monitor.CommandsWithSource();
  size_t add = seen.size();
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].words[0] == "XADD" && seen[i].words.size() > 1 && seen[i].words[1] == Dlq()) {
      add = i;
    }
  }
  ASSERT_LT(add, seen.size()) << Printable(seen);
  ASSERT_TRUE(seen[add].from_script) << "the letter was not written by a script\n"
                                     << Printable(seen);
  size_t first = add;
  size_t last = add;
  while (first > 0 && seen[first - 1].from_script) --first;
  while (last + 1 < seen.size() && seen[last + 1].from_script) ++last;
  auto is_call = [&](size_t i) {
    return i < seen.size() && (seen[i].words[0] == "EVALSHA" || seen[i].words[0] == "EVAL");
  };
  EXPECT_TRUE((first > 0 && is_call(first - 1)) || is_call(last + 1)) << Printable(seen);
  std::vector<std::string> acks;  // the script's steps on the original
  for (size_t i = first; i <= last; ++i) {
    const std::string& name = seen[i].words[0];
    if ((name.rfind("XACK", 0) == 0 || name == "XDEL") && Names(seen[i], id)) acks.push_back(name);
  }
  const std::vector<std::string> expected =
      ackdel ? std::vector<std::string>{"XACKDEL"} : std::vector<std::string>{"XACK", "XDEL"};
  EXPECT_EQ(acks, expected) << (ackdel ? "XACKDEL on this server\n" : "no XACKDEL here\n")
                            << Printable(seen);
  // Nothing acknowledged the id outside that script.
  for (const auto& s : seen) {
    if (s.words[0].rfind("XACK", 0) == 0 && Names(s, id)) {
      EXPECT_TRUE(s.from_script) << Printable(seen);
    }
  }
  ASSERT_EQ(For(id).size(), 1u);
  const redis::Reply letter = topology_->Run(Dlq(), {"XRANGE", Dlq(), "-", "+"});
  ASSERT_EQ(letter.view().Size(), 1u);
  std::map<std::string, std::string> fields;
  const auto row = letter.view()[0][1];
  for (size_t k = 0; k + 1 < row.Size(); k += 2)
    fields[std::string(row[k].Str())] = row[k + 1].Str();
  EXPECT_EQ(fields["kind"], "poison");
  EXPECT_EQ(fields["streamcar.id"], id);
  EXPECT_EQ(fields["streamcar.reason"], "rejected");
}

// (5) SPEC 4.3 "ambiguous": an acknowledgement whose reply never comes may or may not have been
// applied; the sidecar writes nothing more for it and lets the pending list decide. Here Redis
// never applies it: writes are paused, the XACK waits at the server past the command timeout,
// and its connection is then cut (the queued command dies with it). Without the guarantee the
// entry is either taken as acknowledged (it stays pending until a reclaim, 60 s here) or
// acknowledged again without a delivery; with it, the own pending list brings it back at once,
// it is delivered again, and Redis acknowledges it once.
TEST_P(GuaranteeTest, AnAmbiguousAcknowledgementIsNeitherTrustedNorRepeated) {
  std::atomic<bool> hold{true};
  std::atomic<bool> arrived{false};
  Reply([&](const ReceivedRequest&) {
    arrived = true;
    HoldWhile(hold);
    return HandlerReply{};
  });
  TopologyConfig config = Config("c1", {.extra = "    ack: { delete: true }\n"});
  const std::string timeout = "command_timeout: 2s";
  config.redis.replace(config.redis.find(timeout), timeout.size(), "command_timeout: 500ms");
  auto sidecar = Start(config);
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  const std::string id = Add({"k", "v"});
  ASSERT_TRUE(WaitUntil([&] { return arrived.load(); }, seconds(10))) << sidecar->Logs();

  RedisMonitor monitor(topology_->MasterPort(stream_));
  ASSERT_TRUE(monitor.ok());
  topology_->Run(stream_, {"CLIENT", "PAUSE", "20000", "WRITE"});
  hold = false;
  // The acknowledgement waiting at the server (flags=b): XACK, XACKDEL, or the EXEC of XACK+XDEL.
  std::string client;
  const bool waiting = WaitUntil(
      [&] {
        std::istringstream clients(
            std::string(topology_->Run(stream_, {"CLIENT", "LIST"}).view().Str()));
        for (std::string line; std::getline(clients, line);) {
          // "id=<n> addr=... flags=<letters> ... cmd=<name> ...": b is blocked (x: in a MULTI).
          const std::string flags = Field(line, "flags");
          const std::string cmd = Field(line, "cmd");
          if (flags.find('b') == std::string::npos) continue;
          if (cmd != "xack" && cmd != "xackdel" && cmd != "exec") continue;
          client = Field(line, "id");
          return true;
        }
        return false;
      },
      seconds(10), milliseconds(20));
  if (waiting) {
    EXPECT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"ambiguous\""}, 1))
        << sidecar->Logs();
    topology_->Run(stream_, {"CLIENT", "KILL", "ID", client});  // 0 when the sidecar closed it
  }
  topology_->Run(stream_, {"CLIENT", "UNPAUSE"});
  ASSERT_TRUE(waiting) << "no acknowledgement waited at the server\n" << sidecar->Logs();

  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0 && For(id).size() == 2; }, seconds(15)))
      << "not brought back from the pending list\n"
      << sidecar->Logs();
  // The re-read of the own pending list counts no delivery (XPENDING + XRANGE): the header is
  // still the pending list's count, whatever it is.
  EXPECT_EQ(For(id)[1].owner, "c1");
  ExpectAttemptsAreDeliveryCounts();
  // Redis applied one acknowledgement of the id: the one after the second delivery.
  int applied = 0;
  for (const auto& s : monitor.CommandsWithSource()) {
    if ((s.words[0] == "XACK" || s.words[0] == "XACKDEL") && Names(s, id)) ++applied;
  }
  EXPECT_EQ(applied, 1) << Printable(monitor.CommandsWithSource());
  EXPECT_EQ(Len(Dlq()), 0);
}

INSTANTIATE_TEST_SUITE_P(Topologies, GuaranteeTest,
                         ::testing::Values(Topology::kStandalone, Topology::kCluster,
                                           Topology::kSentinel),
                         [](const ::testing::TestParamInfo<Topology>& info) {
                           return TopologyName(info.param);
                         });

}  // namespace
}  // namespace streamcar::testing
