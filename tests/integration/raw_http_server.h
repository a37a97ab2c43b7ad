#pragma once
// A raw TCP (or TLS) HTTP server for tests whose handler must misbehave on purpose: each accepted
// connection runs a script the test writes, byte for byte. Header-only; used by the handler client
// integration tests and the handler framing e2e tests.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace streamcar::testing {

// One accepted connection, plain or TLS, as the server's script sees it.
class Peer {
 public:
  virtual ~Peer() = default;
  virtual ssize_t Recv(char* buffer, size_t size) = 0;  // 0: closed
  virtual bool Send(std::string_view data) = 0;
  int fd = -1;

  // Reads one request (head and Content-Length body); "" when the client closed.
  std::string ReadRequest() {
    std::string text;
    char buffer[4096];
    while (true) {
      const size_t head_end = text.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = text.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) length = std::stoul(text.substr(at + 16));
        if (text.size() >= head_end + 4 + length) return text;
      }
      const ssize_t n = Recv(buffer, sizeof(buffer));
      if (n <= 0) return "";
      text.append(buffer, static_cast<size_t>(n));
    }
  }
  // Reads only up to the end of the request head.
  std::string ReadHead() {
    std::string text;
    char c;
    while (text.find("\r\n\r\n") == std::string::npos) {
      if (Recv(&c, 1) <= 0) return "";
      text += c;
    }
    return text;
  }
};

class PlainPeer final : public Peer {
 public:
  ssize_t Recv(char* buffer, size_t size) override { return ::recv(fd, buffer, size, 0); }
  bool Send(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
};

class TlsPeer final : public Peer {
 public:
  explicit TlsPeer(SSL* ssl) : ssl_(ssl) {}
  ~TlsPeer() override { SSL_free(ssl_); }
  SSL* ssl() const { return ssl_; }
  ssize_t Recv(char* buffer, size_t size) override {
    const int n = SSL_read(ssl_, buffer, static_cast<int>(size));
    return n > 0 ? n : 0;
  }
  bool Send(std::string_view data) override {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }

 private:
  SSL* ssl_;
};

// A TCP server on 127.0.0.1 that runs `script` on each accepted connection, in its own thread.
class RawServer {
 public:
  using Script = std::function<void(Peer& peer, int connection_index)>;

  explicit RawServer(Script script, SSL_CTX* tls = nullptr, int receive_buffer = 0)
      : script_(std::move(script)), tls_(tls) {
    // SSL_write has no MSG_NOSIGNAL: writing to a connection the other side closed must be an
    // error, not the death of the test process (the sidecar ignores SIGPIPE the same way).
    ::signal(SIGPIPE, SIG_IGN);
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (receive_buffer > 0) {
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t length = sizeof(address);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~RawServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& thread : threads_) thread.join();
    ::close(listen_fd_);
  }

  std::string url(const std::string& path = "/") const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  bool stopping() const { return stop_; }

 private:
  void Accept() {
    while (!stop_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      const int index = accepted_++;
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd, index] {
        std::unique_ptr<Peer> peer;
        if (tls_ != nullptr) {
          SSL* ssl = SSL_new(tls_);
          SSL_set_fd(ssl, fd);
          if (SSL_accept(ssl) != 1) {
            SSL_free(ssl);
            ::close(fd);
            return;
          }
          peer = std::make_unique<TlsPeer>(ssl);
        } else {
          peer = std::make_unique<PlainPeer>();
        }
        peer->fd = fd;
        script_(*peer, index);
        peer.reset();
        ::close(fd);
      });
    }
  }

  Script script_;
  SSL_CTX* tls_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

}  // namespace streamcar::testing
