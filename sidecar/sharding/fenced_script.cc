#include "sidecar/sharding/fenced_script.h"

#include <array>
#include <string>
#include <string_view>

#include "sidecar/redis/settle_scripts.h"
#include "sidecar/sharding/lua/fence_check.lua.h"
#include "sidecar/sharding/lua/fenced_ack.lua.h"
#include "sidecar/sharding/lua/fenced_claim_all.lua.h"
#include "sidecar/sharding/lua/fenced_install.lua.h"
#include "sidecar/sharding/lua/fenced_read.lua.h"
#include "sidecar/sharding/lua/fenced_takeover.lua.h"

namespace streamcar::sharding {
namespace {

// The check every step but the install starts with. The token (ARGV[1]) is taken out of ARGV, so
// the rest is the step's own arguments, as the plain scripts number them; the fence is the last
// key. A replaced owner can then no longer read, claim, acknowledge or dead-letter, whatever the
// coordinator believes at that moment (B2). The scripts are the .lua files of sharding/lua/, byte
// for byte (their SHA1 is their EVALSHA name).
redis::Script Fenced(std::string_view body) {
  return redis::Script(std::string(lua::kFenceCheck) + std::string(body));
}

const redis::Script kInstallScript(lua::kFencedInstall);

const redis::Script kClaimAllScript = Fenced(lua::kFencedClaimAll);

const redis::Script kReadScript = Fenced(lua::kFencedRead);

const redis::Script kTakeoverScript = Fenced(lua::kFencedTakeover);

const redis::Script kAckScript = Fenced(lua::kFencedAck);

}  // namespace

const redis::Script& FencedInstallScript() { return kInstallScript; }
const redis::Script& FencedClaimAllScript() { return kClaimAllScript; }
const redis::Script& FencedReadScript() { return kReadScript; }
const redis::Script& FencedTakeoverScript() { return kTakeoverScript; }
const redis::Script& FencedAckScript() { return kAckScript; }
// The plain bodies live in another file: these are built on first use, never during static
// initialisation (whose order across files is unspecified).
template <const redis::Script& (*Plain)()>
const redis::Script& FencedCopy() {
  static const redis::Script script = Fenced(Plain().body());
  return script;
}

const redis::Script& FencedRetryClaimScript() { return FencedCopy<&redis::RetryClaimScript>(); }
const redis::Script& FencedKeepAliveScript() { return FencedCopy<&redis::KeepAliveScript>(); }
const redis::Script& FencedDeadLetterScript() { return FencedCopy<&redis::DeadLetterScript>(); }
const redis::Script& FencedOwnedAckScript() { return FencedCopy<&redis::OwnedAckScript>(); }
const redis::Script& FencedUndoReadsScript() { return FencedCopy<&redis::UndoReadsScript>(); }

std::span<const redis::Script* const> FencedScripts() {
  static const std::array<const redis::Script*, 10> scripts = {
      &FencedInstallScript(),   &FencedClaimAllScript(),   &FencedReadScript(),
      &FencedTakeoverScript(),  &FencedAckScript(),        &FencedRetryClaimScript(),
      &FencedKeepAliveScript(), &FencedDeadLetterScript(), &FencedOwnedAckScript(),
      &FencedUndoReadsScript()};
  return scripts;
}

}  // namespace streamcar::sharding
