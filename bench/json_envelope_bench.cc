// Which JSON library encodes the SPEC 3.1 envelope fastest? A micro-benchmark of rapidjson's
// Writer (what streamcar uses, through delivery/encoder.cc) against nlohmann::json, on entries
// with ASCII, unicode, binary (base64) and repeated fields. Run: build/bench/json_envelope_bench

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "sidecar/common/text.h"
#include "sidecar/delivery/base64.h"
#include "sidecar/delivery/encoder.h"

namespace streamcar {
namespace {

StreamEntry MakeEntry(int kind) {
  StreamEntry e;
  e.id = "1700000000000-42";
  e.attempts = 1;
  switch (kind) {
    case 0:  // a typical small event
      e.fields = {{"type", "order.created"},
                  {"order_id", "A-100045"},
                  {"customer", "c-77"},
                  {"total", "125.50"},
                  {"currency", "EUR"}};
      break;
    case 1:  // unicode text
      e.fields = {{"note", "Grüße aus Köln — 東京 😀 \"quoted\"\n"}, {"city", "Zürich"}};
      break;
    case 2:  // a binary value
      e.fields = {{"blob", std::string(256, '\xFE')}, {"kind", "thumbnail"}};
      break;
    default:  // repeated fields and a 1 KiB value
      e.fields = {{"tag", "a"}, {"tag", "b"}, {"tag", "c"}, {"body", std::string(1024, 'x')}};
      break;
  }
  return e;
}

// The same envelope with nlohmann::json: fields grouped, binary values base64, duplicates arrays.
std::string NlohmannEnvelope(const std::string& stream, const std::string& group,
                             const StreamEntry& e) {
  nlohmann::ordered_json payload = nlohmann::ordered_json::object();
  nlohmann::ordered_json base64 = nlohmann::ordered_json::array();
  for (const auto& [name, value] : e.fields) {
    const bool binary = !IsValidUtf8(value);
    std::string text = binary ? Base64Encode(value) : value;
    if (binary) base64.push_back(name);
    if (payload.contains(name)) {
      auto& slot = payload[name];
      if (!slot.is_array()) slot = nlohmann::ordered_json::array({slot});
      slot.push_back(std::move(text));
    } else {
      payload[name] = std::move(text);
    }
  }
  nlohmann::ordered_json envelope = {{"id", e.id},
                                     {"stream", stream},
                                     {"group", group},
                                     {"attempts", e.attempts},
                                     {"payload", std::move(payload)}};
  if (!base64.empty()) envelope["base64_fields"] = std::move(base64);
  return envelope.dump();
}

void BM_RapidJson(benchmark::State& state) {
  const StreamEntry entry = MakeEntry(static_cast<int>(state.range(0)));
  const std::string stream = "orders", group = "billing";
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body = delivery::EncodeJsonEnvelope(stream, group, entry);
    bytes += body.size();
    benchmark::DoNotOptimize(body);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_Nlohmann(benchmark::State& state) {
  const StreamEntry entry = MakeEntry(static_cast<int>(state.range(0)));
  const std::string stream = "orders", group = "billing";
  size_t bytes = 0;
  for (auto _ : state) {
    std::string body = NlohmannEnvelope(stream, group, entry);
    bytes += body.size();
    benchmark::DoNotOptimize(body);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

// 0 typical, 1 unicode, 2 binary, 3 repeated + 1 KiB
BENCHMARK(BM_RapidJson)->DenseRange(0, 3);
BENCHMARK(BM_Nlohmann)->DenseRange(0, 3);

}  // namespace
}  // namespace streamcar

BENCHMARK_MAIN();
