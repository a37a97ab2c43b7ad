#include "sidecar/log/append_links.h"

#include <span>
#include <utility>

#include "sidecar/keys/key_slot.h"
#include "sidecar/log/producer.h"

namespace streamcar::log {
namespace {

// What each append connection loads as it connects.
const redis::Script* const kScripts[] = {&Producer::Script()};

}  // namespace

AppendLinks::AppendLinks(EventLoop* loop, redis::ConnectionOptions options)
    : loop_(loop), options_(std::move(options)), connector_(*loop) {}

AppendLinks::~AppendLinks() { by_slot_.clear(); }

redis::AsyncConnection& AppendLinks::For(const std::string& key) {
  const int slot = options_.topology != nullptr ? keys::KeySlot(key) : -1;
  auto& connection = by_slot_[slot];
  if (connection == nullptr) {
    redis::ConnectionOptions options = options_;
    options.slot = slot;
    // Its own health (none): an idle append connection must not hold /readyz down; the API's
    // probe speaks for Redis.
    connection = std::make_unique<redis::AsyncConnection>(
        *loop_, connector_, std::move(options), "api-append", nullptr,
        std::span<const redis::Script* const>(kScripts));
    connection->CapReconnectBackoff(kReconnectCap);
  }
  return *connection;
}

}  // namespace streamcar::log
