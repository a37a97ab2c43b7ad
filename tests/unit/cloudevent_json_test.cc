// formats cloudevents-structured and dapr (SPEC 11): the event object, byte for byte where the
// contract fixes it, and untrusted entry data that must stay data.

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/reader.h>

#include "sidecar/delivery/base64.h"
#include "sidecar/delivery/encoder.h"

namespace streamcar::delivery {
namespace {

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

StreamEntry Entry(std::vector<std::pair<std::string, std::string>> fields) {
  StreamEntry e;
  e.id = "1700000000000-0";
  e.fields = std::move(fields);
  e.attempts = 2;
  return e;
}

std::string HeaderOf(const HttpRequest& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

class CloudEventJsonTest : public ::testing::Test {
 protected:
  config::HandlerConfig handler_;
  HttpRequest Encode(const StreamEntry& entry, config::Format format,
                     const std::string& stream = "orders") {
    handler_.format = format;
    HttpRequest r;
    std::string why;
    EXPECT_TRUE(EncodeEntry({stream, "billing", &handler_}, entry, &r, &why)) << why;
    return r;
  }
  static rapidjson::Document Parse(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.data(), body.size());
    EXPECT_FALSE(d.HasParseError()) << body;
    return d;
  }
};

TEST_F(CloudEventJsonTest, StructuredEventWithoutRawFieldIsExact) {
  auto r = Encode(Entry({{"type", "order.created"}, {"n", "42"}}),
                  config::Format::kCloudEventsStructured);
  EXPECT_EQ(r.content_type, "application/cloudevents+json");
  EXPECT_EQ(r.body,
            R"({"specversion":"1.0","id":"1700000000000-0","source":"/streams/orders",)"
            R"("type":"order.created","time":"2023-11-14T22:13:20.000Z",)"
            R"("datacontenttype":"application/json","data":{"type":"order.created","n":"42"}})");
  // SPEC 3.1's headers are sent in every format.
  EXPECT_EQ(HeaderOf(r, "Streamcar-Attempts"), "2");
  EXPECT_EQ(HeaderOf(r, "Idempotency-Key"), "orders/1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "ce-id"), "<absent>");
}

TEST_F(CloudEventJsonTest, DaprEventAddsTopicPubsubnameAndTrace) {
  auto r = Encode(Entry({{"data", R"({"orderId": 12345678901234567890})"},
                         {"content_type", "application/json"},
                         {"traceparent", kTraceparent},
                         {"tracestate", "k=v"}}),
                  config::Format::kDapr);
  EXPECT_EQ(r.content_type, "application/cloudevents+json");
  EXPECT_EQ(r.body,
            R"({"specversion":"1.0","id":"1700000000000-0","source":"/streams/orders",)"
            R"("type":"streamcar.entry","time":"2023-11-14T22:13:20.000Z","topic":"orders",)"
            R"("pubsubname":"billing","traceparent":")" +
                std::string(kTraceparent) + R"(","traceid":")" + kTraceparent +
                R"(","tracestate":"k=v","datacontenttype":"application/json",)"
                R"("data":{"orderId":12345678901234567890}})");
  EXPECT_EQ(HeaderOf(r, "traceparent"), kTraceparent);
}

// What a Dapr publisher wrote (XADD <topic> * data <its CloudEvent>) is delivered as the same
// event as any other entry: streamcar's id, source, specversion, time, topic, pubsubname and
// trace; the publisher's type and data, nested members untouched.
TEST_F(CloudEventJsonTest, ADaprPublishersEventKeepsItsDataUnderStreamcarsAttributes) {
  const std::string published =
      R"({"specversion":"1.0","id":"5929aaac","source":"checkout","type":"com.dapr.event.sent",)"
      R"("topic":"forged","pubsubname":"x","traceparent":"bad","datacontenttype":)"
      R"("application/json","data":{"orderId":1,"topic":{"keep":[1,{"pubsubname":2}]}}})";
  auto r =
      Encode(Entry({{"data", published}, {"traceparent", kTraceparent}}), config::Format::kDapr);
  EXPECT_EQ(r.content_type, "application/cloudevents+json");
  EXPECT_EQ(r.body,
            R"({"specversion":"1.0","id":"1700000000000-0","source":"/streams/orders",)"
            R"("type":"com.dapr.event.sent","time":"2023-11-14T22:13:20.000Z","topic":"orders",)"
            R"("pubsubname":"billing","traceparent":")" +
                std::string(kTraceparent) + R"(","traceid":")" + kTraceparent +
                R"(","datacontenttype":"application/json","data":{"orderId":1,)"
                R"("topic":{"keep":[1,{"pubsubname":2}]}}})");
  // Not a published event: no specversion, a content_type of its own, or another format.
  auto plain = Parse(Encode(Entry({{"data", R"({"orderId":1})"}}), config::Format::kDapr).body);
  EXPECT_TRUE(plain.HasMember("data_base64"));
  auto typed = Parse(Encode(Entry({{"data", published}, {"content_type", "application/json"}}),
                            config::Format::kDapr)
                         .body);
  EXPECT_EQ(std::string(typed["type"].GetString()), "streamcar.entry");
  auto structured =
      Parse(Encode(Entry({{"data", published}}), config::Format::kCloudEventsStructured).body);
  EXPECT_EQ(std::string(structured["type"].GetString()), "streamcar.entry");
}

// Entry data is untrusted: a published event chooses none of streamcar's attributes, brings only
// CloudEvents attributes with scalar values, and an object that is no well-formed event is data.
TEST_F(CloudEventJsonTest, APublishedEventChoosesNoneOfStreamcarsAttributes) {
  const std::string forged =
      R"({"specversion":"0.3","id":"forged","source":"forged","time":"1999-01-01T00:00:00Z",)"
      R"("subject":"o-1","dataschema":"https://x/s","expiration":"2099-01-01T00:00:00Z",)"
      R"("count":3,"Bad_Key":"x","nested":{"a":1},"data_base64":"AAE="})";
  auto d = Parse(Encode(Entry({{"data", forged}}), config::Format::kDapr).body);
  EXPECT_EQ(std::string(d["specversion"].GetString()), "1.0");
  EXPECT_EQ(std::string(d["id"].GetString()), "1700000000000-0");
  EXPECT_EQ(std::string(d["source"].GetString()), "/streams/orders");
  EXPECT_EQ(std::string(d["time"].GetString()), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(std::string(d["type"].GetString()), "streamcar.entry");  // it gave none
  EXPECT_EQ(std::string(d["subject"].GetString()), "o-1");
  EXPECT_EQ(std::string(d["dataschema"].GetString()), "https://x/s");
  EXPECT_EQ(std::string(d["expiration"].GetString()), "2099-01-01T00:00:00Z");
  EXPECT_EQ(d["count"].GetInt(), 3);
  EXPECT_EQ(std::string(d["data_base64"].GetString()), "AAE=");
  EXPECT_FALSE(d.HasMember("Bad_Key"));
  EXPECT_FALSE(d.HasMember("nested"));
  EXPECT_FALSE(d.HasMember("traceparent"));
  for (const std::string not_an_event : {
           R"({"specversion":"1.0","id":"a","id":"b","data":1})",     // a key twice
           R"({"specversion":"1.0","type":7,"data":1})",              // a non-string type
           R"({"specversion":1,"data":1})",                           // nor specversion
           R"({"specversion":"1.0","data":1,"data_base64":"AAE="})",  // data twice over
           R"({"specversion":"1.0","traceparent":null,"data":1})",    // a non-string trace
       }) {
    auto event = Parse(Encode(Entry({{"data", not_an_event}}), config::Format::kDapr).body);
    EXPECT_EQ(std::string(event["id"].GetString()), "1700000000000-0") << not_an_event;
    EXPECT_EQ(Base64Decode(event["data_base64"].GetString()).value(), not_an_event);
  }
}

// A Dapr publisher puts the producer's trace in the event, not in a field of the entry: it is
// the delivery's (header and attributes) when the entry has no valid traceparent of its own.
TEST_F(CloudEventJsonTest, APublishedEventsTraceIsTheDeliverysWhenTheEntryHasNone) {
  const std::string other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const std::string published =
      R"({"specversion":"1.0","traceparent":")" + other + R"(","tracestate":"k=v","data":1})";
  auto r = Encode(Entry({{"data", published}}), config::Format::kDapr);
  EXPECT_EQ(HeaderOf(r, "traceparent"), other);
  EXPECT_EQ(HeaderOf(r, "tracestate"), "k=v");
  auto d = Parse(r.body);
  EXPECT_EQ(std::string(d["traceparent"].GetString()), other);
  EXPECT_EQ(std::string(d["traceid"].GetString()), other);
  EXPECT_EQ(std::string(d["tracestate"].GetString()), "k=v");
  // The entry's own traceparent comes first; an invalid one in the event is no trace.
  auto own =
      Encode(Entry({{"data", published}, {"traceparent", kTraceparent}}), config::Format::kDapr);
  EXPECT_EQ(HeaderOf(own, "traceparent"), kTraceparent);
  EXPECT_EQ(HeaderOf(own, "tracestate"), "<absent>");
  auto invalid = Encode(Entry({{"data", R"({"specversion":"1.0","traceparent":"00-zz"})"}}),
                        config::Format::kDapr);
  EXPECT_EQ(HeaderOf(invalid, "traceparent"), "<absent>");
  // Only format dapr reads a published event.
  auto structured = Encode(Entry({{"data", published}}), config::Format::kCloudEventsStructured);
  EXPECT_EQ(HeaderOf(structured, "traceparent"), "<absent>");
}

// A shard's entries name the subscription's stream as Dapr's topic, the stream the app
// subscribed to; the source stays the shard's stream, where the entry id is unique.
TEST_F(CloudEventJsonTest, AShardsTopicIsTheSubscriptionsStream) {
  handler_.dapr_topic = "orders";
  auto d = Parse(Encode(Entry({{"k", "v"}}), config::Format::kDapr, "orders:{3}").body);
  EXPECT_EQ(std::string(d["topic"].GetString()), "orders");
  EXPECT_EQ(std::string(d["source"].GetString()), "/streams/orders:%7B3%7D");
}

TEST_F(CloudEventJsonTest, AnInvalidTraceparentIsLeftOut) {
  auto r =
      Encode(Entry({{"traceparent", "00-zz-\r\nx"}, {"tracestate", "k=v"}}), config::Format::kDapr);
  auto d = Parse(r.body);
  EXPECT_FALSE(d.HasMember("traceparent"));
  EXPECT_FALSE(d.HasMember("traceid"));
  EXPECT_FALSE(d.HasMember("tracestate"));
  EXPECT_EQ(std::string(d["topic"].GetString()), "orders");
}

// The data member by the entry's content_type: JSON as JSON, text as a string, octet-stream and
// bytes that are not UTF-8 in data_base64, JSON-typed bytes that do not parse in data_base64.
// Without a content_type: text that is not JSON as a text/plain string, anything else base64.
TEST_F(CloudEventJsonTest, DataByContentType) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> fields;
    const char* content_type;
    const char* member;
  };
  const std::string binary("\xff\x00\x01", 3);
  const std::vector<Case> cases = {
      {{{"data", "hello \"world\"\n"}, {"content_type", "text/plain"}}, "text/plain", "data"},
      {{{"data", "[1,2]"}, {"content_type", "application/cloudevents-x+json; charset=utf-8"}},
       "application/cloudevents-x+json; charset=utf-8",
       "data"},
      // No content_type: text that is not JSON is a string; JSON text and bytes go base64.
      {{{"data", "caf\xc3\xa9"}}, "text/plain", "data"},
      {{{"data", "{\"a\":1}"}}, "application/octet-stream", "data_base64"},
      {{{"data", binary}}, "application/octet-stream", "data_base64"},
      {{{"data", binary}, {"content_type", "text/plain"}}, "text/plain", "data_base64"},
      {{{"data", "{\"a\":1} trailing"}, {"content_type", "application/json"}},
       "application/json",
       "data_base64"},
  };
  for (const auto& c : cases) {
    auto r = Encode(Entry(c.fields), config::Format::kCloudEventsStructured);
    auto d = Parse(r.body);
    EXPECT_EQ(std::string(d["datacontenttype"].GetString()), c.content_type) << r.body;
    EXPECT_TRUE(d.HasMember(c.member)) << r.body;
    EXPECT_FALSE(d.HasMember(std::string(c.member) == "data" ? "data_base64" : "data")) << r.body;
    if (std::string(c.member) == "data_base64") {
      EXPECT_EQ(Base64Decode(d["data_base64"].GetString()).value(), c.fields[0].second);
    }
  }
  auto text = Parse(Encode(Entry(cases[0].fields), config::Format::kCloudEventsStructured).body);
  EXPECT_EQ(std::string(text["data"].GetString()), "hello \"world\"\n");
}

// Whoever can XADD controls every value: quotes, control bytes and a type that is not UTF-8
// must all stay inside one valid event.
TEST_F(CloudEventJsonTest, HostileEntryDataStaysData) {
  auto r = Encode(Entry({{"type", "x\",\"id\":\"forged\x01\xff"},
                         {"data", "{\"a\":\"\\u0000\"}"},
                         {"content_type", "application/json"}}),
                  config::Format::kDapr, "a\"b/c");
  auto d = Parse(r.body);
  EXPECT_EQ(std::string(d["id"].GetString()), "1700000000000-0");
  EXPECT_EQ(std::string(d["type"].GetString()), "x%22,%22id%22:%22forged%01%FF");
  EXPECT_EQ(std::string(d["source"].GetString()), "/streams/a%22b%2Fc");
  EXPECT_EQ(std::string(d["topic"].GetString()), "a\"b/c");
  EXPECT_EQ(d["data"]["a"].GetStringLength(), 1u);
}

// JSON data nested far deeper than any stack is copied without recursion (a recursive parser
// would crash the sidecar on one entry).
TEST_F(CloudEventJsonTest, DeeplyNestedJsonDataDoesNotRecurse) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto r = Encode(Entry({{"data", deep}, {"content_type", "application/json"}}),
                  config::Format::kCloudEventsStructured);
  EXPECT_NE(r.body.find(R"("data":[[[[)"), std::string::npos);
  rapidjson::BaseReaderHandler<> ignore;
  rapidjson::Reader reader;
  rapidjson::StringStream stream(r.body.c_str());
  EXPECT_FALSE(reader.Parse<rapidjson::kParseIterativeFlag>(stream, ignore).IsError());
}

TEST_F(CloudEventJsonTest, BinaryPayloadFieldsAreNamedInTheHeader) {
  auto r = Encode(Entry({{"img", std::string("\xff\xfe", 2)}, {"k", "v"}}),
                  config::Format::kCloudEventsStructured);
  EXPECT_EQ(HeaderOf(r, "Streamcar-Base64-Fields"), "img");
  auto d = Parse(r.body);
  EXPECT_EQ(std::string(d["data"]["img"].GetString()), "//4=");
}

TEST_F(CloudEventJsonTest, AnInvalidContentTypeRefusesTheEntry) {
  handler_.format = config::Format::kDapr;
  HttpRequest r;
  std::string why;
  EXPECT_FALSE(EncodeEntry({"orders", "billing", &handler_},
                           Entry({{"data", "x"}, {"content_type", "text/plain\r\nX: y"}}), &r,
                           &why));
  EXPECT_NE(why.find("content_type"), std::string::npos) << why;
}

TEST_F(CloudEventJsonTest, BatchIsACloudEventsJsonBatch) {
  handler_.format = config::Format::kCloudEventsStructured;
  StreamEntry a = Entry({{"n", "1"}});
  StreamEntry b = Entry({{"bin", std::string("\xff", 1)}});
  b.id = "1700000000001-0";
  HttpRequest r;
  std::string why;
  ASSERT_TRUE(EncodeBatch({"orders", "billing", &handler_}, {&a, &b}, &r, &why)) << why;
  EXPECT_EQ(r.content_type, "application/cloudevents-batch+json");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Batch-Size"), "2");
  auto d = Parse(r.body);
  ASSERT_TRUE(d.IsArray());
  ASSERT_EQ(d.Size(), 2u);
  EXPECT_EQ(std::string(d[0]["id"].GetString()), "1700000000000-0");
  EXPECT_FALSE(d[0].HasMember("streamcarbase64fields"));
  EXPECT_EQ(std::string(d[1]["id"].GetString()), "1700000000001-0");
  EXPECT_EQ(std::string(d[1]["streamcarbase64fields"].GetString()), "bin");
}

}  // namespace
}  // namespace streamcar::delivery
