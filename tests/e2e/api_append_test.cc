// Appends through the log API against the binary and a real redis-server (SPEC 10, issue 29):
// which ids a writer may mint, key names of streams that differ only by braces, batch appends.

#include <httplib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/log_api_fixture.h"

namespace streamcar::testing {
namespace {

struct Answer {
  int status = 0;  // 0: no answer
  std::string body;
};

// Redis's clock in milliseconds (TIME): the clock the append's range check reads.
int64_t RedisNowMs(const RedisServer& redis) {
  auto time = redis.Run({"TIME"});
  return std::stoll(std::string(time.view()[0].Str())) * 1000 +
         std::stoll(std::string(time.view()[1].Str())) / 1000;
}

class ApiAppendTest : public LogApiTest {
 protected:
  // POST `body` as JSON to `stream` (its name percent-encoded by the caller where needed).
  Answer Post(const std::string& stream, const std::string& body,
              const httplib::Headers& headers = {}) {
    httplib::Client client("127.0.0.1", api_port_);
    client.set_read_timeout(std::chrono::seconds(10));
    auto result =
        client.Post("/v1/streams/" + stream + "/entries", headers, body, "application/json");
    if (!result) return {};
    return {result->status, result->body};
  }
};

// Review F4: the maximum id made every later append fail with 500 forever, and a far-future id
// future-dated every later automatic id. Both are refused with 400 and append nothing; an id
// within api.max_future_skew (default 1m) of Redis's clock is still kept.
TEST_F(ApiAppendTest, AnIdTooFarAheadOrTheMaximumIdIsRefusedAndTheStreamStaysUsable) {
  StartApi("  - name: feed\n");
  const std::string out_of_range = R"({"error":"id_out_of_range"})";
  const std::string far = std::to_string(RedisNowMs(*redis_) + 61'000) + "-0";
  for (const std::string& id :
       {std::string("18446744073709551615-18446744073709551615"), std::string("99999999999999-0"),
        far, std::string("18446744073709551615-0")}) {
    Answer refused = Post("feed", R"({"a":"1"})", {{"Streamcar-Entry-Id", id}});
    EXPECT_EQ(refused.status, 400) << id << ": " << refused.body;
    EXPECT_EQ(refused.body, out_of_range) << id;
  }
  EXPECT_EQ(redis_->Run({"EXISTS", "feed"}).view().Integer(), 0);

  const std::string near = std::to_string(RedisNowMs(*redis_) + 30'000) + "-5";
  Answer kept = Post("feed", R"({"a":"near"})", {{"Streamcar-Entry-Id", near}});
  ASSERT_EQ(kept.status, 201) << kept.body;
  EXPECT_EQ(JsonString(kept.body, "id"), near);
  // The stream stays usable: an automatic id comes after the kept one.
  Answer plain = Post("feed", R"({"a":"plain"})");
  ASSERT_EQ(plain.status, 201) << plain.body;
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 2);
  // A refused id spends no idempotency key: the retry with no id appends.
  Answer keyed = Post("feed", R"({"a":"k"})",
                      {{"Idempotency-Key", "k1"}, {"Streamcar-Entry-Id", "99999999999999-0"}});
  EXPECT_EQ(keyed.status, 400) << keyed.body;
  EXPECT_EQ(Post("feed", R"({"a":"k"})", {{"Idempotency-Key", "k1"}}).status, 201);
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 3);
}

// api.max_future_skew is read from the configuration: at 0s an id five seconds ahead is refused.
TEST_F(ApiAppendTest, MaxFutureSkewIsConfigurable) {
  StartApi("  - name: feed\n", "  max_future_skew: 0s\n");
  const std::string ahead = std::to_string(RedisNowMs(*redis_) + 5'000) + "-0";
  EXPECT_EQ(Post("feed", R"({"a":"1"})", {{"Streamcar-Entry-Id", ahead}}).status, 400);
  const std::string past = std::to_string(RedisNowMs(*redis_) - 5'000) + "-0";
  EXPECT_EQ(Post("feed", R"({"a":"1"})", {{"Streamcar-Entry-Id", past}}).status, 201);
}

// Review F5's reproduction (hashtag_collision.py): streams "feed2" and "{feed2}" shared their
// idempotency keys (a POST to "{feed2}" answered 200 with feed2's receipt and appended nothing)
// and their archive keys (the archive's watermark of one hid the other's entries from reads).
TEST_F(ApiAppendTest, StreamsXAndBracedXShareNoKeys) {
  const std::string archive = MakeTempDir("streamcar-htc-");
  StartApi({.streams =
                "  - name: feed2\n    archive: true\n    retention: { max_len: 2, interval: 1s }\n"
                "  - name: \"{feed2}\"\n    archive: true\n"
                "    retention: { max_len: 1000, interval: 1s }\n",
            .top_extra = "archive: { url: \"sqlite://" + archive + "/a.db\", interval: 1s }\n"});
  Answer plain = Post("feed2", R"({"i":"0"})", {{"Idempotency-Key", "K"}});
  ASSERT_EQ(plain.status, 201) << plain.body;
  Answer braced = Post("%7Bfeed2%7D", R"({"i":"0"})", {{"Idempotency-Key", "K"}});
  EXPECT_EQ(braced.status, 201) << braced.body;
  EXPECT_EQ(JsonString(braced.body, "stream"), "{feed2}");
  EXPECT_EQ(redis_->Run({"XLEN", "{feed2}"}).view().Integer(), 1);

  std::vector<std::string> appended = {JsonString(braced.body, "id")};
  for (int i = 1; i <= 5; ++i) {
    appended.push_back(JsonString(Post("%7Bfeed2%7D", R"({"i":"b"})").body, "id"));
  }
  for (int i = 1; i <= 10; ++i) ASSERT_EQ(Post("feed2", R"({"i":"a"})").status, 201);
  // feed2 folds and trims (1 s beats), then "{feed2}" must read back every entry it was given.
  EXPECT_TRUE(Eventually(
      [&] {
        return redis_->Run({"XLEN", "feed2"}).view().Integer() < 11;
      },
      seconds(15)));
  std::this_thread::sleep_for(seconds(2));
  httplib::Client client("127.0.0.1", api_port_);
  auto read = client.Get("/v1/streams/%7Bfeed2%7D/entries?count=1000");
  ASSERT_TRUE(read);
  ASSERT_EQ(read->status, 200) << read->body;
  for (const auto& id : appended) {
    EXPECT_NE(read->body.find("\"" + id + "\""), std::string::npos)
        << id << " missing: " << read->body;
  }
  std::filesystem::remove_all(archive);
}

// The "ids" of a batch's answer, in order.
std::vector<std::string> ReceiptIds(const std::string& json) {
  std::vector<std::string> ids;
  const size_t open = json.find("\"ids\":[");
  if (open == std::string::npos) return ids;
  const std::string list = json.substr(open + 7, json.find(']', open) - open - 7);
  for (size_t at = list.find('"'); at != std::string::npos; at = list.find('"', at)) {
    const size_t end = list.find('"', at + 1);
    ids.push_back(list.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return ids;
}

// Issue 29: POST .../entries with a JSON array appends one entry per element, in order, in one
// script call, and answers 201 {"stream":..,"ids":[...]} (SPEC 10).
TEST_F(ApiAppendTest, ABatchAppendsEveryEntryInOrderWithOneReceiptEach) {
  StartApi("  - name: feed\n");
  Answer batch = Post("feed", R"([{"n":"0"}, {"n":"1","x":{"y":2}}, {"n":"2"}])");
  ASSERT_EQ(batch.status, 201) << batch.body;
  const auto ids = ReceiptIds(batch.body);
  ASSERT_EQ(ids.size(), 3u) << batch.body;
  EXPECT_EQ(batch.body, R"({"stream":"feed","ids":[")" + ids[0] + R"(",")" + ids[1] + R"(",")" +
                            ids[2] + R"("]})");
  auto range = redis_->Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(range.view().Size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(range.view()[i][0].Str(), ids[i]);
    EXPECT_EQ(range.view()[i][1][1].Str(), std::to_string(i));
  }
  EXPECT_EQ(range.view()[1][1][3].Str(), R"({"y":2})");
}

// A batch's Idempotency-Key K gives entry i the key "K/i" (SPEC 10): a retry of the whole batch
// appends nothing and answers the first ids, and entry i is the same append as a single POST
// with "K/i".
TEST_F(ApiAppendTest, ABatchsIdempotencyKeyHoldsPerEntry) {
  StartApi("  - name: feed\n");
  Answer single = Post("feed", R"({"n":"before"})", {{"Idempotency-Key", "B/1"}});
  ASSERT_EQ(single.status, 201) << single.body;
  Answer first = Post("feed", R"([{"n":"0"}, {"n":"1"}, {"n":"2"}])", {{"Idempotency-Key", "B"}});
  ASSERT_EQ(first.status, 201) << first.body;
  auto ids = ReceiptIds(first.body);
  ASSERT_EQ(ids.size(), 3u) << first.body;
  EXPECT_EQ(ids[1], JsonString(single.body, "id")) << "entry 1 repeats the single append B/1";
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 3);

  Answer retry = Post("feed", R"([{"n":"0"}, {"n":"1"}, {"n":"2"}])", {{"Idempotency-Key", "B"}});
  EXPECT_EQ(retry.status, 201) << retry.body;
  EXPECT_EQ(ReceiptIds(retry.body), ids);
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 3);
}

TEST_F(ApiAppendTest, ABatchIsBoundedAndAMalformedOneAppendsNothing) {
  StartApi("  - name: feed\n", "  max_body: 64KiB\n");
  auto batch_of = [](size_t entries) {
    std::string body = "[";
    for (size_t i = 0; i < entries; ++i) body += std::string(i > 0 ? "," : "") + R"({"a":"1"})";
    return body + "]";
  };
  EXPECT_EQ(Post("feed", batch_of(1000)).status, 201);
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 1000);
  Answer too_many = Post("feed", batch_of(1001));
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  EXPECT_EQ(Post("feed", batch_of(8000)).status, 413);  // over api.max_body
  for (const char* bad : {R"([{"a":"1"}, {}])", R"([{"a":"1"}, "x"])", "[]", R"([{"a":"1"},])"}) {
    Answer refused = Post("feed", bad);
    EXPECT_EQ(refused.status, 400) << bad << ": " << refused.body;
  }
  Answer with_id = Post("feed", batch_of(2), {{"Streamcar-Entry-Id", "1-1"}});
  EXPECT_EQ(with_id.status, 400) << with_id.body;
  EXPECT_EQ(redis_->Run({"XLEN", "feed"}).view().Integer(), 1000);
}

}  // namespace
}  // namespace streamcar::testing
