// Ordering by key (SPEC 3.5): equal keys one at a time in id order, a retry holds its key back,
// other keys keep flowing.

#include <atomic>
#include <map>
#include <mutex>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class OrderingTest : public E2eTest {};

std::string PayloadValue(const std::string& body, const std::string& field) {
  const std::string key = "\"" + field + "\":\"";
  auto at = body.find(key);
  if (at == std::string::npos) return {};
  at += key.size();
  return body.substr(at, body.find('"', at) - at);
}

TEST_F(OrderingTest, SameKeyInIdOrderOneAtATimeAndRetriesHoldTheKey) {
  std::mutex mutex;
  std::map<std::string, int> active;  // per key: requests in progress
  std::atomic<bool> overlap{false};
  std::atomic<bool> failed_once{false};
  handler_.SetBehaviour([&](const ReceivedRequest& r) {
    const std::string key = PayloadValue(r.body, "account");
    {
      std::lock_guard lock(mutex);
      if (++active[key] > 1) overlap = true;
    }
    std::this_thread::sleep_for(milliseconds(20));
    int status = 200;
    // The first entry of key A fails once: its later entries must wait for the retry.
    if (key == "A" && PayloadValue(r.body, "seq") == "0" && !failed_once.exchange(true))
      status = 500;
    {
      std::lock_guard lock(mutex);
      --active[key];
    }
    return HandlerReply{status};
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 8";
  // Key B's ten requests must all finish within key A's backoff: 3 s is ample on a loaded box.
  c.initial_backoff = "3s";
  c.max_backoff = "3s";
  c.subscription_extra = "    ordering: { key_field: account }\n";
  for (int i = 0; i < 10; ++i) {
    Add({"account", "A", "seq", std::to_string(i)});
    Add({"account", "B", "seq", std::to_string(i)});
  }
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(
      Eventually([&] { return PendingCount() == 0 && handler_.Count() == 21; }, seconds(30)))
      << sidecar->Logs();
  EXPECT_FALSE(overlap);
  std::map<std::string, std::vector<std::string>> order;
  std::chrono::steady_clock::time_point a_retry{}, b_last{};
  for (const auto& r : handler_.Requests()) {
    const std::string key = PayloadValue(r.body, "account");
    order[key].push_back(PayloadValue(r.body, "seq"));
    if (key == "A" && r.Header("streamcar-attempts") == "2") a_retry = r.at;
    if (key == "B") b_last = r.at;
  }
  std::vector<std::string> expected_b, expected_a = {"0"};
  for (int i = 0; i < 10; ++i) {
    expected_a.push_back(std::to_string(i));
    expected_b.push_back(std::to_string(i));
  }
  EXPECT_EQ(order["A"], expected_a);  // 0 (failed), 0 (retry), 1, 2, ...
  EXPECT_EQ(order["B"], expected_b);
  EXPECT_LT(b_last, a_retry);  // key B did not wait for key A's retry
}

}  // namespace
}  // namespace streamcar::testing
