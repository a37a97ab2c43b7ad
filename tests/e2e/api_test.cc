// The log API (SPEC section 10) end to end: the real binary with a streams-only configuration, a
// real redis-server, and HTTP written byte by byte over sockets, so framing is under test too.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/e2e/log_api_fixture.h"

namespace streamcar::testing {
namespace {

const std::string kToken = "tok-4f9a1c";

// Reads what arrives by `deadline` into *buffer; false on timeout, or when the peer closed
// (then *closed is set).
bool ReadMore(int fd, std::string* buffer, Clock::time_point deadline, bool* closed = nullptr) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  bool gone = false;
  const bool got = ReadSome(fd, buffer, left, &gone);
  if (gone && closed != nullptr) *closed = true;
  return got;
}

struct Reply {
  int status = 0;                              // 0: no answer in time
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// Reads one response (framed by Content-Length) from `fd`; `pending` carries bytes past it.
// `head_only`: the answer to HEAD, which carries no body whatever its Content-Length says (RFC 9110
// 9.3.2).
Reply ReadReply(int fd, std::string* pending, milliseconds timeout = seconds(10),
                bool head_only = false) {
  const auto deadline = Clock::now() + timeout;
  Reply reply;
  size_t head_end;
  while ((head_end = pending->find("\r\n\r\n")) == std::string::npos) {
    if (!ReadMore(fd, pending, deadline)) return reply;
  }
  const std::string head = pending->substr(0, head_end + 2);
  size_t at = head.find("\r\n");
  reply.status = std::stoi(head.substr(9, 3));
  while (at + 2 < head.size()) {
    const size_t end = head.find("\r\n", at + 2);
    const std::string line = head.substr(at + 2, end - at - 2);
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[name] = value;
    at = end;
  }
  pending->erase(0, head_end + 4);
  const size_t length = head_only || reply.Header("content-length").empty()
                            ? 0
                            : std::stoul(reply.Header("content-length"));
  while (pending->size() < length) {
    if (!ReadMore(fd, pending, deadline)) {
      reply.status = 0;
      return reply;
    }
  }
  reply.body = pending->substr(0, length);
  pending->erase(0, length);
  return reply;
}

// True when the server closes the connection within `timeout` (bytes before the close are
// dropped).
bool ClosedByServer(int fd, milliseconds timeout = seconds(5)) {
  const auto deadline = Clock::now() + timeout;
  std::string ignored;
  bool closed = false;
  while (!closed && Clock::now() < deadline) ReadMore(fd, &ignored, deadline, &closed);
  return closed;
}

std::string Head(const std::string& method, const std::string& path,
                 const std::vector<std::string>& headers, const std::string& body,
                 bool with_length = true) {
  std::string out = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& header : headers) out += header + "\r\n";
  if (with_length && (!body.empty() || method == "POST")) {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return out + "\r\n" + body;
}

// Every "id" of the entries of a page, in order.
std::vector<std::string> PageIds(const std::string& json) {
  std::vector<std::string> ids;
  size_t at = 0;
  while ((at = json.find("{\"id\":\"", at)) != std::string::npos) {
    at += 7;
    ids.push_back(json.substr(at, json.find('"', at) - at));
  }
  return ids;
}

struct SseEvent {
  std::string id;
  std::string data;
};

// A Server-Sent Events follower over its own connection.
class SseClient {
 public:
  ~SseClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Sends the GET and reads the answer's head; the status (0 when nothing answered).
  int Open(int port, const std::string& path, const std::vector<std::string>& headers) {
    fd_ = ConnectTo(port);
    if (fd_ < 0 || !SendAll(fd_, Head("GET", path, headers, ""))) return 0;
    const auto deadline = Clock::now() + seconds(10);
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd_, &buffer_, deadline)) return 0;
    }
    head_ = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    return std::stoi(head_.substr(9, 3));
  }
  const std::string& head() const { return head_; }

  // Waits until `count` events (or one comment, when count is 0 and `comment` is set) arrived.
  bool WaitEvents(size_t count, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      Parse();
      if (events_.size() >= count) return true;
      if (!ReadMore(fd_, &buffer_, deadline)) return false;
    }
  }
  bool WaitComment(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      Parse();
      if (!comments_.empty()) return true;
      if (!ReadMore(fd_, &buffer_, deadline)) return false;
    }
  }
  const std::vector<SseEvent>& events() const { return events_; }
  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const auto& e : events_) out.push_back(e.id);
    return out;
  }

 private:
  void Parse() {
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string block = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      SseEvent event;
      bool is_event = false;
      size_t at = 0;
      while (at <= block.size()) {
        size_t nl = block.find('\n', at);
        if (nl == std::string::npos) nl = block.size();
        const std::string line = block.substr(at, nl - at);
        at = nl + 1;
        if (line.starts_with(":")) {
          comments_.push_back(line);
        } else if (line.starts_with("id: ")) {
          event.id = line.substr(4);
          is_event = true;
        } else if (line.starts_with("data: ")) {
          event.data = line.substr(6);
          is_event = true;
        }
      }
      if (is_event) events_.push_back(event);
    }
  }

  int fd_ = -1;
  std::string buffer_;
  std::string head_;
  std::vector<SseEvent> events_;
  std::vector<std::string> comments_;
};

class ApiTest : public E2eTest {
 protected:
  ApiTest() : api_port_(FreePort()) {}

  std::string WriteToken(const std::string& token) { return WriteConfig(token); }

  // A sidecar that only serves the log API: no subscriptions.
  void StartApi(const std::string& streams_extra = "") {
    token_path_ = WriteToken(kToken + "\n");
    const std::string yaml =
        "version: 1\nredis: { url: \"" + redis_->url() +
        "\", command_timeout: 2s, connect_timeout: 1s }\nadmin: { listen: \"127.0.0.1:" +
        std::to_string(admin_port_) +
        "\" }\napi:\n  listen: \"127.0.0.1:" + std::to_string(api_port_) +
        "\"\n  token_file: " + token_path_ +
        "\n  max_body: 4KiB\nstreams:\n  - name: feed\n  - name: notes\n    notify: true\n"
        "  - name: ro\n    produce: false\n  - name: capped\n    max_len: 10\n" +
        streams_extra;
    sidecar_ = std::make_unique<SidecarProcess>(yaml, std::vector<std::string>{}, admin_port_);
    ASSERT_TRUE(WaitReady()) << sidecar_->Logs();
  }

  // One request on a connection of its own.
  Reply Call(const std::string& method, const std::string& path,
             std::vector<std::string> headers = {}, const std::string& body = "",
             bool authorized = true) {
    if (authorized) headers.push_back("Authorization: Bearer " + kToken);
    const int fd = ConnectTo(api_port_);
    EXPECT_GE(fd, 0);
    if (fd < 0) return {};
    std::string pending;
    Reply reply;
    if (SendAll(fd, Head(method, path, headers, body))) reply = ReadReply(fd, &pending);
    ::close(fd);
    return reply;
  }
  Reply PostJson(const std::string& stream, const std::string& json,
                 std::vector<std::string> headers = {}) {
    headers.push_back("Content-Type: application/json");
    return Call("POST", "/v1/streams/" + stream + "/entries", headers, json);
  }

  // XRANGE of one entry: its fields in order.
  std::vector<std::pair<std::string, std::string>> FieldsOf(const std::string& stream,
                                                            const std::string& id) {
    std::vector<std::pair<std::string, std::string>> out;
    auto reply = redis_->Run({"XRANGE", stream, id, id});
    if (reply.view().Size() != 1) return out;
    auto fields = reply.view()[0][1];
    for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
      out.emplace_back(fields[k].Str(), fields[k + 1].Str());
    }
    return out;
  }

  int api_port_;
  std::string token_path_;
  std::unique_ptr<SidecarProcess> sidecar_;
};

using Fields = std::vector<std::pair<std::string, std::string>>;

TEST_F(ApiTest, CheckPrintsTheLogApiSectionsButNeverTheTokenItself) {
  const std::string token_path = WriteToken("s3cret-token-value\n");
  const std::string path = WriteConfig(
      "version: 1\nredis: { url: \"" + redis_->url() +
      "\" }\napi:\n  listen: 127.0.0.1:9465\n  token_file: " + token_path +
      "\n  max_body: 64KiB\nstreams:\n  - name: feed\n    produce: false\n    max_len: 10\n"
      "archive: { url: \"postgres://app:pgpass@db:5432/log\" }\n");
  auto result = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("subscriptions: []"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("token_file: " + token_path), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("max_body: 64KiB"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("  - name: feed\n    produce: false\n    max_len: 10"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("s3cret-token-value"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("pgpass"), std::string::npos) << result.out;
}

TEST_F(ApiTest, CheckRejectsAnArchivedStreamWithoutAnArchive) {
  const std::string path = WriteConfig("version: 1\nstreams:\n  - name: feed\n    archive: true\n");
  auto result = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(path + ":3: streams[0].archive: archive: true needs archive.url"),
            std::string::npos)
      << result.err;
}

TEST_F(ApiTest, AppendsJsonAndRawBodiesAndReadsThemBackByteExact) {
  StartApi();
  Reply json = PostJson(
      "feed",
      R"({"s":"caf\u00e9 \"q\"","n":12.50,"b":true,"nil":null,"arr":[1,"x"],"obj":{"k":"v"}})");
  ASSERT_EQ(json.status, 201) << json.body;
  const std::string json_id = JsonString(json.body, "id");
  EXPECT_EQ(json.body, "{\"id\":\"" + json_id + "\",\"stream\":\"feed\"}");
  EXPECT_EQ(FieldsOf("feed", json_id), (Fields{{"s", "caf\xc3\xa9 \"q\""},
                                               {"n", "12.50"},
                                               {"b", "true"},
                                               {"nil", "null"},
                                               {"arr", "[1,\"x\"]"},
                                               {"obj", "{\"k\":\"v\"}"}}));

  const std::string binary("\x00\x01\xff\xfe\r\n\"raw\"", 11);
  Reply raw =
      Call("POST", "/v1/streams/feed/entries", {"Content-Type: application/x-thing"}, binary);
  ASSERT_EQ(raw.status, 201) << raw.body;
  const std::string raw_id = JsonString(raw.body, "id");
  EXPECT_EQ(FieldsOf("feed", raw_id),
            (Fields{{"data", binary}, {"content_type", "application/x-thing"}}));

  // Read back: the fields as the payload of SPEC 3.1, the binary value in base64.
  Reply page = Call("GET", "/v1/streams/feed/entries");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.Header("content-type"), "application/json");
  EXPECT_EQ(page.body,
            "{\"entries\":[{\"id\":\"" + json_id +
                "\",\"fields\":{\"s\":\"caf\xc3\xa9 \\\"q\\\"\",\"n\":\"12.50\",\"b\":\"true\","
                "\"nil\":\"null\",\"arr\":\"[1,\\\"x\\\"]\",\"obj\":\"{\\\"k\\\":\\\"v\\\"}\"}},"
                "{\"id\":\"" +
                raw_id +
                "\",\"fields\":{\"data\":\"AAH//g0KInJhdyI=\",\"content_type\":\"application/"
                "x-thing\"},\"base64_fields\":[\"data\"]}],\"next\":null}");
  EXPECT_GE(Metric("streamcar_produced_total", {"stream=\"feed\""}), 2);
  EXPECT_GE(Metric("streamcar_api_requests_total", {"route=\"produce\"", "code=\"201\""}), 2);
}

TEST_F(ApiTest, IdempotencyKeyAnswersTheFirstIdAndAppendsOnce) {
  StartApi();
  Reply first = PostJson("feed", R"({"a":"1"})", {"Idempotency-Key: order-7"});
  Reply again = PostJson("feed", R"({"a":"2"})", {"Idempotency-Key: order-7"});
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(Len("feed"), 1);
  Reply other = PostJson("feed", R"({"a":"3"})", {"Idempotency-Key: order-8"});
  EXPECT_EQ(other.status, 201);
  EXPECT_NE(JsonString(other.body, "id"), JsonString(first.body, "id"));
  EXPECT_EQ(Len("feed"), 2);
}

TEST_F(ApiTest, StreamcarEntryIdIsKeptExactlyAndALowerOneIsAConflict) {
  StartApi();
  Reply minted = PostJson("feed", R"({"a":"1"})", {"Streamcar-Entry-Id: 1764513000000-7"});
  ASSERT_EQ(minted.status, 201) << minted.body;
  EXPECT_EQ(JsonString(minted.body, "id"), "1764513000000-7");
  for (const char* id : {"1764513000000-7", "1764512999999-9"}) {
    Reply lower = PostJson("feed", R"({"a":"2"})", {std::string("Streamcar-Entry-Id: ") + id});
    EXPECT_EQ(lower.status, 409) << id;
    EXPECT_EQ(lower.body, R"({"error":"nonmonotonic","top":"1764513000000-7"})");
  }
  EXPECT_EQ(Len("feed"), 1);
  EXPECT_EQ(PostJson("feed", R"({"a":"3"})", {"Streamcar-Entry-Id: seven"}).status, 400);
}

TEST_F(ApiTest, MaxLenTrimsOnEveryAppend) {
  // Small radix-tree nodes, so the approximate MAXLEN ~ 10 can trim at this size.
  redis_->Run({"CONFIG", "SET", "stream-node-max-entries", "5"});
  StartApi();
  for (int i = 0; i < 60; ++i)
    ASSERT_EQ(PostJson("capped", R"({"i":")" + std::to_string(i) + "\"}").status, 201);
  EXPECT_LE(Len("capped"), 15);
  EXPECT_GE(Len("capped"), 10);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(PostJson("feed", R"({"i":"x"})").status, 201);
  EXPECT_EQ(Len("feed"), 20);  // a stream without max_len keeps everything
}

TEST_F(ApiTest, NotifyPublishesTheIdAfterEachAppend) {
  StartApi();
  const int fd = ConnectTo(redis_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "SUBSCRIBE notes:events feed:events\r\n"));
  std::string seen;
  const auto deadline = Clock::now() + seconds(10);
  while (seen.find(":2\r\n") == std::string::npos && ReadMore(fd, &seen, deadline)) {
  }
  ASSERT_NE(seen.find(":2\r\n"), std::string::npos) << seen;
  seen.clear();
  Reply plain = PostJson("feed", R"({"a":"quiet"})");  // notify: false
  Reply loud = PostJson("notes", R"({"a":"1"})");
  ASSERT_EQ(loud.status, 201);
  const std::string expected = "{\"id\":\"" + JsonString(loud.body, "id") + "\"}";
  while (seen.find(expected) == std::string::npos && ReadMore(fd, &seen, deadline)) {
  }
  EXPECT_NE(seen.find("notes:events"), std::string::npos) << seen;
  EXPECT_NE(seen.find(expected), std::string::npos) << seen;
  EXPECT_EQ(seen.find("feed:events"), std::string::npos) << seen;
  // One message, the loud append's: the quiet one, appended first, would have come before it.
  // Not told apart by id: two streams' ids coincide when both appends share a millisecond.
  ASSERT_EQ(plain.status, 201);
  size_t messages = 0;
  for (size_t at = seen.find("$7\r\nmessage\r\n"); at != std::string::npos;
       at = seen.find("$7\r\nmessage\r\n", at + 1)) {
    ++messages;
  }
  EXPECT_EQ(messages, 1u) << seen;
  ::close(fd);
}

TEST_F(ApiTest, WindowsByInstantMillisecondsAndIdWithPages) {
  StartApi();
  // 1764513000000 is 2025-11-30T14:30:00Z.
  for (const char* id : {"1764513000000-0", "1764513001000-0", "1764513002000-0", "1764513002000-1",
                         "1764513003000-0"}) {
    ASSERT_EQ(PostJson("feed", R"({"a":"1"})", {std::string("Streamcar-Entry-Id: ") + id}).status,
              201);
  }
  auto ids = [&](const std::string& query) {
    Reply page = Call("GET", "/v1/streams/feed/entries?" + query);
    EXPECT_EQ(page.status, 200) << query << ": " << page.body;
    return PageIds(page.body);
  };
  using Ids = std::vector<std::string>;
  EXPECT_EQ(ids("since=2025-11-30T14:30:01Z&until=2025-11-30T14:30:03Z"),
            (Ids{"1764513001000-0", "1764513002000-0", "1764513002000-1"}));
  EXPECT_EQ(ids("since=2025-11-30T15:30:01%2B01:00&until=1764513003000"),
            (Ids{"1764513001000-0", "1764513002000-0", "1764513002000-1"}));
  EXPECT_EQ(ids("since=1764513002000"),
            (Ids{"1764513002000-0", "1764513002000-1", "1764513003000-0"}));
  EXPECT_EQ(ids("since=1764513002000-1&until=1764513003000-0"), (Ids{"1764513002000-1"}));

  // Pages of two through `next` until it is null: every entry once, in order.
  Ids all;
  std::string query = "count=2";
  for (int pages = 0; pages < 10; ++pages) {
    Reply page = Call("GET", "/v1/streams/feed/entries?" + query);
    ASSERT_EQ(page.status, 200) << page.body;
    auto got = PageIds(page.body);
    EXPECT_LE(got.size(), 2u);
    all.insert(all.end(), got.begin(), got.end());
    if (page.body.ends_with("\"next\":null}")) break;
    query = "count=2&after=" + JsonString(page.body, "next");
  }
  EXPECT_EQ(all, (Ids{"1764513000000-0", "1764513001000-0", "1764513002000-0", "1764513002000-1",
                      "1764513003000-0"}));
  for (const char* bad : {"since=yesterday", "count=0", "count=10001", "until=1-x", "bogus=1"}) {
    Reply page = Call("GET", std::string("/v1/streams/feed/entries?") + bad);
    EXPECT_EQ(page.status, 400) << bad;
    EXPECT_TRUE(page.body.starts_with("{\"error\":\"")) << page.body;
  }
}

TEST_F(ApiTest, BearerTokenIsRequiredAndReReadWhenTheFileChanges) {
  StartApi();
  Reply missing = Call("GET", "/v1/streams/feed/entries", {}, "", /*authorized=*/false);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.Header("www-authenticate"), "Bearer");
  // A 401 closes its connection (issue 29, F2): unauthenticated clients cannot hold connections.
  EXPECT_EQ(missing.Header("connection"), "close");
  EXPECT_EQ(missing.body, R"({"error":"missing bearer token"})");
  EXPECT_EQ(
      Call("GET", "/v1/streams/feed/entries", {"Authorization: Bearer nope"}, "", false).status,
      401);
  // Unauthenticated clients learn nothing, not even whether a stream exists.
  EXPECT_EQ(Call("GET", "/v1/streams/nope/entries", {}, "", false).status, 401);
  EXPECT_EQ(Call("GET", "/v1/streams/feed/entries").status, 200);

  std::ofstream(token_path_) << "rotated-token-2\n";
  auto with = [&](const std::string& token) {
    return Call("GET", "/v1/streams/feed/entries", {"Authorization: Bearer " + token}, "", false)
        .status;
  };
  EXPECT_TRUE(Eventually([&] { return with("rotated-token-2") == 200; }, seconds(10)));
  EXPECT_EQ(with(kToken), 401);
  EXPECT_EQ(with("rotated-token"), 401);  // a prefix is not the token
}

// SPEC 9/10: a stream that a sharded subscription reads is appended to in the shard of the
// entry's Streamcar-Key. The key is untrusted input: every byte a header can carry routes as
// `streamcar route` routes it, and what is no key (absent, empty, a control character, a head
// over the limit) is refused with nothing appended.
TEST_F(ApiTest, StreamcarKeyRoutesEveryByteAndWhatIsNoKeyIsRefused) {
  constexpr int kShards = 16;
  StartApi(
      "  - name: orders\nsubscriptions:\n  - stream: orders\n    group: billing\n"
      "    start: beginning\n    handler: { url: \"" +
      handler_.url("/") +
      "\", timeout: 1s }\n    sharding: { shards: 16, session_timeout: 6s, heartbeat_interval: "
      "500ms,"
      " rebalance_timeout: 8s, drain_timeout: 3s, initial_delay: 0s,"
      " min_assignment_interval: 0s }\n");
  auto total = [&] {
    int64_t entries = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      entries += redis_->Run({"XLEN", "orders:{" + std::to_string(shard) + "}"}).view().Integer();
    }
    return entries;
  };
  const std::string config = WriteConfig(
      "version: 1\nsubscriptions:\n  - stream: orders\n    group: billing\n"
      "    start: beginning\n    handler: { url: \"http://127.0.0.1:9/\" }\n"
      "    sharding: { shards: 16 }\n");
  // Each key lands where `streamcar route` says, byte for byte.
  const std::string binary = "\xff\xfe\x80k\xc3\xa9";
  const std::string long_key(12000, 'k');  // the request head stays under its 16 KiB limit
  for (const std::string& key : {std::string("123456789"), binary, long_key}) {
    Reply appended = PostJson("orders", R"({"a":"1"})", {"Streamcar-Key: " + key});
    ASSERT_EQ(appended.status, 201) << appended.body;
    const std::string id = JsonString(appended.body, "id");
    auto route = RunStreamcar({"route", "-c", config, "--subscription", "orders/billing", key});
    ASSERT_EQ(route.exit_code, 0) << route.err;
    const int shard = std::stoi(route.out);
    EXPECT_EQ(shard, keys::ShardOf(key, kShards));
    EXPECT_EQ(FieldsOf("orders:{" + std::to_string(shard) + "}", id).size(), 1u)
        << "key of " << key.size() << " bytes";
  }
  EXPECT_EQ(keys::ShardOf("123456789", kShards), 6) << "CRC-32 0xCBF43926 mod 16";
  EXPECT_EQ(total(), 3);

  Reply missing = PostJson("orders", R"({"a":"1"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("Streamcar-Key"), std::string::npos) << missing.body;
  Reply empty = PostJson("orders", R"({"a":"1"})", {"Streamcar-Key:"});
  EXPECT_EQ(empty.status, 400) << empty.body;
  Reply control = PostJson("orders", R"({"a":"1"})", {"Streamcar-Key: a\x01b"});
  EXPECT_EQ(control.status, 400) << control.body;
  Reply too_long =
      PostJson("orders", R"({"a":"1"})", {"Streamcar-Key: " + std::string(17000, 'k')});
  EXPECT_EQ(too_long.status, 431) << too_long.body;
  EXPECT_EQ(total(), 3) << "nothing appended for a refused key";
}

TEST_F(ApiTest, ErrorsAreJsonWithTheirStatus) {
  StartApi();
  Reply unknown = Call("GET", "/v1/streams/nope/entries");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body, R"({"error":"unknown stream \"nope\": not listed in streams"})");
  EXPECT_EQ(Call("GET", "/v1/other").status, 404);
  // HEAD gets 405 and the connection closes (its client would not read the body).
  const int head_fd = ConnectTo(api_port_);
  ASSERT_TRUE(SendAll(
      head_fd, Head("HEAD", "/v1/streams/feed/entries", {"Authorization: Bearer " + kToken}, "")));
  std::string head_pending;
  EXPECT_EQ(ReadReply(head_fd, &head_pending, seconds(10), /*head_only=*/true).status, 405);
  EXPECT_EQ(head_pending, "") << "an answer to HEAD carries no body";
  EXPECT_TRUE(ClosedByServer(head_fd));
  ::close(head_fd);
  Reply method = Call("DELETE", "/v1/streams/feed/entries");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.Header("allow"), "GET, POST");
  Reply read_only = PostJson("ro", R"({"a":"1"})");
  EXPECT_EQ(read_only.status, 405);
  EXPECT_EQ(read_only.Header("allow"), "GET");
  EXPECT_EQ(Len("ro"), 0);
  for (const char* bad : {"{\"a\":", "[1,2]", "{}", "{\"a\":\"1\"} x", "\"text\""}) {
    Reply malformed = PostJson("feed", bad);
    EXPECT_EQ(malformed.status, 400) << bad;
    EXPECT_TRUE(malformed.body.starts_with("{\"error\":\"")) << malformed.body;
  }
  EXPECT_EQ(Len("feed"), 0);
  EXPECT_GE(Metric("streamcar_api_requests_total", {"route=\"produce\"", "code=\"400\""}), 5);
  // Series exist at 0 before their first answer.
  EXPECT_EQ(Metric("streamcar_api_requests_total", {"route=\"produce\"", "code=\"409\""}), 0);
  EXPECT_EQ(Metric("streamcar_followers", {"stream=\"capped\""}), 0);
  EXPECT_EQ(Metric("streamcar_produced_total", {"stream=\"ro\""}), 0);
}

TEST_F(ApiTest, BodyOverMaxBodyIs413BeforeItIsRead) {
  StartApi();
  const int fd = ConnectTo(api_port_);
  // Only the head: the answer must come without the 5000 announced bytes.
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\nAuthorization: "
                      "Bearer " +
                          kToken + "\r\nContent-Length: 5000\r\n\r\n"));
  std::string pending;
  Reply reply = ReadReply(fd, &pending);
  EXPECT_EQ(reply.status, 413);
  EXPECT_TRUE(reply.body.starts_with("{\"error\":\"request body over api.max_body")) << reply.body;
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
  EXPECT_EQ(Call("POST", "/v1/streams/feed/entries", {}, std::string(4096, 'x')).status, 201);
  EXPECT_EQ(Call("POST", "/v1/streams/feed/entries", {}, std::string(4097, 'x')).status, 413);
  EXPECT_EQ(Len("feed"), 1);
}

TEST_F(ApiTest, AmbiguousFramingIsRefusedAndTheConnectionClosed) {
  StartApi();
  const std::string auth = "Authorization: Bearer " + kToken + "\r\n";
  const std::vector<std::string> smuggles = {
      // CL.TE: a front end using Content-Length would pass the "0" chunk and a hidden request.
      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length: 45\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET "
          "/v1/streams/feed/entries HTTP/1.1\r\n\r\n",
      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length: 3\r\n X-Folded: yes\r\n\r\nabc",
      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
          "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length : 3\r\n\r\nabc",
  };
  for (const auto& smuggle : smuggles) {
    const int fd = ConnectTo(api_port_);
    ASSERT_TRUE(SendAll(fd, smuggle));
    std::string pending;
    Reply reply = ReadReply(fd, &pending);
    EXPECT_EQ(reply.status, 400) << smuggle;
    EXPECT_EQ(reply.Header("connection"), "close") << smuggle;
    EXPECT_TRUE(ClosedByServer(fd)) << smuggle;
    ::close(fd);
  }
  EXPECT_EQ(Len("feed"), 0);
  // A chunked body alone is fine, and keep-alive carries the next request on the same connection.
  const int fd = ConnectTo(api_port_);
  ASSERT_TRUE(SendAll(
      fd, "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n" + auth +
              "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" +
              Head("GET", "/v1/streams/feed/entries", {"Authorization: Bearer " + kToken}, "")));
  std::string pending;
  Reply appended = ReadReply(fd, &pending);
  Reply read = ReadReply(fd, &pending);
  ::close(fd);
  ASSERT_EQ(appended.status, 201) << appended.body;
  EXPECT_EQ(FieldsOf("feed", JsonString(appended.body, "id"))[0].second, "abcde");
  EXPECT_EQ(read.status, 200);
  EXPECT_NE(read.body.find("\"data\":\"abcde\""), std::string::npos) << read.body;
}

TEST_F(ApiTest, ExpectContinueIsAnsweredBeforeTheBodyIsSent) {
  StartApi();
  const int fd = ConnectTo(api_port_);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\nAuthorization: "
                      "Bearer " +
                          kToken + "\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  std::string pending;
  const auto deadline = Clock::now() + seconds(10);
  while (pending.find("\r\n\r\n") == std::string::npos && ReadMore(fd, &pending, deadline)) {
  }
  EXPECT_EQ(pending, "HTTP/1.1 100 Continue\r\n\r\n");
  pending.clear();
  ASSERT_TRUE(SendAll(fd, "hello"));
  Reply reply = ReadReply(fd, &pending);
  ::close(fd);
  EXPECT_EQ(reply.status, 201) << reply.body;
  EXPECT_EQ(FieldsOf("feed", JsonString(reply.body, "id"))[0].second, "hello");
}

TEST_F(ApiTest, SlowSendersAndHugeHeadsAreCutOff) {
  StartApi();
  const int huge = ConnectTo(api_port_);
  ASSERT_TRUE(SendAll(huge, "GET /v1/streams/feed/entries HTTP/1.1\r\nX-Big: " +
                                std::string(20000, 'a') + "\r\n\r\n"));
  std::string pending;
  EXPECT_EQ(ReadReply(huge, &pending).status, 431);
  EXPECT_TRUE(ClosedByServer(huge));
  ::close(huge);

  // A request head that never completes is answered 408 once the request deadline (10 s from
  // its first byte) passes, and the connection closed. A connection that never sends a byte is
  // closed by the same deadline, not kept for the 60 s a served keep-alive client may idle.
  const int silent = ConnectTo(api_port_);
  const int slow = ConnectTo(api_port_);
  const auto started = Clock::now();
  ASSERT_TRUE(SendAll(slow, "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: x\r\n"));
  pending.clear();
  Reply reply = ReadReply(slow, &pending, seconds(30));
  EXPECT_EQ(reply.status, 408);
  EXPECT_GE(Clock::now() - started, seconds(9));
  EXPECT_TRUE(ClosedByServer(slow));
  ::close(slow);
  EXPECT_TRUE(ClosedByServer(silent, seconds(3)));
  EXPECT_LT(Clock::now() - started, seconds(20));
  ::close(silent);
  // Meanwhile and after, other clients are served.
  EXPECT_EQ(Call("GET", "/v1/streams/feed/entries").status, 200);
}

// A client that asks for a large page and never reads it holds its answer in the kernel's
// buffers: SIGTERM still ends the sidecar within a few seconds (Stop gives answers 2 s, then shuts
// their connections down), not after the 10 s an answer may take.
TEST_F(ApiTest, AClientThatDoesNotReadCannotHoldTheShutdown) {
  StartApi();
  const std::string value(16 * 1024, 'x');
  for (int i = 0; i < 1200; ++i) redis_->Run({"XADD", "feed", "*", "v", value});
  const int fd = ConnectTo(api_port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Head("GET", "/v1/streams/feed/entries?count=10000",
                               {"Authorization: Bearer " + kToken}, "")));
  // Wait until the answer stops arriving: the buffers are full and the server is blocked sending.
  int queued = -1;
  EXPECT_TRUE(Eventually(
      [&] {
        int now = 0;
        ::ioctl(fd, FIONREAD, &now);
        std::this_thread::sleep_for(milliseconds(300));
        int later = 0;
        ::ioctl(fd, FIONREAD, &later);
        queued = later;
        return later > 0 && later == now;
      },
      seconds(10)));
  const auto started = Clock::now();
  sidecar_->Terminate();
  const auto code = sidecar_->Wait(seconds(15));
  const auto took = Clock::now() - started;
  ::close(fd);
  ASSERT_TRUE(code.has_value()) << sidecar_->Logs();
  EXPECT_EQ(*code, 0) << sidecar_->Logs();
  EXPECT_LT(took, seconds(6)) << "stopped after "
                              << std::chrono::duration_cast<milliseconds>(took).count()
                              << " ms with " << queued << " bytes unread";
}

TEST_F(ApiTest, RedisDownAnswers503WithRetryAfterWithinADeadline) {
  StartApi();
  ASSERT_EQ(PostJson("feed", R"({"a":"1"})").status, 201);
  redis_->Kill();
  for (const std::string method : {"POST", "GET"}) {
    const auto started = Clock::now();
    Reply reply = method == "POST" ? PostJson("feed", R"({"a":"2"})")
                                   : Call("GET", "/v1/streams/feed/entries");
    EXPECT_EQ(reply.status, 503) << method << ": " << reply.body;
    EXPECT_EQ(reply.Header("retry-after"), "1") << method;
    EXPECT_TRUE(reply.body.starts_with("{\"error\":\"Redis unavailable")) << reply.body;
    EXPECT_LT(Clock::now() - started, seconds(5)) << method;
  }
  EXPECT_TRUE(
      Eventually([&] { return HttpGet(admin_port_, "/readyz").first == 503; }, seconds(10)));
  redis_->Start();
  EXPECT_TRUE(
      Eventually([&] { return PostJson("feed", R"({"a":"3"})").status == 201; }, seconds(15)));
}

// The API's pooled Redis sessions sat unused while Redis restarted: the first request after it
// (a batch append; single appends take the API loop's own connection) is answered as always, not
// 503 from a connection Redis had closed.
TEST_F(ApiTest, TheFirstRequestAfterARedisRestartIsAnswered) {
  StartApi();
  ASSERT_EQ(PostJson("feed", R"([{"a":"1"},{"a":"2"}])").status, 201);
  ASSERT_EQ(Call("GET", "/v1/streams/feed/entries").status, 200);
  redis_->Kill();
  redis_->Start();
  const Reply batch = PostJson("feed", R"([{"a":"3"},{"a":"4"}])");
  EXPECT_EQ(batch.status, 201) << batch.body;
  const Reply read = Call("GET", "/v1/streams/feed/entries");
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_NE(read.body.find(R"({"a":"4"})"), std::string::npos) << read.body;
}

TEST_F(ApiTest, FollowStreamsLaterEntriesInOrderAndResumesAfterLastEventId) {
  StartApi();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(JsonString(PostJson("feed", R"({"n":")" + std::to_string(i) + "\"}").body, "id"));
  // From the second entry on (since is inclusive), then live.
  SseClient follower;
  ASSERT_EQ(follower.Open(api_port_, "/v1/streams/feed/entries?follow=true&since=" + ids[1],
                          {"Authorization: Bearer " + kToken}),
            200)
      << follower.head();
  EXPECT_NE(follower.head().find("Content-Type: text/event-stream"), std::string::npos);
  ASSERT_TRUE(follower.WaitEvents(2, seconds(10)));
  for (int i = 3; i < 6; ++i)
    ids.push_back(JsonString(PostJson("feed", R"({"n":")" + std::to_string(i) + "\"}").body, "id"));
  ASSERT_TRUE(follower.WaitEvents(5, seconds(10)));
  EXPECT_EQ(follower.ids(), std::vector<std::string>(ids.begin() + 1, ids.end()));
  EXPECT_EQ(follower.events()[0].data, "{\"id\":\"" + ids[1] + "\",\"fields\":{\"n\":\"1\"}}");

  // A reconnect with Last-Event-ID gets exactly what came after it (Accept picks SSE too).
  SseClient resumed;
  ASSERT_EQ(resumed.Open(api_port_, "/v1/streams/feed/entries?since=" + ids[0],
                         {"Authorization: Bearer " + kToken, "Accept: text/event-stream",
                          "Last-Event-ID: " + ids[3]}),
            200);
  ASSERT_TRUE(resumed.WaitEvents(2, seconds(10)));
  EXPECT_EQ(resumed.ids(), (std::vector<std::string>{ids[4], ids[5]}));
  ids.push_back(JsonString(PostJson("feed", R"({"n":"6"})").body, "id"));
  ASSERT_TRUE(resumed.WaitEvents(3, seconds(10)));
  EXPECT_EQ(resumed.ids(), (std::vector<std::string>{ids[4], ids[5], ids[6]}));
}

// Follow checks Redis before its 200 head: a key that is not a stream is an error answer (not
// an endless empty event stream), and an outage is 503 + Retry-After like the other endpoints.
TEST_F(ApiTest, FollowAnswersErrorsBeforeTheEventStreamStarts) {
  StartApi();
  redis_->Run({"SET", "notes", "text"});
  SseClient wrong;
  EXPECT_EQ(wrong.Open(api_port_, "/v1/streams/notes/entries?follow=true",
                       {"Authorization: Bearer " + kToken}),
            500)
      << wrong.head();
  redis_->Kill();
  SseClient down;
  EXPECT_EQ(down.Open(api_port_, "/v1/streams/feed/entries?follow=true",
                      {"Authorization: Bearer " + kToken}),
            503)
      << down.head();
  EXPECT_NE(down.head().find("Retry-After: 1"), std::string::npos) << down.head();
}

// A stream without `archive: true` is read from Redis only: an archive that cannot be opened
// (its directory does not exist) answers 503 for an archived stream and does not touch the
// plain one.
TEST_F(ApiTest, PlainStreamsAreReadWithoutTheArchive) {
  const std::string db =
      std::filesystem::path(WriteConfig("")).parent_path().string() + "/missing-dir/log.db";
  StartApi("  - name: kept\n    archive: true\narchive: { url: \"sqlite://" + db + "\" }\n");
  const std::string id = JsonString(PostJson("feed", R"({"n":"0"})").body, "id");
  ASSERT_EQ(PostJson("kept", R"({"n":"0"})").status, 201);
  Reply archived = Call("GET", "/v1/streams/kept/entries");
  EXPECT_EQ(archived.status, 503) << archived.body;
  EXPECT_TRUE(archived.body.starts_with("{\"error\":\"archive unavailable: ")) << archived.body;
  EXPECT_EQ(archived.Header("retry-after"), "1");
  Reply read = Call("GET", "/v1/streams/feed/entries");
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_NE(read.body.find(id), std::string::npos) << read.body;
  SseClient follower;
  ASSERT_EQ(follower.Open(api_port_, "/v1/streams/feed/entries?follow=true&since=" + id,
                          {"Authorization: Bearer " + kToken}),
            200)
      << follower.head();
  ASSERT_TRUE(follower.WaitEvents(1, seconds(10)));
  EXPECT_EQ(follower.ids(), std::vector<std::string>{id});
}

TEST_F(ApiTest, FollowersOfAStreamShareOneBlockingRead) {
  StartApi();
  const std::string first = JsonString(PostJson("feed", R"({"n":"0"})").body, "id");
  SseClient a;
  SseClient b;
  ASSERT_EQ(a.Open(api_port_, "/v1/streams/feed/entries?follow=true&since=" + first,
                   {"Authorization: Bearer " + kToken}),
            200);
  ASSERT_EQ(b.Open(api_port_, "/v1/streams/feed/entries?follow=true&since=" + first,
                   {"Authorization: Bearer " + kToken}),
            200);
  ASSERT_TRUE(a.WaitEvents(1, seconds(10)));
  ASSERT_TRUE(b.WaitEvents(1, seconds(10)));
  EXPECT_TRUE(WaitMetric("streamcar_followers", {"stream=\"feed\""}, 2));
  auto blocked = [&] {
    std::string info(redis_->Run({"INFO", "clients"}).view().Str());
    const size_t at = info.find("blocked_clients:");
    return at == std::string::npos ? -1 : std::stoi(info.substr(at + 16));
  };
  EXPECT_TRUE(Eventually([&] { return blocked() == 1; }, seconds(10))) << blocked();
  // Both still get every new entry.
  const std::string next = JsonString(PostJson("feed", R"({"n":"1"})").body, "id");
  ASSERT_TRUE(a.WaitEvents(2, seconds(10)));
  ASSERT_TRUE(b.WaitEvents(2, seconds(10)));
  EXPECT_EQ(a.ids(), (std::vector<std::string>{first, next}));
  EXPECT_EQ(b.ids(), (std::vector<std::string>{first, next}));
  EXPECT_TRUE(Eventually([&] { return blocked() == 1; }, seconds(10))) << blocked();
}

TEST_F(ApiTest, IdleFollowGetsAKeepAliveCommentEvery15Seconds) {
  StartApi();
  SseClient follower;
  ASSERT_EQ(follower.Open(api_port_, "/v1/streams/feed/entries?follow=true",
                          {"Authorization: Bearer " + kToken}),
            200);
  const auto started = Clock::now();
  ASSERT_TRUE(follower.WaitComment(seconds(25)));
  EXPECT_GE(Clock::now() - started, seconds(14));
  EXPECT_TRUE(follower.events().empty());
}
}  // namespace
}  // namespace streamcar::testing
