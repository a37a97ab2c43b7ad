#include "sidecar/redis/async_connection.h"

#include <hiredis.h>

#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "sidecar/redis/topology/route_reaction.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::redis {
namespace {

constexpr size_t kReadChunk = 16384;

// With a topology, a refused connect is usually a master that died: its replica takes over
// within seconds, and a shorter cap bounds the stall after it does (SPEC 8).
constexpr Millis kTopologyRetryCap{1000};
// How long a connection keeps following an -ASK before it asks the slot's owner again.
constexpr Millis kAskingFor{1000};

const Command& AskingCommand() {
  static const Command asking("ASKING");
  return asking;
}
// Reads per readiness round before the loop serves others; TLS bytes OpenSSL already holds are
// picked up by the read-again timer (they raise no fd event).
constexpr int kReadsPerRound = 16;

}  // namespace

AsyncConnection::AsyncConnection(EventLoop& loop, Connector& connector, ConnectionOptions options,
                                 std::string role, RedisHealth* health,
                                 std::span<const Script* const> scripts)
    : loop_(loop),
      connector_(connector),
      options_(std::move(options)),
      role_(std::move(role)),
      health_(health),
      scripts_(scripts.begin(), scripts.end()),
      reader_(NewReader()),
      reconnect_(kReconnectInitial,
                 options_.topology != nullptr ? kTopologyRetryCap : kReconnectCap) {
  deadline_timer_ = loop_.CreateTimer(
      [this] { Break(Status(StatusCode::kTimeout, "no answer from Redis in time"), true); });
  retry_timer_ = loop_.CreateTimer([this] { Connect(); });
  read_again_timer_ = loop_.CreateTimer([this] { OnIo(EventLoop::kReadable); });
  failure_timer_ = loop_.CreateTimer([this] {
    Status failure = std::move(pending_failure_);
    pending_failure_ = Status::Ok();
    Break(failure, true);
  });
  // Until it first connects, the connection counts as down: /readyz waits for it.
  MarkDown();
  Connect();
}

AsyncConnection::~AsyncConnection() {
  lifeline_.reset();
  if (counted_down_ && health_ != nullptr) health_->MarkUp();
}

void AsyncConnection::MarkDown() {
  if (counted_down_) return;
  counted_down_ = true;
  if (health_ != nullptr) health_->MarkDown();
}

void AsyncConnection::MarkUp() {
  if (!counted_down_) return;
  counted_down_ = false;
  if (health_ != nullptr) health_->MarkUp();
}

// --- connecting -------------------------------------------------------------------------------

void AsyncConnection::Connect() {
  state_ = State::kConnecting;
  retarget_pending_ = false;
  // Read before the opening asks the topology: a change while it runs is checked at next send.
  if (options_.topology != nullptr) topology_version_ = options_.topology->version();
  std::weak_ptr<bool> alive = lifeline_;
  ConnectionOptions open = options_;
  if (ask_node_) {
    open = options_.topology->OptionsFor(*ask_node_);
    open.client_name = options_.client_name;
  }
  connector_.OpenRedis(std::move(open), [this, alive](StatusOr<OpenedConnection> opened) {
    if (alive.expired()) return;  // destroyed meanwhile: the transport closes with `opened`
    OnOpened(std::move(opened));
  });
}

void AsyncConnection::OnOpened(StatusOr<OpenedConnection> opened) {
  if (state_ == State::kClosed) return;
  if (opened.ok()) {
    auto watch = loop_.Watch(opened->transport->fd(), EventLoop::kReadable,
                             [this](uint32_t ready) { OnIo(ready); });
    if (!watch.ok()) opened = watch.status();
    if (opened.ok()) watch_ = std::move(*watch);
  }
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kFatal) {
      state_ = State::kFatal;
      LogError("redis refused the connection; not retrying",
               {{"role", role_}, {"error", opened.status().message()}});
      if (on_fatal_) on_fatal_(opened.status());
      return;
    }
    state_ = State::kWaitingToRetry;
    MarkDown();         // a planned move that could not connect is an outage after all
    ask_node_.reset();  // the next attempt asks the topology for the slot's master
    const Millis retry_in = reconnect_.Failed();  // capped at kTopologyRetryCap with a topology
    // One line per backoff step: the steps double up to the cap, so a long outage stays quiet.
    LogWarn("redis unreachable, retrying",
            {{"role", role_},
             {"error", opened.status().message()},
             {"retry_in_ms", static_cast<int64_t>(retry_in.count())}});
    retry_timer_->ArmIn(retry_in);
    return;
  }
  transport_ = std::move(opened->transport);
  client_id_ = opened->client_id;
  node_ = ask_node_ ? ask_node_ : opened->node;
  ++generation_;
  if (reconnect_.failures() > 0) {
    LogInfo("redis connection restored", {{"role", role_},
                                          {"redis", options_.endpoint.Describe()},
                                          {"after_failures", reconnect_.failures()}});
  }
  reconnect_.Succeeded();
  MarkUp();
  LoadScripts();
}

void AsyncConnection::LoadScripts() {
  if (scripts_.empty()) {
    state_ = State::kReady;
    if (on_ready_) on_ready_();
    return;
  }
  state_ = State::kLoadingScripts;
  std::vector<Command> loads;
  loads.reserve(scripts_.size());
  for (const Script* script : scripts_) loads.push_back(script->Load());
  const uint64_t generation = generation_;
  Queue(loads, options_.command_timeout, [this, generation](const BatchResult& result) {
    // A broken connection fails this batch too: the reconnect loads them again.
    if (!result.failure.ok() || generation != generation_) return;
    for (const Reply& reply : result.replies) {
      if (reply.IsError()) {
        // A script that could not be loaded answers NOSCRIPT later, which the caller handles
        // by loading it again: the connection is usable without it.
        LogWarn("redis refused to load a script", {{"role", role_}, {"error", reply.view().Str()}});
      }
    }
    state_ = State::kReady;
    if (on_ready_) on_ready_();
  });
}

// --- sending --------------------------------------------------------------------------------

size_t AsyncConnection::outstanding() const {
  size_t count = 0;
  for (const Batch& batch : batches_) count += batch.expected - batch.answered;
  return count;
}

void AsyncConnection::SendBatch(const std::vector<Command>& commands, Millis timeout,
                                std::function<void(BatchResult)> done) {
  CheckTopology();
  if (!connected() || retarget_pending_ || commands.empty()) {
    BatchResult result;
    if (state_ == State::kClosed) {
      result.failure = Status(StatusCode::kCancelled, "the Redis connection is closed");
    } else if (!connected()) {
      result.failure = Status(StatusCode::kIo, "not connected to Redis");
    } else if (retarget_pending_ && !commands.empty()) {
      result.failure = Status(StatusCode::kIo, "moving to the slot's new master");
    }
    result.written = commands.empty();
    // Never inside the call that queued it.
    loop_.Post([done = std::move(done), result = std::make_shared<BatchResult>(
                                            std::move(result))]() { done(std::move(*result)); });
    return;
  }
  Queue(commands, timeout, std::move(done));
}

void AsyncConnection::Send(Command command, std::function<void(StatusOr<Reply>)> done) {
  Send(std::move(command), options_.command_timeout, std::move(done));
}

void AsyncConnection::Send(Command command, Millis timeout,
                           std::function<void(StatusOr<Reply>)> done) {
  std::vector<Command> commands;
  commands.push_back(std::move(command));
  SendBatch(commands, timeout, [done = std::move(done)](BatchResult result) {
    if (!result.failure.ok()) return done(result.failure);
    Reply& reply = result.replies[0];
    if (reply.IsError()) return done(ErrorOf(reply.view()));
    done(std::move(reply));
  });
}

void AsyncConnection::SendBlocking(Command command, Millis server_block,
                                   std::function<void(StatusOr<Reply>)> done) {
  Send(std::move(command), server_block + options_.command_timeout, std::move(done));
}

void AsyncConnection::Queue(const std::vector<Command>& commands, Millis timeout,
                            std::function<void(BatchResult)> done) {
  Batch batch;
  batch.asking = ask_node_.has_value();
  batch.expected = commands.size() * (batch.asking ? 2 : 1);
  batch.replies.reserve(commands.size());
  batch.stream_begin = stream_queued_;
  batch.done = std::move(done);
  const size_t before = output_.size();
  for (const Command& command : commands) {
    if (batch.asking) AskingCommand().AppendTo(&output_);
    command.AppendTo(&output_);
  }
  stream_queued_ += output_.size() - before;
  batch.deadline = deadlines_.insert(loop_.clock().Now() + timeout);
  batches_.push_back(std::move(batch));
  ArmDeadline();
  if (!pending_failure_.ok()) return;  // already broken; the failure timer fails this batch too
  // Written now rather than next round: one send for a lone command. A failure is reported
  // from the loop, never inside the call that queued the batch.
  if (Status status = FlushOutput(); !status.ok()) {
    pending_failure_ = std::move(status);
    failure_timer_->ArmIn(Millis(0));
  }
}

Status AsyncConnection::FlushOutput() {
  while (output_sent_ < output_.size()) {
    std::string_view rest(output_);
    rest.remove_prefix(output_sent_);
    auto n = transport_->TryWrite(rest, &write_wait_);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    output_sent_ += *n;
    stream_written_ += *n;
  }
  if (output_sent_ == output_.size()) {
    output_.clear();
    output_sent_ = 0;
  } else if (output_sent_ > output_.size() / 2) {
    output_.erase(0, output_sent_);  // keeps the buffer from growing while the socket is slow
    output_sent_ = 0;
  }
  UpdateInterest();
  return Status::Ok();
}

void AsyncConnection::UpdateInterest() {
  if (watch_ == nullptr) return;
  uint32_t interest = EventLoop::kReadable;
  const bool output_waits = output_sent_ < output_.size();
  if ((output_waits && write_wait_ == IoWait::kWritable) || read_wait_ == IoWait::kWritable) {
    interest |= EventLoop::kWritable;
  }
  watch_->SetInterest(interest);
}

void AsyncConnection::ArmDeadline() {
  if (deadlines_.empty()) {
    deadline_timer_->Cancel();
    return;
  }
  const SteadyTime earliest = *deadlines_.begin();
  if (deadline_timer_->deadline() != earliest) deadline_timer_->ArmAt(earliest);
}

// --- receiving ------------------------------------------------------------------------------

void AsyncConnection::OnIo(uint32_t /*ready*/) {
  if (!pending_failure_.ok()) {
    failure_timer_->Cancel();
    Status failure = std::move(pending_failure_);
    pending_failure_ = Status::Ok();
    Break(failure, true);
    return;
  }
  if (transport_ == nullptr) return;
  // Whatever woke us: pending output first (a TLS write may have waited for a read), then
  // input. Reading when nothing is there costs one EAGAIN.
  if (output_sent_ < output_.size()) {
    if (Status status = FlushOutput(); !status.ok()) return Break(status, true);
  }
  ReadInput();
}

void AsyncConnection::ReadInput() {
  std::weak_ptr<bool> alive = lifeline_;
  const uint64_t generation = generation_;
  char buffer[kReadChunk];
  for (int round = 0; round < kReadsPerRound; ++round) {
    auto n = transport_->TryRead(buffer, sizeof(buffer), &read_wait_);
    if (!n.ok()) return Break(n.status(), true);
    if (*n == 0) {
      UpdateInterest();
      return;
    }
    if (redisReaderFeed(reader_.get(), buffer, *n) != REDIS_OK) {
      return Break(Status(StatusCode::kProtocol, "cannot buffer Redis reply"), true);
    }
    while (true) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
        return Break(Status(StatusCode::kProtocol,
                            std::string("cannot decode Redis reply: ") + reader_->errstr),
                     true);
      }
      if (raw == nullptr) break;
      DeliverReply(Reply(ReplyPtr(static_cast<redisReply*>(raw))));
      // A callback may have closed or destroyed the connection, or it broke meanwhile.
      if (alive.expired() || generation != generation_ || transport_ == nullptr) return;
    }
    if (*n < sizeof(buffer)) break;  // the socket (or OpenSSL) had no more for now
  }
  UpdateInterest();
  // Bytes OpenSSL decrypted but we did not take raise no fd event: come back next round.
  if (transport_->HasBuffered()) read_again_timer_->ArmIn(Millis(0));
}

void AsyncConnection::DeliverReply(Reply reply) {
  if (batches_.empty()) {
    return Break(Status(StatusCode::kProtocol, "Redis sent a reply nobody asked for"), true);
  }
  Batch& head = batches_.front();
  ++head.answered;
  // ASKING's own answer (+OK) precedes each command's in an asking batch.
  const bool asking_answer = head.asking && head.answered % 2 == 1;
  if (!asking_answer) {
    if (reply.IsError() && options_.topology != nullptr) NoteTopologyError(reply.view());
    head.replies.push_back(std::move(reply));
  }
  if (head.answered < head.expected) return;
  Batch done = std::move(head);
  batches_.pop_front();
  deadlines_.erase(done.deadline);
  ArmDeadline();
  std::weak_ptr<bool> alive = lifeline_;
  done.done(BatchResult{std::move(done.replies), Status::Ok(), true});
  if (alive.expired()) return;
  if (retarget_pending_ && batches_.empty() && transport_ != nullptr) Retarget();
}

// --- following the topology -----------------------------------------------------------------

bool AsyncConnection::FollowingAsk() {
  CheckTopology();
  return ask_node_.has_value();
}

void AsyncConnection::CheckTopology() {
  if (options_.topology == nullptr || !connected() || retarget_pending_) return;
  if (ask_node_ && loop_.clock().Now() - ask_since_ >= kAskingFor) {
    // An -ASK holds for one command (SPEC 8); following it for a moment saves a round trip per
    // command while a migration runs. Then back to the map's owner: still migrating, it answers
    // -ASK again; done, it answers -MOVED, which moves the map and this connection for good.
    ask_node_.reset();
    RequestRetarget(asked_from_.Describe());
    return;
  }
  const uint64_t version = options_.topology->version();
  if (version == topology_version_) return;
  topology_version_ = version;
  const auto master = options_.topology->KnownMasterFor(options_.slot);
  if (!master || !node_) return;
  if (ask_node_ && *master == *ask_node_) {
    ask_node_.reset();  // the migration finished: this node owns the slot, ASKING is not needed
    return;
  }
  if (ask_node_ && *master == asked_from_) return;  // still migrating
  if (*master != *node_) {
    ask_node_.reset();
    RequestRetarget(master->Describe());
  }
}

void AsyncConnection::NoteTopologyError(const ReplyView& reply) {
  // What the reply means is route_reaction.h's; this connection serves one slot, so it moves
  // itself, and the command that got the reply fails as an error reply for its caller to retry.
  const RouteVerdict verdict = ReactTo(reply, node_.value_or(keys::NodeAddress()));
  const Redirect& redirect = verdict.redirect;
  switch (verdict.reaction) {
    case RouteReaction::kFollowMoved:
      if (node_) options_.topology->OnMoved(redirect, *node_);
      // A command for another slot was misrouted; this connection's own slot did not move.
      if (redirect.slot == options_.slot) {
        ask_node_.reset();
        RequestRetarget(redirect.to.Describe());
      }
      break;
    case RouteReaction::kFollowAsk:
      // The slot is migrating and the key has gone: follow it there with ASKING (SPEC 8). The
      // command that got -ASK fails as an error reply; the caller's retry goes to the new node.
      if (redirect.slot != options_.slot || !node_ || !UsableHost(redirect)) break;
      if (ask_node_ && *ask_node_ == redirect.to) break;
      options_.topology->OnAsk();
      asked_from_ = *node_;
      ask_node_ = redirect.to;
      ask_since_ = loop_.clock().Now();
      RequestRetarget(redirect.to.Describe() + " (ASKING)");
      break;
    case RouteReaction::kDemoted:   // a demoted master (Sentinel): find the new one
    case RouteReaction::kReleased:  // a role change released this connection's blocked read
      if (node_) options_.topology->OnNodeFailed(*node_, reply.Str());
      RequestRetarget("a new master");
      break;
    case RouteReaction::kNodeDown:
      // The node may still be the master: the map read this asks for decides.
      if (node_) options_.topology->OnNodeFailed(*node_, reply.Str());
      break;
    case RouteReaction::kWait:
    case RouteReaction::kNone:
      break;
  }
}

std::optional<int> AsyncConnection::KnownReplicas() const {
  if (!options_.topology || !node_ || ask_node_) return std::nullopt;
  return options_.topology->KnownReplicasFor(options_.slot, *node_);
}

void AsyncConnection::FollowDemotedMaster(std::string_view why) {
  if (!options_.topology) return;
  if (node_) options_.topology->OnNodeFailed(*node_, why);
  // Broken meanwhile (the reply that said so came with a failure): the reconnect under way asks
  // the topology anyway, and a retarget requested now would never run.
  if (connected()) RequestRetarget("a new master");
}

void AsyncConnection::RequestRetarget(const std::string& to) {
  if (retarget_pending_) return;
  retarget_pending_ = true;
  LogInfo("redis connection follows the slot to another node",
          {{"role", role_},
           {"from", node_ ? node_->Describe() : options_.endpoint.Describe()},
           {"to", to}});
  if (batches_.empty() && transport_ != nullptr) {
    // Never inside the call that noticed it: the caller may be sending.
    std::weak_ptr<bool> alive = lifeline_;
    loop_.Post([this, alive] {
      if (!alive.expired() && retarget_pending_ && batches_.empty() && transport_ != nullptr) {
        Retarget();
      }
    });
  }
}

void AsyncConnection::Retarget() {
  // Nothing is outstanding: closing loses no reply, and Connect asks the topology anew. A planned
  // move, not an outage: readiness and redis_up stay as they are unless the new node cannot be
  // reached.
  moving_ = true;
  Break(Status(StatusCode::kIo, "following the slot to its new master"), true);
}

// --- failing --------------------------------------------------------------------------------

void AsyncConnection::Break(const Status& status, bool reconnect) {
  std::deque<Batch> failed = std::move(batches_);
  batches_.clear();
  // Whether any byte of a batch reached the socket decides `written` (SPEC's ambiguous class).
  std::vector<bool> written;
  written.reserve(failed.size());
  for (const Batch& batch : failed) written.push_back(stream_written_ > batch.stream_begin);
  deadlines_.clear();
  deadline_timer_->Cancel();
  read_again_timer_->Cancel();
  failure_timer_->Cancel();
  pending_failure_ = Status::Ok();
  watch_.reset();
  transport_.reset();
  reader_ = NewReader();
  output_.clear();
  output_sent_ = 0;
  stream_queued_ = 0;
  stream_written_ = 0;
  write_wait_ = IoWait::kWritable;
  read_wait_ = IoWait::kReadable;
  client_id_.reset();
  if (state_ != State::kClosed) {
    if (!moving_) {
      LogWarn("redis connection lost", {{"role", role_}, {"error", status.message()}});
      MarkDown();
    }
    moving_ = false;
    state_ = State::kWaitingToRetry;
    if (reconnect) Connect();
  }

  std::weak_ptr<bool> alive = lifeline_;
  for (size_t i = 0; i < failed.size(); ++i) {
    Batch& batch = failed[i];
    batch.done(BatchResult{std::move(batch.replies), status, written[i]});
    if (alive.expired()) return;
  }
}

void AsyncConnection::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  retry_timer_->Cancel();
  MarkUp();  // closed on purpose: no longer a reason for /readyz to wait
  Break(Status(StatusCode::kCancelled, "the Redis connection is closed"), false);
}

}  // namespace streamcar::redis
