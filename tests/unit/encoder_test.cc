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

// SPEC 9: a shard's entries carry the shard and the fence token of the delivering member's grant,
// in headers and in the envelope; a plain subscription's carry neither (CommonHeaders above).
TEST_F(EncoderTest, AShardsEntriesCarryTheShardAndTheFence) {
  EncodeContext context{"orders:{3}", "billing", &handler_, ShardStamp{3, 1742}};
  HttpRequest one;
  std::string why;
  ASSERT_TRUE(EncodeEntry(context, Entry({{"n", "1"}}), &one, &why)) << why;
  EXPECT_EQ(HeaderOf(one, "Streamcar-Shard"), "3");
  EXPECT_EQ(HeaderOf(one, "Streamcar-Fence"), "1742");
  EXPECT_EQ(one.body, R"({"id":"1700000000000-0","stream":"orders:{3}","group":"billing",)"
                      R"("shard":3,"fence":1742,"attempts":1,"payload":{"n":"1"}})");
  const StreamEntry entry = Entry({{"n", "1"}});
  HttpRequest batch;
  ASSERT_TRUE(EncodeBatch(context, {&entry}, &batch, &why)) << why;
  EXPECT_EQ(HeaderOf(batch, "Streamcar-Fence"), "1742");
  EXPECT_NE(batch.body.find(R"("group":"billing","shard":3,"fence":1742,"entries":[)"),
            std::string::npos)
      << batch.body;
  EXPECT_EQ(HeaderOf(Encode(entry), "Streamcar-Shard"), "<absent>");
}

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// SPEC 3.1's headers are sent "in every format", a shard's requests included (SPEC 9 only adds
// two): the Idempotency-Key names the shard's own stream, whose ids are its own.
TEST_F(EncoderTest, AShardsEntryCarriesEveryCommonHeaderToo) {
  handler_.headers = {{"X-Team", "billing"}};
  EncodeContext context{"orders:{3}", "billing", &handler_, ShardStamp{3, 1742}};
  HttpRequest r;
  std::string why;
  ASSERT_TRUE(EncodeEntry(context, Entry({{"traceparent", kTraceparent}}, 2), &r, &why)) << why;
  EXPECT_EQ(HeaderOf(r, "Streamcar-Stream"), "orders:{3}");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Group"), "billing");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Id"), "1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Attempts"), "2");
  EXPECT_EQ(HeaderOf(r, "Idempotency-Key"), "orders:{3}/1700000000000-0");
  EXPECT_EQ(HeaderOf(r, "traceparent"), kTraceparent);
  EXPECT_EQ(HeaderOf(r, "X-Team"), "billing");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Shard"), "3");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Fence"), "1742");
}

TEST_F(EncoderTest, TraceparentIsCopiedAndStaticHeadersAdded) {
  handler_.headers = {{"X-Team", "billing"}};
  auto r = Encode(
      Entry({{"traceparent", kTraceparent}, {"tracestate", "congo=t61rcWkgMzE"}, {"x", "y"}}));
  EXPECT_EQ(HeaderOf(r, "traceparent"), kTraceparent);
  EXPECT_EQ(HeaderOf(r, "tracestate"), "congo=t61rcWkgMzE");
  EXPECT_EQ(HeaderOf(r, "X-Team"), "billing");
}

TEST_F(EncoderTest, InvalidTraceContextIsLeftOutAndTheEntryStillDelivered) {
  // Not W3C Trace Context: left out, as the recommendation says; the entry is still encoded.
  auto r = Encode(Entry({{"traceparent", "00-abc-def-01"}, {"tracestate", "a=b"}, {"x", "y"}}));
  EXPECT_EQ(HeaderOf(r, "traceparent"), "<absent>");
  EXPECT_EQ(HeaderOf(r, "tracestate"), "<absent>");  // means nothing without a traceparent
  EXPECT_NE(r.body.find("\"traceparent\":\"00-abc-def-01\""), std::string::npos);  // in the body
  auto bad_state = Encode(Entry({{"traceparent", kTraceparent}, {"tracestate", "A=b"}}));
  EXPECT_EQ(HeaderOf(bad_state, "traceparent"), kTraceparent);
  EXPECT_EQ(HeaderOf(bad_state, "tracestate"), "<absent>");
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
  std::string why;
  ASSERT_TRUE(EncodeBatch(Context(), {&a, &b}, &r, &why)) << why;
  EXPECT_EQ(
      r.body,
      R"({"stream":"orders","group":"billing","entries":[)"
      R"({"id":"1700000000000-0","attempts":1,"payload":{"x":"1"}},)"
      R"({"id":"1700000000001-0","attempts":2,"payload":{"y":"/w=="},"base64_fields":["y"]}]})");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Batch-Size"), "2");
}

// --- SPEC 3.1 "Entry data never becomes HTTP framing" ----------------------------------------

// Checked here byte by byte, independently of the product's own check.
bool HasFramingByte(std::string_view value) {
  return value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

void ExpectNoFramingBytes(const HttpRequest& r, const std::string& context) {
  EXPECT_FALSE(HasFramingByte(r.content_type)) << context << ": Content-Type";
  for (const auto& [name, value] : r.headers) {
    EXPECT_FALSE(HasFramingByte(name)) << context << ": header name " << name;
    EXPECT_FALSE(HasFramingByte(value)) << context << ": header " << name;
  }
}

const std::vector<std::pair<std::string, std::string>>& HostileValues() {
  static const std::vector<std::pair<std::string, std::string>> values = {
      {"CR", "a\rb"},
      {"LF", "a\nb"},
      {"CRLF header", "evil\r\nX-Injected: 1"},
      {"request split", "x\r\n\r\nPOST /smuggled HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"},
      {"NUL", std::string("a\0b", 3)},
      {"non-ASCII", "caf\xC3\xA9 \xE2\x82\xAC"},
      {"invalid UTF-8", "\xFF\xFE"},
      {"percent", "100%"},
      {"quote", "say \"hi\""},
      {"empty", ""},
      {"8 KiB", std::string(8192, 'a') + "\r\n"},
  };
  return values;
}

TEST_F(EncoderTest, NoHeaderFromEntryDataEverCarriesFramingInAnyFormat) {
  const std::vector<std::string> fields = {"type", "content_type", "traceparent", "tracestate",
                                           "data", "id",           "specversion", "source"};
  int sent = 0;
  int refused = 0;
  for (auto format : {config::Format::kJson, config::Format::kRaw, config::Format::kCloudEvents}) {
    for (bool with_raw_field : {true, false}) {
      handler_.format = format;
      for (const auto& [label, value] : HostileValues()) {
        for (const auto& field : fields) {
          std::vector<std::pair<std::string, std::string>> entry_fields = {{field, value}};
          if (with_raw_field && field != "data") entry_fields.emplace_back("data", "body");
          // The name of a binary field travels in Streamcar-Base64-Fields (cloudevents).
          entry_fields.emplace_back(value, "\xFF");
          const std::string context = "format " + std::to_string(static_cast<int>(format)) +
                                      ", field " + field + ", " + label;
          HttpRequest r;
          std::string why;
          if (EncodeEntry(Context(), Entry(entry_fields), &r, &why)) {
            ++sent;
            ExpectNoFramingBytes(r, context);
          } else {
            ++refused;
            // Only a bad content_type (or raw without its field) may refuse an entry.
            EXPECT_TRUE(field == "content_type" ||
                        (format == config::Format::kRaw && !with_raw_field) || field == "data")
                << context << ": " << why;
          }
        }
      }
    }
  }
  EXPECT_GT(sent, 100);
  EXPECT_GT(refused, 0);
}

TEST_F(EncoderTest, BatchHeadersNeverCarryFraming) {
  std::vector<StreamEntry> entries;
  for (const auto& [label, value] : HostileValues()) {
    entries.push_back(
        Entry({{"type", value}, {"traceparent", value}, {"content_type", value}, {value, value}}));
  }
  std::vector<const StreamEntry*> batch;
  for (const auto& e : entries) batch.push_back(&e);
  HttpRequest r;
  std::string why;
  ASSERT_TRUE(EncodeBatch(Context(), batch, &r, &why)) << why;
  ExpectNoFramingBytes(r, "batch");
  EXPECT_EQ(HeaderOf(r, "Streamcar-Batch-Size"), std::to_string(entries.size()));
  rapidjson::Document d;
  d.Parse(r.body.c_str(), r.body.size());
  ASSERT_FALSE(d.HasParseError());  // entry data stays in the body, JSON-escaped
  EXPECT_EQ(d["entries"].Size(), entries.size());
}

TEST_F(EncoderTest, CloudEventsTypeIsPercentEncodedAsTheHttpBindingRequires) {
  handler_.format = config::Format::kCloudEvents;
  auto type_header = [&](const std::string& type) {
    return HeaderOf(Encode(Entry({{"type", type}})), "ce-type");
  };
  EXPECT_EQ(type_header("evil\r\nX-Injected: 1"), "evil%0D%0AX-Injected:%201");
  EXPECT_EQ(type_header(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(type_header("caf\xC3\xA9"), "caf%C3%A9");  // UTF-8 bytes, uppercase hex
  EXPECT_EQ(type_header("100% \"sure\""), "100%25%20%22sure%22");
  EXPECT_EQ(type_header("a\tb\x7F"), "a%09b%7F");
  // Printable ASCII but space, '"' and '%' stays as it is.
  EXPECT_EQ(type_header("com.example/order.created?v=1#x"), "com.example/order.created?v=1#x");
  // An empty type is no CloudEvents type: as if absent.
  EXPECT_EQ(type_header(""), "streamcar.entry");
  const std::string big(8192, '\n');
  EXPECT_EQ(type_header(big).size(), 3 * big.size());
}

TEST_F(EncoderTest, CloudEventsRepeatedTypeUsesItsFirstValue) {
  handler_.format = config::Format::kCloudEvents;
  auto r = Encode(Entry({{"type", "first"}, {"type", "second\r\n"}}));
  EXPECT_EQ(HeaderOf(r, "ce-type"), "first");
}

TEST_F(EncoderTest, CloudEventsSourceIsAPercentEncodedPathSegment) {
  handler_.format = config::Format::kCloudEvents;
  auto source_of = [&](const std::string& stream) {
    HttpRequest r;
    std::string why;
    EncodeContext context{stream, "billing", &handler_};
    EXPECT_TRUE(EncodeEntry(context, Entry({{"k", "v"}}), &r, &why)) << why;
    return HeaderOf(r, "ce-source");
  };
  EXPECT_EQ(source_of("orders \xC3\xA9/q1 2024"), "/streams/orders%20%C3%A9%2Fq1%202024");
  EXPECT_EQ(source_of("a%b?c#d"), "/streams/a%25b%3Fc%23d");
  EXPECT_EQ(source_of("orders:eu-1_x.y~z@h+1"), "/streams/orders:eu-1_x.y~z@h+1");
  EXPECT_EQ(source_of("q\"\t"), "/streams/q%22%09");
}

TEST_F(EncoderTest, Base64FieldNamesArePercentEncodedInTheirHeader) {
  handler_.format = config::Format::kCloudEvents;
  auto r = Encode(Entry({{"a\r\nX-Injected: 1", "\xFF"}, {"b,c", "\xFE"}, {"d", "\xFD"}}));
  EXPECT_EQ(HeaderOf(r, "Streamcar-Base64-Fields"), "a%0D%0AX-Injected:%201,b%2Cc,d");
}

TEST_F(EncoderTest, ContentTypeMustBeAMediaType) {
  for (auto format : {config::Format::kRaw, config::Format::kCloudEvents}) {
    handler_.format = format;
    for (const std::string& good :
         std::vector<std::string>{"text/csv", "application/vnd.api+json; charset=utf-8",
                                  "text/plain;charset=\"a b\\\"c\"",
                                  "multipart/form-data; boundary=x; a=\"caf\xC3\xA9\""}) {
      auto r = Encode(Entry({{"data", "x"}, {"content_type", good}}));
      EXPECT_EQ(r.content_type, good);
    }
    EXPECT_EQ(Encode(Entry({{"data", "x"}, {"content_type", "  text/csv\t"}})).content_type,
              "text/csv");
    for (const std::string& bad : std::vector<std::string>{
             "text/plain\r\nX-Injected: 1", "text/plain\r\n\r\nPOST /smuggled HTTP/1.1",
             std::string("text/plain\0", 11), "text", "text/", "/plain", "", "text/pl ain",
             "t\xC3\xA9xt/plain", "text/plain; charset", "text/plain; charset=\"open",
             "text/plain; charset=\"a\rb\"", "text/plain; a=b c", std::string(8192, 'x')}) {
      HttpRequest r;
      std::string why;
      EXPECT_FALSE(EncodeEntry(Context(), Entry({{"data", "x"}, {"content_type", bad}}), &r, &why))
          << "accepted content_type [" << bad << "]";
      EXPECT_NE(why.find("\"content_type\""), std::string::npos) << why;
      EXPECT_EQ(why.find('\r'), std::string::npos) << why;  // the hostile value is not echoed
    }
  }
  // json ignores content_type (its body is always JSON): the field just stays in the payload.
  handler_.format = config::Format::kJson;
  auto r = Encode(Entry({{"content_type", "text/plain\r\nX-Injected: 1"}}));
  EXPECT_EQ(r.content_type, "application/json");
}

TEST_F(EncoderTest, A8KiBContentTypeThatIsAMediaTypeIsSent) {
  handler_.format = config::Format::kRaw;
  const std::string type = "application/" + std::string(8192, 'x');
  EXPECT_EQ(Encode(Entry({{"data", "x"}, {"content_type", type}})).content_type, type);
}

TEST_F(EncoderTest, AControlCharacterInAnyHeaderRefusesTheRequestInEveryFormatAndBatch) {
  // Configuration validation keeps line breaks out of handler.headers; the encoder's final check
  // must hold even if something upstream ever lets one through.
  for (const std::string& value :
       std::vector<std::string>{"a\r\nX-Injected: 1", std::string("a\0b", 3), "a\rb", "a\x01"}) {
    handler_.headers = {{"X-Team", value}};
    for (auto format :
         {config::Format::kJson, config::Format::kRaw, config::Format::kCloudEvents}) {
      handler_.format = format;
      HttpRequest r;
      std::string why;
      EXPECT_FALSE(EncodeEntry(Context(), Entry({{"data", "x"}}), &r, &why));
      EXPECT_NE(why.find("X-Team"), std::string::npos) << why;
    }
    handler_.format = config::Format::kJson;
    auto a = Entry({{"x", "1"}});
    HttpRequest r;
    std::string why;
    EXPECT_FALSE(EncodeBatch(Context(), {&a}, &r, &why));
    EXPECT_NE(why.find("X-Team"), std::string::npos) << why;
  }
  // The stream name comes from configuration too, and is checked the same way.
  handler_.headers.clear();
  EncodeContext context{"orders\r\nX-Injected: 1", "billing", &handler_};
  HttpRequest r;
  std::string why;
  EXPECT_FALSE(EncodeEntry(context, Entry({{"k", "v"}}), &r, &why));
  EXPECT_NE(why.find("Streamcar-Stream"), std::string::npos) << why;
}

TEST_F(EncoderTest, TraceparentGrammar) {
  struct Case {
    std::string value;
    bool forwarded;
  };
  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string span = "00f067aa0ba902b7";
  const std::vector<Case> cases = {
      {"00-" + trace + "-" + span + "-01", true},
      {"00-" + trace + "-" + span + "-00", true},
      {"00-" + trace + "-" + span + "-01-", false},                 // version 00 has no more fields
      {"00-" + trace + "-" + span + "-01\r\nX: 1", false},          // CRLF
      {"00-" + std::string(32, '0') + "-" + span + "-01", false},   // all-zero trace id
      {"00-" + trace + "-" + std::string(16, '0') + "-01", false},  // all-zero parent id
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + span + "-01", false},  // uppercase
      {"ff-" + trace + "-" + span + "-01", false},                     // version ff
      {"0g-" + trace + "-" + span + "-01", false},
      {"01-" + trace + "-" + span + "-01", true},          // a later version
      {"cc-" + trace + "-" + span + "-01-abc-0ef", true},  // with more fields
      {"cc-" + trace + "-" + span + "-01.what", false},    // not followed by '-'
      {"cc-" + trace + "-" + span + "-01-X Y", false},     // beyond lowercase hex and '-'
      {"00-" + trace + "-" + span, false},
      {"", false},
      {std::string(8192, 'a'), false},
  };
  for (const auto& c : cases) {
    auto r = Encode(Entry({{"traceparent", c.value}}));
    EXPECT_EQ(HeaderOf(r, "traceparent") == c.value, c.forwarded) << c.value;
    if (!c.forwarded) {
      EXPECT_EQ(HeaderOf(r, "traceparent"), "<absent>") << c.value;
    }
  }
}

TEST_F(EncoderTest, TracestateGrammar) {
  std::string many;
  for (int i = 0; i < 32; ++i) many += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  const std::vector<std::pair<std::string, bool>> cases = {
      {"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", true},
      {"a=1 , , b=2\t", true},  // OWS and empty members
      {"tenant1@sys=v", true},
      {"a/b*c_d-e=x y", true},
      {many, true},
      {many + ",k32=v", false},  // 33 members
      {"a=1,a=2", false},        // a key twice
      {"A=1", false},
      {"a=", false},
      {"a=b ", true},  // trailing OWS belongs to the list, not the value
      {"a=b=c", false},
      {"a=\xC3\xA9", false},
      {"a=b\r\nX-Injected: 1", false},
      {std::string("a=b\0", 4), false},
      {"", false},
      {"a=" + std::string(257, 'v'), false},
  };
  for (const auto& [value, forwarded] : cases) {
    auto r = Encode(Entry({{"traceparent", kTraceparent}, {"tracestate", value}}));
    EXPECT_EQ(HeaderOf(r, "tracestate") == value, forwarded) << value;
    if (!forwarded) {
      EXPECT_EQ(HeaderOf(r, "tracestate"), "<absent>") << value;
    }
  }
}

}  // namespace
}  // namespace streamcar::delivery
