// The request bytes of SPEC 3.1 and 3.4, exactly.

#include "sidecar/delivery/encoder.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "sidecar/delivery/base64.h"

namespace streamcar::delivery {
namespace {

StreamEntry Entry(std::vector<std::pair<std::string, std::string>> fields, int attempts = 1) {
  StreamEntry e;
  e.id = "1700000000000-0";
  e.fields = std::move(fields);
  e.attempts = attempts;
  return e;
}

std::string HeaderOf(const HttpRequest& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

class EncoderTest : public ::testing::Test {
 protected:
  config::HandlerConfig handler_;
  EncodeContext Context() { return {"orders", "billing", &handler_}; }
  HttpRequest Encode(const StreamEntry& entry) {
    HttpRequest r;
    std::string why;
    EXPECT_TRUE(EncodeEntry(Context(), entry, &r, &why)) << why;
    return r;
  }
};

TEST_F(EncoderTest, JsonEnvelopeIsExact) {
  auto r = Encode(Entry({{"field", "value"}, {"n", "42"}}));
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"id":"1700000000000-0","stream":"orders","group":"billing","attempts":1,)"
                    R"("payload":{"field":"value","n":"42"}})");
}

TEST_F(EncoderTest, CommonHeaders) {
  auto r = Encode(Entry({{"a", "b"}}, 3));
  EXPECT_EQ(HeaderOf(r, "Streamcar-Stream"), "orders");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Group"), "billing");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Id"), "1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Attempts"), "3");
  EXPECT_EQ(HeaderOf(r, "Idempotency-Key"), "orders/1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "traceparent"), "<absent>");
}

TEST_F(EncoderTest, TraceparentIsCopiedAndStaticHeadersAdded) {
  handler_.headers = {{"X-Team", "billing"}};
  auto r = Encode(Entry({{"traceparent", "00-abc-def-01"}, {"x", "y"}}));
  EXPECT_EQ(HeaderOf(r, "traceparent"), "00-abc-def-01");
  EXPECT_EQ(HeaderOf(r, "X-Team"), "billing");
}

TEST_F(EncoderTest, BinaryValuesAreBase64AndListed) {
  auto r = Encode(Entry({{"text", "h\xC3\xA9"}, {"blob", std::string("\xFF\x00\x01", 3)}}));
  EXPECT_EQ(r.body,
            R"({"id":"1700000000000-0","stream":"orders","group":"billing","attempts":1,)"
            "\"payload\":{\"text\":\"h\xC3\xA9\",\"blob\":\"/wAB\"},\"base64_fields\":[\"blob\"]}");
}

TEST_F(EncoderTest, DuplicateFieldsBecomeArraysInOrder) {
  auto r = Encode(Entry({{"tag", "a"}, {"x", "1"}, {"tag", "b"}, {"tag", "c"}}));
  EXPECT_EQ(r.body, R"({"id":"1700000000000-0","stream":"orders","group":"billing","attempts":1,)"
                    R"("payload":{"tag":["a","b","c"],"x":"1"}})");
}

TEST_F(EncoderTest, DuplicateFieldWithOneBinaryValueIsAllBase64) {
  auto r = Encode(Entry({{"v", "ok"}, {"v", "\xFF"}}));
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  ASSERT_FALSE(d.HasParseError());
  EXPECT_STREQ(d["payload"]["v"][0].GetString(), "b2s=");
  EXPECT_STREQ(d["payload"]["v"][1].GetString(), "/w==");
  EXPECT_STREQ(d["base64_fields"][0].GetString(), "v");
}

TEST_F(EncoderTest, EmptyValuesAndEscapes) {
  auto r =
      Encode(Entry({{"empty", ""}, {"quote", "a\"b\\c\n\t"}, {"nul", std::string("a\0b", 3)}}));
  rapidjson::Document d;
  d.Parse(r.body.c_str(), r.body.size());
  ASSERT_FALSE(d.HasParseError()) << r.body;
  EXPECT_STREQ(d["payload"]["empty"].GetString(), "");
  EXPECT_STREQ(d["payload"]["quote"].GetString(), "a\"b\\c\n\t");
  EXPECT_EQ(std::string(d["payload"]["nul"].GetString(), d["payload"]["nul"].GetStringLength()),
            std::string("a\0b", 3));
}

TEST_F(EncoderTest, BinaryFieldNamesAreBase64Listed) {
  auto r = Encode(Entry({{"\xFF", "v"}}));
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  ASSERT_FALSE(d.HasParseError()) << r.body;
  EXPECT_STREQ(d["payload"]["/w=="].GetString(), "v");
  EXPECT_STREQ(d["base64_names"][0].GetString(), "/w==");
}

TEST_F(EncoderTest, RawBodyAndContentType) {
  handler_.format = config::Format::kRaw;
  auto r = Encode(Entry({{"data", std::string("\x00\x01raw", 5)}, {"content_type", "text/csv"}}));
  EXPECT_EQ(r.body, std::string("\x00\x01raw", 5));
  EXPECT_EQ(r.content_type, "text/csv");
  auto plain = Encode(Entry({{"data", "x"}}));
  EXPECT_EQ(plain.content_type, "application/octet-stream");
  EXPECT_EQ(HeaderOf(plain, "Idempotency-Key"), "orders/1700000000000-0");
}

TEST_F(EncoderTest, RawWithoutItsFieldIsInvalid) {
  handler_.format = config::Format::kRaw;
  HttpRequest r;
  std::string why;
  EXPECT_FALSE(EncodeEntry(Context(), Entry({{"other", "x"}}), &r, &why));
  EXPECT_NE(why.find("\"data\""), std::string::npos);
}

TEST_F(EncoderTest, CloudEventsBinaryMode) {
  handler_.format = config::Format::kCloudEvents;
  auto r = Encode(Entry(
      {{"type", "order.created"}, {"data", "{\"a\":1}"}, {"content_type", "application/json"}}));
  EXPECT_EQ(HeaderOf(r, "ce-specversion"), "1.0");
  EXPECT_EQ(HeaderOf(r, "ce-id"), "1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "ce-source"), "/streams/orders");
  EXPECT_EQ(HeaderOf(r, "ce-type"), "order.created");
  EXPECT_EQ(HeaderOf(r, "ce-time"), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(r.body, "{\"a\":1}");
  EXPECT_EQ(r.content_type, "application/json");
}

TEST_F(EncoderTest, CloudEventsWithoutRawFieldSendsThePayloadObject) {
  handler_.format = config::Format::kCloudEvents;
  auto r = Encode(Entry({{"k", "v"}, {"bin", "\xFE"}}));
  EXPECT_EQ(HeaderOf(r, "ce-type"), "streamcar.entry");
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"k":"v","bin":"/g=="})");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Base64-Fields"), "bin");
}

TEST_F(EncoderTest, BatchEnvelope) {
  auto a = Entry({{"x", "1"}}, 1);
  auto b = Entry({{"y", "\xFF"}}, 2);
  b.id = "1700000000001-0";
  HttpRequest r;
  EncodeBatch(Context(), {&a, &b}, &r);
  EXPECT_EQ(
      r.body,
      R"({"stream":"orders","group":"billing","entries":[)"
      R"({"id":"1700000000000-0","attempts":1,"payload":{"x":"1"}},)"
      R"({"id":"1700000000001-0","attempts":2,"payload":{"y":"/w=="},"base64_fields":["y"]}]})");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Batch-Size"), "2");
}

}  // namespace
}  // namespace streamcar::delivery
