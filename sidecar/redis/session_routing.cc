// The routed half of Session (session.h): one connection per node, each command sent where its
// key's slot lives and carried through the cluster's redirects by a RouteAttempt.

#include <hiredis.h>

#include <cctype>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/topology/command_keys.h"
#include "sidecar/redis/topology/route_attempt.h"

namespace streamcar::redis {
namespace {

// The error reply a server sent, rebuilt from the Status a Connection made of it (RunBlocking
// keeps only the text): routing classifies replies, and a pipeline's caller expects one.
Reply ErrorReplyOf(const Status& status) {
  std::string wire = "-" + status.message();
  for (char& c : wire) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  wire += "\r\n";
  ReaderPtr reader = NewReader();
  void* raw = nullptr;
  if (reader == nullptr || redisReaderFeed(reader.get(), wire.data(), wire.size()) != REDIS_OK ||
      redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) {
    return Reply();
  }
  return Reply(ReplyPtr(static_cast<redisReply*>(raw)));
}

bool IsNamed(const Command& command, std::string_view upper) {
  const std::string_view name = command.name();
  if (name.size() != upper.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(name[i])) != upper[i]) return false;
  }
  return true;
}

}  // namespace

int Session::RouteSlotOf(const Command& command) const {
  return routes_->ByKeySlot() ? SlotOf(command) : -1;
}

Status Session::RoutedConnectOnce(Millis* retry_in) {
  std::vector<keys::NodeAddress> closed;
  for (const auto& [node, connection] : nodes_) {
    if (connection->ClosedByPeer()) closed.push_back(node);
  }
  // Opened again on demand; the topology learns of a node that is really gone when it is.
  for (const auto& node : closed) ForgetNode(node);
  if (!nodes_.empty()) return Status::Ok();
  auto master = routes_->MasterFor(-1);
  Status status = master.status();
  if (master.ok()) {
    auto connection = ConnectionTo(*master);
    if (connection.ok()) {
      reconnect_.Succeeded();
      return Status::Ok();
    }
    status = connection.status();
  }
  if (status.code() == StatusCode::kFatal) return status;
  *retry_in = reconnect_.Failed();
  LogWarn("redis unreachable, retrying",
          {{"role", role_},
           {"error", status.message()},
           {"retry_in_ms", static_cast<int64_t>(retry_in->count())}});
  return status;
}

StatusOr<Connection*> Session::ConnectionTo(const keys::NodeAddress& node) {
  auto found = nodes_.find(node);
  if (found != nodes_.end() && !found->second->broken()) return found->second.get();
  if (found != nodes_.end()) nodes_.erase(found);
  ConnectionOptions options = routes_->OptionsFor(node);
  options.client_name = options_.client_name;
  auto opened = Connection::Open(options);
  if (!opened.ok()) {
    if (opened.status().code() != StatusCode::kFatal) {
      routes_->OnNodeFailed(node, opened.status().message());
    }
    return opened.status();
  }
  ++generation_;
  MarkUp();
  Connection* connection = opened->get();
  nodes_[node] = std::move(*opened);
  return connection;
}

void Session::DropNode(const keys::NodeAddress& node, std::string_view why) {
  ++lost_connections_;
  ForgetNode(node);
  routes_->OnNodeFailed(node, why);
}

void Session::ForgetNode(const keys::NodeAddress& node) {
  nodes_.erase(node);
  if (nodes_.empty() && !counted_down_) {
    counted_down_ = true;
    health_->MarkDown();
  }
}

void Session::RememberScript(const Command& command, const ReplyView& reply) {
  if (!IsNamed(command, "SCRIPT") || !reply.IsString()) return;
  auto args = ArgumentsOf(command);
  if (args.size() != 3 || !IsNamed(Command(args[1]), "LOAD")) return;
  scripts_[std::string(reply.Str())] = std::move(args[2]);
}

std::optional<std::string> Session::ScriptBodyFor(const Command& command) const {
  if (!IsNamed(command, "EVALSHA") && !IsNamed(command, "EVALSHA_RO")) return std::nullopt;
  const auto args = ArgumentsOf(command);
  if (args.size() < 2) return std::nullopt;
  auto found = scripts_.find(args[1]);
  if (found == scripts_.end()) return std::nullopt;
  return found->second;
}

StatusOr<Reply> Session::SendTo(const keys::NodeAddress& node, const Command& command,
                                Millis server_block, bool asking, bool* sent) {
  *sent = false;
  auto connection = ConnectionTo(node);
  if (!connection.ok()) return connection.status();
  *sent = true;
  StatusOr<Reply> reply = Status(StatusCode::kIo, "not sent");
  if (server_block > Millis(0)) {
    // ASKING holds for the connection's next command: sent alone, then the blocking command
    // with its own deadline (a pipeline would give it only the command timeout).
    if (asking) {
      auto asked = (*connection)->Run(Command("ASKING"));
      if (!asked.ok() && asked.status().code() != StatusCode::kServerError) {
        DropNode(node, asked.status().message());
        return asked.status();
      }
    }
    reply = (*connection)->RunBlocking(command, server_block);
    if (!reply.ok() && reply.status().code() == StatusCode::kServerError) {
      reply = ErrorReplyOf(reply.status());
    }
  } else {
    std::vector<Command> batch;
    if (asking) batch.emplace_back("ASKING");
    batch.push_back(command);
    auto replies = (*connection)->RunPipeline(batch);
    if (replies.ok()) {
      reply = std::move(replies->back());
    } else {
      reply = replies.status();
    }
  }
  if (!reply.ok()) {
    DropNode(node, reply.status().message());
    return reply.status();
  }
  RememberScript(command, reply->view());
  return reply;
}

StatusOr<Reply> Session::Follow(const Command& command, int slot, Millis server_block,
                                keys::NodeAddress target, std::optional<Reply> first) {
  const SteadyTime deadline = SteadyClock::now() + options_.command_timeout + server_block;
  RouteAttempt attempt(slot, std::move(target), deadline);
  bool asking = false;
  bool script_loaded = false;
  std::optional<Reply> reply = std::move(first);
  Status last_failure = Status::Ok();
  // Waits, then asks where the slot lives now (when nobody can say, the same node once more).
  auto refresh = [&]() {
    std::this_thread::sleep_for(attempt.retry_after());
    auto master = routes_->MasterFor(slot);
    if (master.ok()) attempt.Retarget(*master);
  };
  while (true) {
    if (!reply) {
      const keys::NodeAddress node = attempt.target();
      bool sent = false;
      auto answer = SendTo(node, command, server_block, asking, &sent);
      asking = false;
      if (!answer.ok()) {
        // A lost connection after the send: the same Status as unrouted (the caller classes an
        // unanswered write). A refused connect: the command never left, so try the slot's master
        // again (a failover) until the deadline.
        if (sent || answer.status().code() == StatusCode::kFatal) return answer.status();
        last_failure = answer.status();
        if (attempt.OnConnectionLost(false, SteadyClock::now()) == RouteAttempt::Next::kFail) {
          return last_failure;
        }
        refresh();
        continue;
      }
      reply = std::move(*answer);
    }
    const keys::NodeAddress answered = attempt.target();
    if (IsNoScript(reply->view()) && !script_loaded) {
      // This node lacks a script the session loaded elsewhere (a redirect, a new master).
      if (auto body = ScriptBodyFor(command)) {
        script_loaded = true;
        bool sent = false;
        auto loaded = SendTo(answered, Script(*body).Load(), Millis(0), false, &sent);
        if (!loaded.ok()) return loaded.status();
        reply.reset();
        continue;
      }
    }
    switch (attempt.OnReply(reply->view(), SteadyClock::now())) {
      case RouteAttempt::Next::kDone:
      case RouteAttempt::Next::kFail:
        return std::move(*reply);
      case RouteAttempt::Next::kSendTo:
        routes_->OnMoved(attempt.redirect(), answered);
        break;
      case RouteAttempt::Next::kSendAskingTo:
        routes_->OnAsk();
        asking = true;
        break;
      case RouteAttempt::Next::kRetryAfter:
        std::this_thread::sleep_for(attempt.retry_after());
        break;
      case RouteAttempt::Next::kRefreshAndRetry:
        routes_->OnNodeFailed(answered, ReplyKindName(attempt.last_kind()));
        refresh();
        break;
    }
    reply.reset();
  }
}

StatusOr<Reply> Session::RoutedRun(const Command& command, Millis server_block) {
  const int slot = RouteSlotOf(command);
  auto master = routes_->MasterFor(slot);
  if (!master.ok()) return master.status();
  auto reply = Follow(command, slot, server_block, std::move(*master), std::nullopt);
  if (!reply.ok()) return reply.status();
  // As Connection::Run: an error reply is a kServerError carrying the server's text.
  if (reply->IsError()) return ErrorOf(reply->view());
  return reply;
}

// A pipeline on its way through the nodes (RoutedPipeline): where each command goes, and what
// came back for it.
struct Session::RoutedBatch {
  explicit RoutedBatch(const std::vector<Command>& commands)
      : commands(commands),
        slots(commands.size(), -1),
        in_transaction(commands.size(), false),
        replies(commands.size()),
        answered_by(commands.size()),
        answered(commands.size(), false) {}

  const std::vector<Command>& commands;
  std::vector<int> slots;
  // Between MULTI and EXEC (or DISCARD): queued and answered on one node, its replies stand.
  std::vector<bool> in_transaction;
  std::vector<keys::NodeAddress> order;  // the nodes, in the order they first appear
  std::map<keys::NodeAddress, std::vector<size_t>> groups;  // node -> its commands' indexes
  std::vector<Reply> replies;
  std::vector<keys::NodeAddress> answered_by;
  std::vector<bool> answered;
};

void Session::PlanSlots(RoutedBatch* batch) const {
  const std::vector<Command>& commands = batch->commands;
  std::vector<int>& slots = batch->slots;
  const size_t n = commands.size();
  // A keyless command (SCRIPT LOAD before the EVALSHA that needs it) goes with the next keyed
  // command, else the previous one; MULTI ... EXEC goes whole to the slot of its first key (a
  // transaction cannot span nodes).
  for (size_t i = 0; i < n; ++i) slots[i] = RouteSlotOf(commands[i]);
  for (size_t i = 0; i < n; ++i) {
    if (!IsNamed(commands[i], "MULTI")) continue;
    size_t end = i;
    while (end < n && !IsNamed(commands[end], "EXEC") && !IsNamed(commands[end], "DISCARD")) ++end;
    if (end == n) end = n - 1;
    int slot = -1;
    for (size_t j = i; j <= end && slot < 0; ++j) slot = slots[j];
    for (size_t j = i; j <= end; ++j) {
      slots[j] = slot;
      batch->in_transaction[j] = true;
    }
    i = end;
  }
  for (size_t i = n; i-- > 0;) {
    if (slots[i] < 0 && i + 1 < n) slots[i] = slots[i + 1];
  }
  for (size_t i = 1; i < n; ++i) {
    if (slots[i] < 0) slots[i] = slots[i - 1];
  }
}

Status Session::GroupByNode(RoutedBatch* batch) {
  std::map<int, keys::NodeAddress> master_of_slot;
  for (size_t i = 0; i < batch->commands.size(); ++i) {
    auto known = master_of_slot.find(batch->slots[i]);
    if (known == master_of_slot.end()) {
      auto master = routes_->MasterFor(batch->slots[i]);
      if (!master.ok()) return master.status();
      known = master_of_slot.emplace(batch->slots[i], std::move(*master)).first;
    }
    auto& group = batch->groups[known->second];
    if (group.empty()) batch->order.push_back(known->second);
    group.push_back(i);
  }
  return Status::Ok();
}

Status Session::SendGroups(RoutedBatch* batch) {
  for (const keys::NodeAddress& node : batch->order) {
    const std::vector<size_t>& indexes = batch->groups[node];
    auto connection = ConnectionTo(node);
    if (!connection.ok()) {
      if (connection.status().code() == StatusCode::kFatal) return connection.status();
      continue;  // each command is sent on its own later, through the slot's master again
    }
    std::vector<Command> sub_pipeline;
    sub_pipeline.reserve(indexes.size());
    for (size_t i : indexes) sub_pipeline.push_back(batch->commands[i]);
    auto got = (*connection)->RunPipeline(sub_pipeline);
    if (!got.ok()) {
      DropNode(node, got.status().message());
      return got.status();
    }
    for (size_t k = 0; k < indexes.size(); ++k) {
      const size_t i = indexes[k];
      RememberScript(batch->commands[i], (*got)[k].view());
      batch->replies[i] = std::move((*got)[k]);
      batch->answered_by[i] = node;
      batch->answered[i] = true;
    }
  }
  return Status::Ok();
}

Status Session::FollowUnsettled(RoutedBatch* batch) {
  for (size_t i = 0; i < batch->commands.size(); ++i) {
    if (batch->in_transaction[i]) continue;
    const Command& command = batch->commands[i];
    Reply& reply = batch->replies[i];
    if (batch->answered[i]) {
      const bool script_missing = IsNoScript(reply.view()) && ScriptBodyFor(command).has_value();
      if (!RouteAttempt::Reroutes(reply.view()) && !script_missing) continue;
      auto followed =
          Follow(command, batch->slots[i], Millis(0), batch->answered_by[i], std::move(reply));
      if (!followed.ok()) return followed.status();
      reply = std::move(*followed);
    } else {
      auto master = routes_->MasterFor(batch->slots[i]);
      if (!master.ok()) return master.status();
      auto followed = Follow(command, batch->slots[i], Millis(0), std::move(*master), std::nullopt);
      if (!followed.ok()) return followed.status();
      reply = std::move(*followed);
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<Reply>> Session::RoutedPipeline(const std::vector<Command>& commands) {
  RoutedBatch batch(commands);
  PlanSlots(&batch);
  // One sub-pipeline per node, in the order the nodes first appear.
  if (Status s = GroupByNode(&batch); !s.ok()) return s;
  if (Status s = SendGroups(&batch); !s.ok()) return s;
  // Commands that were redirected, met a transient state, or whose node could not be reached:
  // each is carried through on its own.
  if (Status s = FollowUnsettled(&batch); !s.ok()) return s;
  return std::move(batch.replies);
}

}  // namespace streamcar::redis
