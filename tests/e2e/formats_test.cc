// The raw and CloudEvents formats (SPEC 3.1) through the binary, and an entry that cannot be
// expressed in its format (dead-lettered as invalid, never POSTed).

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class FormatsTest : public E2eTest {};

TEST_F(FormatsTest, RawSendsTheFieldBytes) {
  SidecarConfig c;
  c.handler_extra = "format: raw, raw_field: body, headers: { X-Team: billing }";
  auto sidecar = StartSidecar(c);
  const std::string bytes("\x00\x01\xFFpayload", 10);
  std::string id = Add({"body", bytes, "content_type", "application/x-test"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  auto r = handler_.Requests()[0];
  EXPECT_EQ(r.body, bytes);
  EXPECT_EQ(r.Header("content-type"), "application/x-test");
  EXPECT_EQ(r.Header("x-team"), "billing");
  EXPECT_EQ(r.Header("idempotency-key"), "orders/" + id);
}

TEST_F(FormatsTest, RawWithoutTheFieldIsDeadLetteredAsInvalid) {
  SidecarConfig c;
  c.handler_extra = "format: raw";
  auto sidecar = StartSidecar(c);
  std::string id = Add({"other", "x"});
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(10)))
      << sidecar->Logs();
  EXPECT_TRUE(RequestsFor(id).empty());
  ASSERT_TRUE(WaitMetric("streamcar_dead_lettered_total", {"reason=\"invalid\""}, 1));
}

TEST_F(FormatsTest, CloudEventsBinaryMode) {
  SidecarConfig c;
  c.handler_extra = "format: cloudevents";
  auto sidecar = StartSidecar(c);
  std::string id =
      Add({"type", "order.created", "data", "{\"total\":5}", "content_type", "application/json",
           "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  auto r = handler_.Requests()[0];
  EXPECT_EQ(r.Header("ce-specversion"), "1.0");
  EXPECT_EQ(r.Header("ce-id"), id);
  EXPECT_EQ(r.Header("ce-source"), "/streams/orders");
  EXPECT_EQ(r.Header("ce-type"), "order.created");
  EXPECT_EQ(r.Header("ce-time").size(), 24u);
  EXPECT_EQ(r.Header("traceparent"), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_EQ(r.body, "{\"total\":5}");
}

}  // namespace
}  // namespace streamcar::testing
