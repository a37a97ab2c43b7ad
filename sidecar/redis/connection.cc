#include "sidecar/redis/connection.h"

#include <hiredis.h>

#include <algorithm>

#include "sidecar/redis/topology/sentinel_proto.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::redis {
namespace {

bool IsAuthFailure(const Status& status) {
  return status.IsServerError("WRONGPASS") || status.IsServerError("NOAUTH") ||
         (status.IsServerError("ERR") && status.message().find("AUTH") != std::string::npos);
}

}  // namespace

ConnectionOptions ConnectionOptionsOf(const config::Config& config) {
  ConnectionOptions options;
  options.endpoint = config.redis.endpoint;  // parsed once, by the loader
  options.username =
      !config.redis.username.empty() ? config.redis.username : options.endpoint.username;
  options.password =
      !config.redis.password.empty() ? config.redis.password : options.endpoint.password;
  options.connect_timeout = config.redis.connect_timeout;
  options.command_timeout = config.redis.command_timeout;
  options.tls = config.redis.tls;
  return options;
}

Status ErrorOf(const ReplyView& reply) {
  if (!reply.IsError()) return Status::Ok();
  return Status(StatusCode::kServerError, std::string(reply.Str()));
}

Connection::Connection(std::unique_ptr<Transport> transport, Millis command_timeout)
    : transport_(std::move(transport)), reader_(NewReader()), command_timeout_(command_timeout) {}

Connection::~Connection() = default;

StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options) {
  if (options.topology == nullptr) return OpenAt(options);
  Topology& topology = *options.topology;
  auto node = topology.MasterFor(options.slot);
  if (!node.ok()) return node.status();
  ConnectionOptions at = topology.OptionsFor(*node);
  at.client_name = options.client_name;
  auto connection = OpenAt(at);
  if (!connection.ok()) {
    if (connection.status().code() != StatusCode::kFatal) {
      topology.OnNodeFailed(*node, connection.status().message());
    }
    return connection.status();
  }
  // Under Sentinel the address may be stale (a failover the sentinels have not announced yet,
  // or a demoted master that still answers): only a node that says it is the master is used.
  if (topology.mode() == ResolvedMode::kSentinel) {
    auto role = (*connection)->Run(Command("ROLE"));
    if (!role.ok() || !RoleIsMaster(role->view())) {
      const std::string why = role.ok() ? "ROLE does not say master" : role.status().message();
      topology.OnNodeFailed(*node, why);
      return Status(StatusCode::kIo, "Redis at " + node->Describe() + " is not the master: " + why);
    }
  }
  (*connection)->node_ = *node;
  return connection;
}

StatusOr<std::unique_ptr<Connection>> Connection::OpenAt(const ConnectionOptions& options) {
  auto transport = ConnectTransport(options.endpoint, options.tls, options.connect_timeout);
  if (!transport.ok()) return transport.status();
  std::unique_ptr<Connection> connection(
      new Connection(std::move(*transport), options.command_timeout));
  const SteadyTime deadline = SteadyClock::now() + options.connect_timeout;

  if (!options.password.empty()) {
    Command auth("AUTH");
    if (!options.username.empty()) auth.Arg(options.username);
    auth.Arg(options.password);
    auto reply = connection->RunUntil(auth, deadline);
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError) {
        // The server's text, never the password: "WRONGPASS invalid username-password pair".
        return Status(StatusCode::kFatal, "Redis refused authentication at " +
                                              options.endpoint.Describe() + ": " +
                                              reply.status().message());
      }
      return reply.status();
    }
  }
  if (options.endpoint.db != 0) {
    auto reply =
        connection->RunUntil(Command("SELECT").Arg(int64_t{options.endpoint.db}), deadline);
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError) {
        return Status(StatusCode::kFatal, "cannot select database " +
                                              std::to_string(options.endpoint.db) + ": " +
                                              reply.status().message());
      }
      return reply.status();
    }
  }
  // PING proves the session works; NOAUTH here means a password is required and none was given.
  auto ping = connection->RunUntil(Command("PING"), deadline);
  if (!ping.ok()) {
    if (IsAuthFailure(ping.status())) {
      return Status(StatusCode::kFatal, "Redis at " + options.endpoint.Describe() +
                                            " requires authentication: set redis.password (" +
                                            ping.status().message() + ")");
    }
    if (ping.status().IsServerError("NOPERM")) {
      // Not "unreachable": the ACL user may not run PING, which every connection sends.
      return Status(StatusCode::kFatal, "the Redis ACL user may not run PING at " +
                                            options.endpoint.Describe() + " (" +
                                            ping.status().message() + ")");
    }
    if (ping.status().IsServerError("LOADING")) {
      return Status(StatusCode::kIo, "Redis is loading its dataset: " + ping.status().message());
    }
    return ping.status();
  }
  if (!options.client_name.empty()) {
    std::string name = options.client_name;
    std::replace_if(
        name.begin(), name.end(), [](char c) { return c <= ' ' || c > '~'; }, '_');
    // Best effort: an ACL user may lack CLIENT permission; that is no reason to fail.
    auto named = connection->RunUntil(Command("CLIENT").Arg("SETNAME").Arg(name), deadline);
    if (!named.ok() && named.status().code() != StatusCode::kServerError) return named.status();
  }
  return connection;
}

StatusOr<std::unique_ptr<Transport>> Connection::TakeTransport() && {
  if (broken_ || transport_ == nullptr) return Status(StatusCode::kIo, "connection is broken");
  if (reader_->len > reader_->pos) {
    return Fail(Status(StatusCode::kProtocol, "Redis sent a reply nobody asked for"));
  }
  broken_ = true;
  return std::move(transport_);
}

bool Connection::ClosedByPeer() const {
  return transport_ == nullptr || transport_->ClosedByPeer();
}

Status Connection::Fail(Status status) {
  broken_ = true;
  return status;
}

StatusOr<Reply> Connection::ReadReply(SteadyTime deadline) {
  char buffer[16384];
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      return Fail(Status(StatusCode::kProtocol,
                         std::string("cannot decode Redis reply: ") + reader_->errstr));
    }
    if (raw != nullptr) return Reply(ReplyPtr(static_cast<redisReply*>(raw)));
    auto n = transport_->ReadSome(buffer, sizeof(buffer), deadline);
    if (!n.ok()) return Fail(n.status());
    if (redisReaderFeed(reader_.get(), buffer, *n) != REDIS_OK) {
      return Fail(Status(StatusCode::kProtocol, "cannot buffer Redis reply"));
    }
  }
}

StatusOr<Reply> Connection::RunUntil(const Command& command, SteadyTime deadline) {
  if (broken_) return Status(StatusCode::kIo, "connection is broken");
  write_buffer_.clear();
  command.AppendTo(&write_buffer_);
  if (auto s = transport_->WriteAll(write_buffer_, deadline); !s.ok()) return Fail(s);
  auto reply = ReadReply(deadline);
  if (!reply.ok()) return reply;
  if (reply->IsError()) return ErrorOf(reply->view());
  return reply;
}

StatusOr<Reply> Connection::Run(const Command& command) {
  return RunUntil(command, SteadyClock::now() + command_timeout_);
}

StatusOr<Reply> Connection::RunBlocking(const Command& command, Millis server_block) {
  return RunUntil(command, SteadyClock::now() + server_block + command_timeout_);
}

StatusOr<std::vector<Reply>> Connection::RunPipeline(const std::vector<Command>& commands) {
  if (broken_) return Status(StatusCode::kIo, "connection is broken");
  const SteadyTime deadline = SteadyClock::now() + command_timeout_;
  write_buffer_.clear();
  for (const auto& command : commands) command.AppendTo(&write_buffer_);
  if (auto s = transport_->WriteAll(write_buffer_, deadline); !s.ok()) return Fail(s);
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    auto reply = ReadReply(deadline);
    if (!reply.ok()) return reply.status();
    replies.push_back(std::move(*reply));
  }
  return replies;
}

std::string ClientName(std::string_view consumer, std::initializer_list<std::string_view> parts) {
  std::string name = "streamcar:";
  name += consumer;
  for (std::string_view part : parts) {
    name += ':';
    name += part;
  }
  return name;
}

}  // namespace streamcar::redis
