// The Responder of http/service.h: what a service hands it is posted to the server's loop.

#include <functional>
#include <utility>

#include "sidecar/http/exchange.h"
#include "sidecar/http/server.h"
#include "sidecar/http/service.h"

namespace streamcar::http {

namespace {

// Runs `action` on the server's loop if the server still exists.
void PostToServer(const std::shared_ptr<ServerLink>& link, std::function<void(Server*)> action) {
  std::lock_guard lock(link->mutex);
  if (link->server.load(std::memory_order_relaxed) == nullptr) return;
  link->loop->Post([link, action = std::move(action)] {
    Server* server = link->server.load(std::memory_order_acquire);
    if (server != nullptr) action(server);
  });
}

}  // namespace

void Responder::Respond(Response response) const {
  const uint64_t id = exchange_->connection_id;
  const uint64_t exchange = exchange_->id;
  PostToServer(exchange_->link,
               [id, exchange, response = std::move(response)](Server* server) mutable {
                 server->Deliver(id, exchange, std::move(response));
               });
}

void Responder::RespondOnLoop(Response response) const {
  // On the loop the server cannot go meanwhile (it is destroyed on it or while it does not run).
  Server* server = exchange_->link->server.load(std::memory_order_acquire);
  if (server != nullptr)
    server->Deliver(exchange_->connection_id, exchange_->id, std::move(response));
}

void Responder::StartStream(Response head) const {
  const uint64_t id = exchange_->connection_id;
  const uint64_t exchange = exchange_->id;
  PostToServer(exchange_->link, [id, exchange, head = std::move(head)](Server* server) {
    server->DeliverStreamHead(id, exchange, head);
  });
}

void Responder::Send(std::string bytes) const {
  exchange_->queued.fetch_add(bytes.size(), std::memory_order_relaxed);
  const uint64_t id = exchange_->connection_id;
  const uint64_t exchange = exchange_->id;
  PostToServer(exchange_->link, [id, exchange, bytes = std::move(bytes)](Server* server) {
    server->DeliverStreamBytes(id, exchange, bytes);
  });
}

void Responder::Finish() const {
  const uint64_t id = exchange_->connection_id;
  const uint64_t exchange = exchange_->id;
  PostToServer(exchange_->link,
               [id, exchange](Server* server) { server->DeliverStreamEnd(id, exchange); });
}

size_t Responder::queued_bytes() const { return exchange_->queued.load(std::memory_order_relaxed); }

bool Responder::gone() const { return exchange_->gone.load(std::memory_order_acquire); }

}  // namespace streamcar::http
