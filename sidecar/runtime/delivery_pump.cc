#include "sidecar/runtime/delivery_pump.h"

#include <span>
#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"

namespace streamcar::runtime {

DeliveryPump::DeliveryPump(const config::Subscription& subscription, EntryLedger* ledger,
                           Settlement* settlement, delivery::HandlerClient* client,
                           DeliveryGates* gates, AttemptObserver* observer, const Clock& clock,
                           std::function<void()> after_results)
    : sub_(subscription),
      ledger_(ledger),
      settlement_(settlement),
      client_(client),
      gates_(gates),
      observer_(observer),
      clock_(clock),
      after_results_(std::move(after_results)),
      policy_(delivery::OutcomePolicyOf(subscription)),
      context_{subscription.stream, subscription.group, &subscription.handler},
      batch_size_(static_cast<size_t>(subscription.handler.batch_size)),
      routes_(subscription) {}

void DeliveryPump::ShardedBy(delivery::ShardStamp stamp) { context_.shard = stamp; }

void DeliveryPump::UpdatePause() { ledger_->SetPause(gates_->PauseAt(clock_.Now())); }

void DeliveryPump::Pump() {
  UpdatePause();
  // At most the slots free now: a request that fails at once (a refused connect) hands its slot
  // back before its callback has paused delivery, and must not let one Pump send the whole queue.
  // Entries a route drops take no slot: the loop goes on taking while slots are left.
  for (size_t slots = client_->free_slots(); slots > 0;) {
    const SteadyTime now = clock_.Now();
    if (!gates_->Open(now)) {  // asked before each POST
      if (ledger_->HasReady()) gates_->OnHeldBack(now);
      // A gate closed by this Pump's own sends (a rate limit's last token, a breaker's probe):
      // the pause, and the loop's timer, say until when.
      UpdatePause();
      return;
    }
    auto refs = ledger_->TakeReady(batch_size_, now);
    if (refs.empty()) return;
    if (!gates_->Claim(now)) {
      // Another shard's loop took the shared rate limit's token since Open: never posted, no
      // attempt spent; the gate's pause, and the loop's timer, say when the next one comes.
      ledger_->HandBack(refs);
      gates_->OnHeldBack(now);
      UpdatePause();
      return;
    }
    slots -= Send(std::move(refs), slots);
  }
}

size_t DeliveryPump::Send(std::vector<EntryRef> refs, size_t slots) {
  if (routes_.active()) return SendRouted(std::move(refs), slots);
  SendRequest(std::move(refs), 0);
  return 1;
}

size_t DeliveryPump::SendRouted(std::vector<EntryRef> refs, size_t slots) {
  std::vector<delivery::RouteChoice> choices;
  choices.reserve(refs.size());
  for (const auto& ref : refs) choices.push_back(routes_.Choose(*ledger_->Entry(ref)));
  const delivery::RoutePlan plan = delivery::PlanRoutes(choices, ledger_->one_lane());
  for (size_t i : plan.dropped) {
    observer_->OnFiltered(refs[i]);
    Settle(refs[i], delivery::Decision::Accepted());  // acknowledged: no delivery is counted
  }
  // One lane: what follows the planned run goes back behind it, as after a batch's failure.
  if (plan.planned < refs.size()) {
    ledger_->Redeliver(std::span<const EntryRef>(refs).subspan(plan.planned));
  }
  size_t sent = 0;
  std::vector<EntryRef> unsent;
  const SteadyTime now = clock_.Now();
  for (const auto& planned : plan.requests) {
    std::vector<EntryRef> request;
    request.reserve(planned.items.size());
    for (size_t i : planned.items) request.push_back(refs[i]);
    // The hand-out's first request has the gates' leave (Pump claimed it); each further one, a
    // batch split per url, asks again: a rate limit's token and a breaker's probe are per
    // request, never taken on credit.
    if (sent == slots || (sent > 0 && !(gates_->Open(now) && gates_->Claim(now)))) {
      unsent.insert(unsent.end(), request.begin(), request.end());
      continue;
    }
    std::vector<int> routes;
    routes.reserve(planned.items.size());
    for (size_t i : planned.items) routes.push_back(choices[i].route);
    SendRequest(std::move(request), planned.target, std::move(routes));
    ++sent;
  }
  if (!unsent.empty()) ledger_->HandBack(unsent);  // never posted: no attempt spent
  if (!plan.dropped.empty()) after_results_();
  return sent;
}

void DeliveryPump::SendRequest(std::vector<EntryRef> refs, size_t target, std::vector<int> routes) {
  delivery::HttpRequest request;
  std::string why;
  bool encoded = false;
  const StreamEntry* one = nullptr;  // a single entry's request allocates no list
  std::vector<const StreamEntry*> many;
  std::span<const StreamEntry* const> entries;
  if (batch_size_ == 1) {
    one = ledger_->Entry(refs.front());
    entries = std::span<const StreamEntry* const>(&one, 1);
    encoded = delivery::EncodeEntry(context_, *one, &request, &why);
  } else {
    many.reserve(refs.size());
    for (const auto& ref : refs) many.push_back(ledger_->Entry(ref));
    entries = many;
    // Only configuration can make a batch unencodable (a header with a control character).
    encoded = delivery::EncodeBatch(context_, many, &request, &why);
  }
  if (!encoded) {
    // Nothing is sent: each entry is dead-lettered as invalid, without an attempt counted.
    for (const auto& ref : refs) Settle(ref, delivery::Decision::Invalid(why));
    after_results_();
    return;
  }
  request.target = target;
  const SteadyTime started = clock_.Now();
  gates_->OnSent(started);
  observer_->OnStarted({refs, entries, &request}, started);
  client_->Send(std::move(request), sub_.handler.timeout,
                [this, refs = std::move(refs), routes = std::move(routes),
                 started](const delivery::HandlerResponse& response) {
                  OnAnswer(refs, routes, started, response);
                });
}

void DeliveryPump::OnAnswer(const std::vector<EntryRef>& refs, const std::vector<int>& routes,
                            SteadyTime started, const delivery::HandlerResponse& response) {
  const SteadyTime now = clock_.Now();
  gates_->OnAnswer(response, now);
  if (response.kind == delivery::HandlerResponse::Kind::kRefused) {
    HandlerRefused(refs);
    observer_->OnEnded(refs, response, started, now);
    after_results_();
    return;
  }
  // An attempt was made (a refused connection is none, SPEC 3.2): each entry's route is counted
  // here, once per attempt, as its delivery is.
  for (size_t i = 0; i < routes.size(); ++i) observer_->OnRouteTaken(refs[i], routes[i]);
  observer_->OnEnded(refs, response, started, now);
  UpdatePause();
  const int64_t now_ms = clock_.WallMillis();
  if (batch_size_ == 1) {
    const StreamEntry* entry = ledger_->Entry(refs.front());
    if (entry != nullptr) {
      auto decision = delivery::Decide(policy_, response, entry->attempts, now_ms, UnitRandom());
      observer_->OnDecided(refs.front(), decision);
      Settle(refs.front(), decision);
    }
    after_results_();
    return;
  }
  std::vector<delivery::BatchItem> items;
  items.reserve(refs.size());
  // The refs whose entries are still held: `refs` itself unless some were let go meanwhile (a
  // copy then, which is rare: each EntryRef copied is an id copied).
  std::vector<EntryRef> kept;
  bool all_held = true;
  for (size_t i = 0; i < refs.size(); ++i) {
    const StreamEntry* entry = ledger_->Entry(refs[i]);
    if (entry == nullptr) {
      if (all_held) kept.assign(refs.begin(), refs.begin() + static_cast<ptrdiff_t>(i));
      all_held = false;
      continue;
    }
    items.push_back({entry->id, entry->attempts});
    if (!all_held) kept.push_back(refs[i]);
  }
  const std::vector<EntryRef>& live = all_held ? refs : kept;
  auto decided =
      delivery::DecideBatch(policy_, response, items, now_ms, [] { return UnitRandom(); });
  if (decided.unknown_ids > 0) {
    observer_->OnUnknownIds(decided.unknown_ids);
    LogWarn("batch answer named ids that were not in the batch; ignored",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(decided.unknown_ids)}});
  }
  if (ledger_->one_lane()) {
    const bool whole = response.kind != delivery::HandlerResponse::Kind::kAnswered ||
                       response.status < 200 || response.status > 299;
    SettleInOrder(live, decided.decisions, whole);
  } else {
    for (size_t i = 0; i < live.size(); ++i) {
      observer_->OnDecided(live[i], decided.decisions[i]);
      Settle(live[i], decided.decisions[i]);
    }
  }
  after_results_();
}

void DeliveryPump::SettleInOrder(const std::vector<EntryRef>& refs,
                                 const std::vector<delivery::Decision>& decisions,
                                 bool failed_whole) {
  if (failed_whole && refs.size() > 1) {
    // Which entry failed the request is unknown: none is charged with it. Each goes out again
    // alone, in order, and meets its own outcome (a retry, a dead letter) by itself.
    for (size_t i = 0; i < refs.size(); ++i) observer_->OnDecided(refs[i], decisions[i]);
    ledger_->Redeliver(refs, /*alone=*/true);
    return;
  }
  // A shard's batch is a run of consecutive entries that the handler processes in order and
  // stops at the first failure (docs/sharding.md, "Batches in a shard"): that entry is the first
  // whose decision is not an ack. What it did not reach goes back behind it, so that nothing after
  // a retry goes out first.
  size_t failed = 0;
  while (failed < refs.size() && decisions[failed].action == delivery::Action::kAck) ++failed;
  for (size_t i = 0; i < failed; ++i) {
    observer_->OnDecided(refs[i], decisions[i]);
    Settle(refs[i], decisions[i]);
  }
  if (failed == refs.size()) return;
  // Put back before the failed entry is settled: were it let go, the lane would pass on at once.
  ledger_->Redeliver(std::span<const EntryRef>(refs).subspan(failed + 1));
  observer_->OnDecided(refs[failed], decisions[failed]);
  Settle(refs[failed], decisions[failed]);
}

void DeliveryPump::Settle(const EntryRef& ref, const delivery::Decision& decision) {
  settlement_->OnOutcome(ref, decision, clock_.Now());
}

void DeliveryPump::HandlerRefused(const std::vector<EntryRef>& refs) {
  ledger_->HandBack(refs);
  // Reading pauses before the observers hear of it: once the gauge says the handler is down, no
  // new read starts.
  UpdatePause();
}

}  // namespace streamcar::runtime
