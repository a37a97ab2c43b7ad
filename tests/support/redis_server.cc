#include "tests/support/redis_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace streamcar::testing {

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  char* made = ::mkdtemp(pattern.data());
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  return made;
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
  dir_ = MakeTempDir("streamcar-redis-");
  port_ = FreePort();
  if (options_.tls) certificates_ = MakeTestCertificates(dir_);
  Start();
}

RedisServer::~RedisServer() {
  Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::Start() {
  std::vector<std::string> args = {
      "redis-server",      "--bind",      "127.0.0.1", "--dir", dir_, "--save", "", "--logfile",
      dir_ + "/redis.log", "--daemonize", "no"};
  if (options_.tls) {
    args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file",
                             certificates_.server_cert, "--tls-key-file", certificates_.server_key,
                             "--tls-ca-cert-file", certificates_.ca_cert, "--tls-auth-clients",
                             options_.tls_auth_clients});
  } else {
    args.insert(args.end(), {"--port", std::to_string(port_)});
  }
  if (options_.append_only) {
    for (const char* a : {"--appendonly", "yes", "--appendfsync", "always"}) args.emplace_back(a);
  } else {
    args.insert(args.end(), {"--appendonly", "no"});
  }
  if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
  if (options_.unix_socket)
    args.insert(args.end(), {"--unixsocket", socket_path(), "--unixsocketperm", "700"});
  args.insert(args.end(), options_.extra.begin(), options_.extra.end());

  pid_ = ::fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Another server binary (e.g. a newer Redis or Valkey) when the environment names one.
    const char* binary = std::getenv("STREAMCAR_TEST_REDIS_SERVER");
    ::execvp(binary != nullptr && *binary != '\0' ? binary : "redis-server", argv.data());
    ::_exit(127);
  }
  // Ready when it answers (LOADING counts as not yet).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    redis::ConnectionOptions options = ClientOptions();
    options.connect_timeout = Millis(200);
    if (auto c = redis::Connection::Open(options); c.ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "redis-server did not start on port " << port_;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

redis::ConnectionOptions RedisServer::ClientOptions() const {
  redis::ConnectionOptions options;
  options.endpoint.kind =
      options_.tls ? config::RedisEndpoint::Kind::kTls : config::RedisEndpoint::Kind::kTcp;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = port_;
  options.password = options_.password;
  if (options_.tls) {
    options.tls.ca_file = certificates_.ca_cert;
    if (options_.tls_auth_clients == "yes") {
      options.tls.cert_file = certificates_.client_cert;
      options.tls.key_file = certificates_.client_key;
    }
  }
  return options;
}

std::unique_ptr<redis::Connection> RedisServer::Connect(const std::string& username,
                                                        const std::string& password) const {
  redis::ConnectionOptions options = ClientOptions();
  options.username = username;
  options.password = password.empty() ? options_.password : password;
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) {
    ADD_FAILURE() << "cannot connect to test redis: " << connection.status().message();
    return nullptr;
  }
  return std::move(*connection);
}

redis::Reply RedisServer::Run(const std::vector<std::string>& args) const {
  redis::Reply reply = RunAllowingError(args);
  if (reply.IsError()) {
    std::string command;
    for (const auto& a : args) command += (command.empty() ? "" : " ") + a.substr(0, 64);
    ADD_FAILURE() << "redis refused `" << command << "`: " << reply.view().Str();
  }
  return reply;
}

redis::Reply RedisServer::RunAllowingError(const std::vector<std::string>& args) const {
  auto connection = Connect();
  if (!connection) return {};
  redis::Command command(args.front());
  for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
  auto replies = connection->RunPipeline({command});
  if (!replies.ok()) {
    ADD_FAILURE() << "redis command failed: " << replies.status().message();
    return {};
  }
  return std::move((*replies)[0]);
}

}  // namespace streamcar::testing
