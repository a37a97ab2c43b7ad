// The real binary on a Redis Cluster that serves TLS only (clients, bus and replication), as an
// ACL user (SPEC 2 and 8, issue 14: "TLS (`rediss://`) and ACL users work in cluster mode"):
// delivery, retries and dead letters on both paths on every master; the ACL rules
// docs/topologies.md documents for cluster mode, exactly, and a clear refusal when one is missing;
// `status` over TLS. The password never reaches a log.

#include <rapidjson/document.h>

#include <atomic>

#include "tests/e2e/topology_e2e.h"
#include "tests/support/redis_cluster.h"

namespace streamcar::testing {
namespace {

constexpr char kUser[] = "streamcar";
// Distinctive, so that any trace of it in a log is found.
constexpr char kPassword[] = "Tls-Cluster-Pw-5c81e0";

// docs/topologies.md, "Configuring each mode", cluster: the command rules an ACL user needs, as
// documented, with
// `~*` narrowed to the streams (orders-*) and their dead-letter streams ({orders-*}:dlq, and
// explicit ones named orders-*) as docs/topologies.md allows.
const std::vector<std::string> kKeyRules = {"~orders*", "~{orders*"};
const std::vector<std::string> kDocumentedCommandRules = {"+@stream",
                                                          "+evalsha",
                                                          "+eval",
                                                          "+script|load",
                                                          "+ping",
                                                          "+client|setname",
                                                          "+client|id",
                                                          "+client|unblock",
                                                          "+cluster|shards",
                                                          "+cluster|slots",
                                                          "+cluster|keyslot",
                                                          "+asking",
                                                          "+info",
                                                          "+type",
                                                          "+role",
                                                          "+wait",
                                                          "+hget",
                                                          "+hset",
                                                          "+hdel",
                                                          "+pexpire",
                                                          "+pttl"};
// What docs/configuration.md says of `ack.delete` (XACK + XDEL in MULTI/EXEC on a server without
// XACKDEL).
const std::vector<std::string> kAckDeleteRules = {"+command|info", "+multi", "+exec"};

class ClusterTlsE2eTest : public TopologyE2eTest {
 protected:
  void StartCluster(int replicas_per_master) {
    cluster_ = std::make_unique<RedisCluster>(RedisClusterOptions{
        .replicas_per_master = replicas_per_master,
        .tls = true,
        .acl_user = kUser,
        .acl_password = kPassword,
    });
  }

  // Gives the ACL user exactly `command_rules` (and kKeyRules) on every node, replicas included:
  // ACL users live on each node.
  void RestrictUser(const std::vector<std::string>& command_rules) {
    for (int i = 0; i < cluster_->size(); ++i) {
      std::vector<std::string> args = {"ACL",   "SETUSER", kUser,
                                       "reset", "on",      std::string(">") + kPassword};
      args.insert(args.end(), kKeyRules.begin(), kKeyRules.end());
      args.insert(args.end(), command_rules.begin(), command_rules.end());
      const auto reply = cluster_->RunOn(i, args);
      ASSERT_FALSE(reply.IsError()) << "node " << i << ": " << reply.view().Str();
      cluster_->RunOn(i, {"ACL", "LOG", "RESET"});
    }
  }

  // The redis: block: the TLS seed url, mode cluster, the other nodes, the CA and a client
  // certificate. `credentials_in_url`: the user and password in the url's userinfo, else in
  // redis.username / redis.password.
  std::string RedisYaml(bool credentials_in_url, const std::string& mode = "cluster") const {
    std::string url = cluster_->SeedUrl();  // rediss://127.0.0.1:<port>/0
    if (credentials_in_url) {
      url.insert(std::string("rediss://").size(), std::string(kUser) + ":" + kPassword + "@");
    }
    const auto& certs = cluster_->certificates();
    std::string yaml = "  url: \"" + url + "\"\n  mode: " + mode +
                       "\n  nodes: " + cluster_->NodesYaml() + "\n  command_timeout: 2s\n";
    if (!credentials_in_url) {
      yaml += "  username: " + std::string(kUser) + "\n  password: \"" + kPassword + "\"\n";
    }
    yaml += "  tls:\n    ca_file: " + certs.ca_cert + "\n    cert_file: " + certs.client_cert +
            "\n    key_file: " + certs.client_key + "\n";
    return yaml;
  }

  std::string AddTo(const std::string& stream, const std::vector<std::string>& fields) {
    std::vector<std::string> args = {"XADD", stream, "*"};
    args.insert(args.end(), fields.begin(), fields.end());
    return std::string(cluster_->Run(stream, args).view().Str());
  }
  int64_t Length(const std::string& key) {
    auto reply = cluster_->Run(key, {"XLEN", key});
    return reply.view().IsInteger() ? reply.view().Integer() : -1;
  }
  // The group's pending count on the stream's master; -1 without the group.
  int64_t Pending(const std::string& stream) {
    auto reply = cluster_->Run(stream, {"XPENDING", stream, "billing"});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }
  // streamcar.id -> streamcar.reason of every dead letter in `dlq`.
  std::map<std::string, std::string> DeadLetterReasons(const std::string& dlq) {
    std::map<std::string, std::string> out;
    auto reply = cluster_->Run(dlq, {"XRANGE", dlq, "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      std::string id, reason;
      auto fields = reply.view()[i][1];
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        if (fields[k].Str() == "streamcar.id") id = fields[k + 1].Str();
        if (fields[k].Str() == "streamcar.reason") reason = fields[k + 1].Str();
      }
      out[id] = reason;
    }
    return out;
  }
  // How many client connections of the ACL user node `i` has now (CLIENT LIST ... user=).
  int ConnectionsOfUser(int i) {
    const auto list = cluster_->RunOn(i, {"CLIENT", "LIST"});
    if (list.IsError()) return -1;
    const std::string text(list.view().Str());
    int count = 0;
    for (size_t at = text.find(std::string(" user=") + kUser + " "); at != std::string::npos;
         at = text.find(std::string(" user=") + kUser + " ", at + 1)) {
      ++count;
    }
    return count;
  }
  // The ACL LOG entries (refusals) of every node, one "node i: <reason> <object>" per entry.
  std::vector<std::string> AclRefusals() {
    std::vector<std::string> out;
    for (int i = 0; i < cluster_->size(); ++i) {
      const auto log = cluster_->RunOn(i, {"ACL", "LOG"});
      for (size_t e = 0; e < log.view().Size(); ++e) {
        std::string line = "node " + std::to_string(i) + ":";
        const auto entry = log.view()[e];
        for (size_t k = 0; k + 1 < entry.Size(); k += 2) {
          if (entry[k].Str() == "reason" || entry[k].Str() == "object" ||
              entry[k].Str() == "username") {
            line += " " + std::string(entry[k].Str()) + "=" + std::string(entry[k + 1].Str());
          }
        }
        out.push_back(line);
      }
    }
    return out;
  }

  // Three subscriptions, one per master, each with ok entries, one that succeeds on its second
  // attempt, one the handler rejects and one that fails every attempt. Subscription b's explicit
  // dead-letter stream lives on another master (the two-step path); a and c use the default
  // {<stream>}:dlq (atomic). With `delete_on_c`, c deletes what it acknowledges (ack.delete).
  // Runs the sidecar to completion of every entry and checks where everything went.
  void DeliverEverywhere(bool credentials_in_url, bool delete_on_c = false) {
    const std::vector<std::string> streams = {cluster_->KeyOnMaster(0, "orders-"),
                                              cluster_->KeyOnMaster(1, "orders-"),
                                              cluster_->KeyOnMaster(2, "orders-")};
    const std::string explicit_dlq = cluster_->KeyOnMaster(2, "orders-dead-");
    ASSERT_NE(cluster_->SlotOf(explicit_dlq), cluster_->SlotOf(streams[1]));
    const std::vector<std::string> dlqs = {"{" + streams[0] + "}:dlq", explicit_dlq,
                                           "{" + streams[2] + "}:dlq"};
    handler_.SetBehaviour([&](const ReceivedRequest& r) {
      deliveries_.Record(r);
      HandlerReply reply;
      const int attempts = std::atoi(r.Header("streamcar-attempts").c_str());
      if (r.body.find("\"kind\":\"reject\"") != std::string::npos) reply.status = 422;
      if (r.body.find("\"kind\":\"fail\"") != std::string::npos) reply.status = 500;
      if (r.body.find("\"kind\":\"retry\"") != std::string::npos && attempts < 2) {
        reply.status = 503;
      }
      return reply;
    });
    struct Ids {
      std::vector<std::string> ok;
      std::string retry, reject, fail;
    };
    std::vector<Ids> ids(3);
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < 5; ++i) {
        ids[s].ok.push_back(AddTo(streams[s], {"kind", "ok", "n", std::to_string(i)}));
      }
      ids[s].retry = AddTo(streams[s], {"kind", "retry"});
      ids[s].reject = AddTo(streams[s], {"kind", "reject"});
      ids[s].fail = AddTo(streams[s], {"kind", "fail"});
    }
    TopologyConfig config;
    config.redis = RedisYaml(credentials_in_url);
    const std::vector<std::string> names = {"sub-a", "sub-b", "sub-c"};
    for (int s = 0; s < 3; ++s) {
      SubscriptionSpec sub{.name = names[s], .stream = streams[s], .max_attempts = 3};
      if (s == 1) sub.extra = "    dead_letter: { stream: \"" + explicit_dlq + "\" }\n";
      if (s == 2 && delete_on_c) sub.extra = "    ack: { delete: true }\n";
      config.subscriptions.push_back(sub);
    }
    auto sidecar = StartTopologySidecar(config);
    ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
    // Per stream: 5 ok + 2 (retried once) + 1 (rejected) + 3 (max_attempts) deliveries, every
    // entry acknowledged, both dead letters written.
    ASSERT_TRUE(WaitUntil(
        [&] {
          if (deliveries_.Total() < 3 * 11) return false;
          for (int s = 0; s < 3; ++s) {
            if (Pending(streams[s]) != 0 || Length(dlqs[s]) < 2) return false;
          }
          return true;
        },
        seconds(30)))
        << "refused by the ACL: " << ::testing::PrintToString(AclRefusals()) << "\n"
        << sidecar->Logs();
    // The sidecar reaches every master as the ACL user, over TLS (the nodes serve nothing else).
    for (int m = 0; m < 3; ++m) EXPECT_GE(ConnectionsOfUser(m), 1) << "master " << m;

    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE("subscription " + names[s] + " on stream " + streams[s]);
      for (const auto& id : ids[s].ok) {
        const auto got = deliveries_.For(streams[s], id);
        ASSERT_EQ(got.size(), 1u) << id;
        EXPECT_EQ(got[0].attempts, 1);
      }
      const auto retried = deliveries_.For(streams[s], ids[s].retry);
      ASSERT_EQ(retried.size(), 2u);
      EXPECT_EQ(retried[0].attempts, 1);
      EXPECT_EQ(retried[1].attempts, 2);
      EXPECT_EQ(deliveries_.For(streams[s], ids[s].reject).size(), 1u);
      EXPECT_EQ(deliveries_.For(streams[s], ids[s].fail).size(), 3u);
      EXPECT_EQ(Pending(streams[s]), 0);
      // Exactly the two dead letters, in the effective dead-letter stream and nowhere else.
      const auto letters = DeadLetterReasons(dlqs[s]);
      EXPECT_EQ(letters.size(), 2u);
      EXPECT_EQ(letters.count(ids[s].reject) ? letters.at(ids[s].reject) : "", "rejected");
      EXPECT_EQ(letters.count(ids[s].fail) ? letters.at(ids[s].fail) : "", "max_attempts");
      EXPECT_EQ(Length(streams[s] + ":dlq"), 0);
      // ack.delete: every entry was settled, so none is left in the stream.
      if (s == 2 && delete_on_c) {
        EXPECT_EQ(Length(streams[s]), 0);
      }
      if (s == 1) {
        EXPECT_EQ(Length("{" + streams[s] + "}:dlq"), 0);
      }
    }
    // The start log names the paths.
    const std::string logs = sidecar->Logs();
    EXPECT_FALSE(LinesWith(logs, {"\"sub-a\"", "atomic"}).empty()) << logs;
    EXPECT_FALSE(LinesWith(logs, {"\"sub-b\"", "two-step"}).empty()) << logs;
    EXPECT_FALSE(LinesWith(logs, {"\"sub-c\"", "atomic"}).empty()) << logs;
    // Whatever streamcar sent, the ACL refused none of it.
    EXPECT_EQ(AclRefusals(), std::vector<std::string>{});

    sidecar->Terminate();
    ASSERT_TRUE(sidecar->Wait(seconds(20)).has_value()) << sidecar->Logs();
    const std::string all_logs = sidecar->Logs();
    EXPECT_EQ(all_logs.find(kPassword), std::string::npos) << all_logs;
    EXPECT_EQ(all_logs.find("PRIVATE KEY"), std::string::npos) << all_logs;
  }

  std::unique_ptr<RedisCluster> cluster_;
};

// Case 1: rediss:// seed url with the user and password in it, mode cluster, a user allowed
// everything (the harness's `~* &* +@all`).
TEST_F(ClusterTlsE2eTest, DeliversRetriesAndDeadLettersOnEveryMasterOverTlsAsAnAclUser) {
  StartCluster(/*replicas_per_master=*/1);
  ASSERT_FALSE(HasFatalFailure());
  DeliverEverywhere(/*credentials_in_url=*/true);
}

// Case 2: the user has exactly the rules docs/topologies.md documents for cluster mode (keys
// narrowed to the streams and their dead-letter streams, and the rules for ack.delete, which
// subscription c uses), the credentials in redis.username/password. A replica per master: a dead
// letter in another slot waits for one (ROLE, WAIT).
TEST_F(ClusterTlsE2eTest, DeliversWithExactlyTheDocumentedAclRules) {
  StartCluster(/*replicas_per_master=*/1);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> rules = kDocumentedCommandRules;
  rules.insert(rules.end(), kAckDeleteRules.begin(), kAckDeleteRules.end());
  RestrictUser(rules);
  ASSERT_FALSE(HasFatalFailure());
  DeliverEverywhere(/*credentials_in_url=*/false, /*delete_on_c=*/true);
}

// Case 2, a rule missing: without CLUSTER SHARDS/SLOTS the slot map cannot be read. streamcar
// stops with exit 1 and an error that names the refused command, not a silent retry forever.
TEST_F(ClusterTlsE2eTest, WithoutClusterPermissionExitsOneNamingTheRefusedCommand) {
  StartCluster(/*replicas_per_master=*/0);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> rules;
  for (const auto& rule : kDocumentedCommandRules) {
    if (rule.rfind("+cluster|", 0) != 0) rules.push_back(rule);
  }
  RestrictUser(rules);
  ASSERT_FALSE(HasFatalFailure());
  const std::string stream = cluster_->KeyOnMaster(1, "orders-");
  TopologyConfig config;
  config.redis = RedisYaml(/*credentials_in_url=*/false);
  config.subscriptions = {{.name = "sub", .stream = stream}};
  auto sidecar = StartTopologySidecar(config);
  sidecar->ExpectExit(1);
  const auto code = sidecar->Wait(seconds(30));
  ASSERT_TRUE(code.has_value()) << "still running without CLUSTER permission:\n" << sidecar->Logs();
  EXPECT_EQ(*code, 1);
  const std::string logs = sidecar->Logs();
  EXPECT_NE(logs.find("NOPERM"), std::string::npos) << logs;
  EXPECT_NE(logs.find("CLUSTER SLOTS/SHARDS"), std::string::npos) << logs;
  EXPECT_EQ(logs.find(kPassword), std::string::npos) << logs;

  // `status` fails the same way, with the same words.
  const std::string path = WriteConfig(TopologyYaml(config));
  const auto status = RunStreamcar({"status", "-c", path});
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  EXPECT_NE(status.err.find("CLUSTER SLOTS/SHARDS"), std::string::npos) << status.err;
  EXPECT_EQ((status.out + status.err).find(kPassword), std::string::npos);
}

// Any other command the documented rules grant, refused: exit 1 naming it, not a retry once a
// second for ever (TYPE, in the subscription's setup) nor "unreachable" (PING, on every
// connection).
TEST_F(ClusterTlsE2eTest, WithoutTypeOrPingPermissionExitsOneNamingTheCommand) {
  StartCluster(/*replicas_per_master=*/0);
  ASSERT_FALSE(HasFatalFailure());
  const std::string stream = cluster_->KeyOnMaster(1, "orders-");
  for (const std::string missing : {"+type", "+ping"}) {
    SCOPED_TRACE("without " + missing);
    std::vector<std::string> rules;
    for (const auto& rule : kDocumentedCommandRules) {
      if (rule != missing) rules.push_back(rule);
    }
    ASSERT_EQ(rules.size() + 1, std::size(kDocumentedCommandRules));
    RestrictUser(rules);
    ASSERT_FALSE(HasFatalFailure());
    TopologyConfig config;
    config.redis = RedisYaml(/*credentials_in_url=*/false);
    config.subscriptions = {{.name = "sub", .stream = stream}};
    auto sidecar = StartTopologySidecar(config);
    sidecar->ExpectExit(1);
    const auto code = sidecar->Wait(seconds(30));
    ASSERT_TRUE(code.has_value()) << "still running:\n" << sidecar->Logs();
    EXPECT_EQ(*code, 1);
    const std::string logs = sidecar->Logs();
    EXPECT_NE(logs.find("may not run"), std::string::npos) << logs;
    EXPECT_NE(logs.find("NOPERM this user has no permissions to run the '" + missing.substr(1) +
                        "' command"),
              std::string::npos)
        << logs;
    EXPECT_EQ(logs.find("redis unreachable"), std::string::npos) << logs;
    EXPECT_EQ(logs.find(kPassword), std::string::npos) << logs;
  }
}

// Case 3: `streamcar status` (the CLI) over TLS as the restricted user, mode auto: one line per
// subscription with its group, on every master.
TEST_F(ClusterTlsE2eTest, StatusReadsEveryGroupOverTls) {
  StartCluster(/*replicas_per_master=*/0);
  ASSERT_FALSE(HasFatalFailure());
  RestrictUser(kDocumentedCommandRules);
  ASSERT_FALSE(HasFatalFailure());
  TopologyConfig config;
  config.redis = RedisYaml(/*credentials_in_url=*/false, "auto");
  const std::vector<std::string> groups = {"billing", "audit", "search"};
  for (int m = 0; m < 3; ++m) {
    const std::string stream = cluster_->KeyOnMaster(m, "orders-");
    for (int i = 0; i <= m; ++i) AddTo(stream, {"n", std::to_string(i)});
    cluster_->Run(stream, {"XGROUP", "CREATE", stream, groups[m], "0"});
    config.subscriptions.push_back(
        {.name = "sub-" + std::to_string(m), .stream = stream, .group = groups[m]});
  }
  const std::string path = WriteConfig(TopologyYaml(config));

  const auto text = RunStreamcar({"status", "-c", path});
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("redis: cluster, 3 masters\n"), std::string::npos) << text.out;
  for (int m = 0; m < 3; ++m) {
    const auto& s = config.subscriptions[m];
    EXPECT_NE(text.out.find(s.name + "  (stream " + s.stream + ", group " + s.group +
                            ")\n  stream:   " + std::to_string(m + 1) + " entries"),
              std::string::npos)
        << text.out;
  }
  EXPECT_EQ(text.out.find("does not exist yet"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("error:"), std::string::npos) << text.out;

  const auto json = RunStreamcar({"status", "-c", path, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  rapidjson::Document doc;
  doc.Parse(json.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json.out;
  EXPECT_STREQ(doc["redis"]["mode"].GetString(), "cluster");
  EXPECT_EQ(doc["redis"]["masters"].GetInt(), 3);
  ASSERT_EQ(doc["subscriptions"].Size(), 3u);
  for (int m = 0; m < 3; ++m) {
    const auto& s = doc["subscriptions"][m];
    EXPECT_STREQ(s["group"].GetString(), groups[m].c_str());
    EXPECT_TRUE(s["group_exists"].GetBool()) << json.out;
    EXPECT_EQ(s["length"].GetInt64(), m + 1);
  }
  EXPECT_EQ((text.out + text.err + json.out + json.err).find(kPassword), std::string::npos);
  EXPECT_EQ(AclRefusals(), std::vector<std::string>{});
}

}  // namespace
}  // namespace streamcar::testing
