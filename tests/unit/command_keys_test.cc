// The key a routed Session sends each command by (sidecar/redis/topology/command_keys.h): every
// command streamcar sends on the blocking paths, built as the product builds it.

#include "sidecar/redis/topology/command_keys.h"

#include <gtest/gtest.h>

#include <string>

#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/script.h"

namespace streamcar::redis {
namespace {

std::string KeyOr(const Command& command, const char* none = "<none>") {
  auto key = FirstKeyOf(command);
  return key ? *key : none;
}

TEST(CommandKeysTest, ArgumentsRoundTripIncludingBinaryAndEmpty) {
  Command command("XADD");
  command.Arg("a\r\nb").Arg("").Arg(int64_t{-12}).Arg(std::string_view("\0x", 2));
  EXPECT_EQ(ArgumentsOf(command),
            (std::vector<std::string>{"XADD", "a\r\nb", "", "-12", std::string("\0x", 2)}));
}

TEST(CommandKeysTest, KeyIsTheFirstArgument) {
  for (const char* name :
       {"XADD", "XRANGE", "XREVRANGE", "XLEN", "XTRIM", "XDEL", "XACK", "XACKDEL", "XPENDING",
        "XAUTOCLAIM", "XCLAIM", "TYPE", "GET", "SET", "DEL", "EXISTS", "xadd", "XRange"}) {
    Command command(name);
    command.Arg("orders").Arg("-").Arg("+");
    EXPECT_EQ(KeyOr(command), "orders") << name;
  }
  EXPECT_EQ(KeyOr(Command("XLEN")), "<none>");  // malformed: no key to route by
}

TEST(CommandKeysTest, SubcommandFamiliesNameTheKeySecond) {
  EXPECT_EQ(KeyOr(Command("XINFO").Arg("STREAM").Arg("orders")), "orders");
  EXPECT_EQ(KeyOr(Command("XINFO").Arg("GROUPS").Arg("orders")), "orders");
  EXPECT_EQ(KeyOr(Command("XINFO").Arg("CONSUMERS").Arg("orders").Arg("g")), "orders");
  EXPECT_EQ(KeyOr(Command("XINFO").Arg("HELP")), "<none>");
  EXPECT_EQ(KeyOr(Command("XGROUP").Arg("CREATE").Arg("orders").Arg("g").Arg("$").Arg("MKSTREAM")),
            "orders");
  EXPECT_EQ(KeyOr(Command("XGROUP").Arg("DESTROY").Arg("orders").Arg("g")), "orders");
  EXPECT_EQ(KeyOr(Command("XGROUP").Arg("CREATECONSUMER").Arg("o").Arg("g").Arg("c")), "o");
  EXPECT_EQ(KeyOr(Command("XGROUP").Arg("SETID").Arg("o").Arg("g").Arg("0")), "o");
}

TEST(CommandKeysTest, ReadsRouteByTheFirstStreamAfterStreams) {
  EXPECT_EQ(KeyOr(Command("XREADGROUP")
                      .Arg("GROUP")
                      .Arg("g")
                      .Arg("c")
                      .Arg("COUNT")
                      .Arg(int64_t{10})
                      .Arg("BLOCK")
                      .Arg(int64_t{2000})
                      .Arg("STREAMS")
                      .Arg("orders")
                      .Arg(">")),
            "orders");
  // A group and a consumer may be called STREAMS: they sit before the options.
  EXPECT_EQ(KeyOr(Command("XREADGROUP")
                      .Arg("GROUP")
                      .Arg("STREAMS")
                      .Arg("streams")
                      .Arg("STREAMS")
                      .Arg("k")
                      .Arg(">")),
            "k");
  EXPECT_EQ(KeyOr(Command("XREAD")
                      .Arg("BLOCK")
                      .Arg(int64_t{0})
                      .Arg("streams")
                      .Arg("a")
                      .Arg("b")
                      .Arg("$")
                      .Arg("$")),
            "a");
  EXPECT_EQ(KeyOr(Command("XREAD").Arg("COUNT").Arg(int64_t{1})), "<none>");
}

TEST(CommandKeysTest, ScriptsRouteByTheirFirstKey) {
  const Script script("return 1");
  EXPECT_EQ(KeyOr(script.Call({"orders", "{orders}:dlq"}).Arg("x")), "orders");
  EXPECT_EQ(KeyOr(script.Call({}).Arg("x")), "<none>");
  EXPECT_EQ(KeyOr(Command("EVAL").Arg("return 1").Arg(int64_t{1}).Arg("k").Arg("a")), "k");
  EXPECT_EQ(KeyOr(Command("EVAL").Arg("return 1").Arg("x").Arg("k")), "<none>");
  EXPECT_EQ(KeyOr(Command("EVAL").Arg("return 1").Arg(int64_t{1})), "<none>");  // no key given
}

TEST(CommandKeysTest, KeylessCommands) {
  EXPECT_EQ(KeyOr(Command("PING")), "<none>");
  EXPECT_EQ(KeyOr(Command("INFO").Arg("cluster")), "<none>");
  EXPECT_EQ(KeyOr(Command("SCRIPT").Arg("LOAD").Arg("return 1")), "<none>");
  EXPECT_EQ(KeyOr(Command("CLIENT").Arg("SETNAME").Arg("x")), "<none>");
  EXPECT_EQ(KeyOr(Command("CLIENT").Arg("ID")), "<none>");
  EXPECT_EQ(KeyOr(Command("COMMAND").Arg("INFO").Arg("XACKDEL")), "<none>");
  // PUBLISH reaches every node's subscribers from any node: its channel is no key.
  EXPECT_EQ(KeyOr(Command("PUBLISH").Arg("orders:events").Arg("1")), "<none>");
  EXPECT_EQ(KeyOr(Command("SOMETHINGNEW").Arg("orders")), "<none>");
}

TEST(CommandKeysTest, SlotOfIsTheKeysSlot) {
  EXPECT_EQ(SlotOf(Command("XLEN").Arg("orders")), 105);
  EXPECT_EQ(SlotOf(Command("XLEN").Arg("orders:dlq")), 9954);
  EXPECT_EQ(SlotOf(Command("XLEN").Arg("{orders}:dlq")), 105);
  EXPECT_EQ(SlotOf(Command("PING")), -1);
}

}  // namespace
}  // namespace streamcar::redis
