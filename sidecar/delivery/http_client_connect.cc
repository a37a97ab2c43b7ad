// Http1Client's way to a connection (http_client.h): the host name resolved on a transient thread,
// each address tried in turn, TCP options set, and for https:// the TLS handshake, all within the
// connect cap; any failure here is kRefused.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "sidecar/common/tls_util.h"
#include "sidecar/delivery/http_client_parts.h"

namespace streamcar::delivery {

using Kind = HandlerResponse::Kind;

void Http1Client::StartResolving(Pool& pool) {
  pool.resolving = true;
  // Runs `result` on the loop unless the client was abandoned or destroyed meanwhile.
  auto post_result = [this, pool = &pool, epoch = std::weak_ptr<uint64_t>(epoch_), at = *epoch_](
                         EventLoop& loop, StatusOr<std::vector<ResolvedAddress>> result) {
    loop.Post([this, pool, epoch, at, result = std::move(result)]() mutable {
      const std::shared_ptr<uint64_t> alive = epoch.lock();
      if (alive == nullptr || *alive != at) return;
      OnResolved(*pool, std::move(result));
    });
  };
  try {
    std::thread([resolver = resolver_, link = link_, host = pool.target.host,
                 port = pool.target.port, origin = pool.target.origin, post_result] {
      auto addresses = resolver(host, port, origin);
      std::lock_guard lock(link->mutex);
      if (link->loop == nullptr) return;  // the client is gone
      post_result(*link->loop, std::move(addresses));
    }).detach();
  } catch (const std::system_error& error) {
    // No thread to be had (a container's pids limit): the requests waiting are refused, and the
    // next one tries again.
    post_result(loop_, ResolveFailure(pool.target.host, pool.target.origin, error.what()));
  }
}

void Http1Client::OnResolved(Pool& pool, StatusOr<std::vector<ResolvedAddress>> addresses) {
  pool.resolving = false;
  if (addresses.ok()) {
    pool.addresses = std::move(*addresses);
    pool.resolved = true;
  }
  // The requests that waited, as they are now: a callback run by one may send another.
  std::vector<Connection*> waiting;
  for (const auto& connection : pool.connections) {
    if (connection->state == Connection::State::kResolving) waiting.push_back(connection.get());
  }
  for (Connection* connection : waiting) {
    const bool present =
        std::any_of(pool.connections.begin(), pool.connections.end(),
                    [connection](const auto& owned) { return owned.get() == connection; });
    if (!present || connection->state != Connection::State::kResolving) continue;
    if (!addresses.ok()) {
      Fail(connection, Kind::kRefused, addresses.status().message());
      continue;
    }
    ConnectResolved(connection);
  }
}

void Http1Client::ConnectResolved(Connection* connection) {
  std::string why;
  if (ConnectNext(connection, &why)) return;  // kConnecting; its timer is armed already
  connection->pool->resolved = false;
  Fail(connection, Kind::kRefused, std::move(why));
}

bool Http1Client::ConnectNext(Connection* connection, std::string* why) {
  const Pool& pool = *connection->pool;
  const std::string prefix = "cannot connect to " + pool.target.origin + ": ";
  if (pool.addresses.empty()) *why = prefix + "no address";
  while (connection->next_address < pool.addresses.size()) {
    const ResolvedAddress& address = pool.addresses[connection->next_address++];
    connection->ssl.reset();
    connection->watch.reset();
    connection->fd = UniqueFd();
    UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      *why = prefix + "socket: " + std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) !=
            0 &&
        errno != EINPROGRESS) {
      *why = prefix + std::strerror(errno);
      continue;
    }
    auto watch = loop_.Watch(fd.get(), EventLoop::kWritable,
                             [this, connection](uint32_t ready) { OnEvent(connection, ready); });
    if (!watch.ok()) {
      *why = prefix + watch.status().message();
      continue;
    }
    connection->fd = std::move(fd);
    connection->watch = std::move(*watch);
    connection->state = Connection::State::kConnecting;
    return true;
  }
  return false;
}

void Http1Client::OnConnectEvent(Connection* connection) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(connection->fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    error = errno;
  }
  if (error != 0) {
    std::string why =
        "cannot connect to " + connection->pool->target.origin + ": " + std::strerror(error);
    if (ConnectNext(connection, &why)) return;
    connection->pool->resolved = false;  // resolved again for the next attempt
    Fail(connection, Kind::kRefused, std::move(why));
    return;
  }
  if (connection->pool->target.unix_socket.empty()) {  // TCP options; a Unix socket has none
    const int one = 1;
    ::setsockopt(connection->fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(connection->fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  }
  if (connection->pool->tls != nullptr) {
    StartTls(connection);
    return;
  }
  ++connections_opened_;
  connection->state = Connection::State::kWriting;
  connection->timer->ArmAt(connection->deadline);
  connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kWritable);
  WriteSome(connection);
}

void Http1Client::StartTls(Connection* connection) {
  const HttpTarget& target = connection->pool->target;
  ERR_clear_error();
  connection->ssl.reset(SSL_new(connection->pool->tls.get()));
  if (connection->ssl == nullptr || SSL_set_fd(connection->ssl.get(), connection->fd.get()) != 1) {
    Fail(connection, Kind::kRefused, "TLS with " + target.origin + ": " + TakeOpenSslError());
    return;
  }
  SSL* ssl = connection->ssl.get();
  if (IsIpAddress(target.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), target.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, target.host.c_str());  // SNI
    SSL_set1_host(ssl, target.host.c_str());
  }
  connection->state = Connection::State::kHandshaking;
  Handshake(connection);
}

void Http1Client::Handshake(Connection* connection) {
  SSL* ssl = connection->ssl.get();
  ERR_clear_error();
  const int rc = SSL_connect(ssl);
  if (rc == 1) {
    ++connections_opened_;
    connection->state = Connection::State::kWriting;
    connection->timer->ArmAt(connection->deadline);
    connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kWritable);
    WriteSome(connection);
    return;
  }
  const int error = SSL_get_error(ssl, rc);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    connection->watch->SetInterest(error == SSL_ERROR_WANT_READ ? EventLoop::kReadable
                                                                : EventLoop::kWritable);
    return;
  }
  const HttpTarget& target = connection->pool->target;
  std::string why;
  const long verify = SSL_get_verify_result(ssl);  // NOLINT(google-runtime-int): OpenSSL's type
  if (verify != X509_V_OK) {
    why = "TLS: the certificate of " + target.origin + " is not trusted for \"" + target.host +
          "\": " + X509_verify_cert_error_string(verify);
    ERR_clear_error();
  } else if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    why = "TLS handshake with " + target.origin + ": connection closed (is it a TLS port?)";
  } else {
    why = "TLS handshake with " + target.origin + " failed: " + TakeOpenSslError();
  }
  Fail(connection, Kind::kRefused, std::move(why));
}

}  // namespace streamcar::delivery
