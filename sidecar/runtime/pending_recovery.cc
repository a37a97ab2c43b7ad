#include "sidecar/runtime/pending_recovery.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::runtime {

using redis::BatchResult;
using redis::Command;
using redis::Reply;
using redis::SubscriptionOps;

void SendRaw(redis::AsyncConnection* connection, Command command,
             std::function<void(StatusOr<Reply>)> done) {
  std::vector<Command> commands;
  commands.push_back(std::move(command));
  connection->SendBatch(commands, connection->command_timeout(),
                        [done = std::move(done)](BatchResult result) {
                          if (!result.failure.ok()) return done(result.failure);
                          done(std::move(result.replies.front()));
                        });
}

PendingRecovery::PendingRecovery(const std::string& subscription, const redis::SubscriptionOps& ops,
                                 redis::AsyncConnection* read, EntryLedger* ledger, Host* host)
    : subscription_(subscription), ops_(ops), read_(read), ledger_(ledger), host_(host) {}

bool PendingRecovery::Next() {
  if (!recovering_) {
    recovering_ = true;
    requested_ = false;
    start_ = "-";
    recovered_ = 0;
    kept_up_to_ = ledger_->kept_sequence();
  }
  // Fetched entries take room like a read's: never more than there is room for; except the
  // entries whose ordering lanes are kept for them (they had room until their release), or their
  // keys, filling the room behind them, could block for good.
  if (host_->ReadCount() == 0 && !ledger_->has_kept_lanes()) return false;
  SendRaw(read_, ops_.OwnPendingIds(start_, kPage), Guard([this](StatusOr<Reply> reply) {
            StatusOr<redis::PendingIds> page = reply.ok()
                                                   ? SubscriptionOps::ParsePendingIds(reply->view())
                                                   : StatusOr<redis::PendingIds>(reply.status());
            if (!page.ok()) return Failed(page.status());
            if (page->empty()) {
              Done();
              return host_->StepEnded();
            }
            // One read's worth at most (and the kept lanes' entries, see above).
            const size_t room =
                std::max(std::min(ledger_->ReadRoom(), kMaxReadCount), ledger_->kept_lanes());
            if (room == 0) return host_->StepEnded();  // this page again once there is room
            last_page_ = page->size() < static_cast<size_t>(kPage);
            std::string next = "(" + page->back().first;
            std::vector<std::string> missing;
            counts_.clear();
            for (const auto& [id, count] : *page) {
              if (ledger_->Holds(id)) continue;  // what holds it settles it
              if (missing.size() >= room) {
                // Out of room: the rest of this page after the last id taken, later.
                next = "(" + missing.back();
                last_page_ = false;
                break;
              }
              missing.push_back(id);
              counts_[id] = count;
            }
            start_ = std::move(next);
            if (missing.empty()) return PageDone();
            KeepAlive(std::move(missing), false);
          }));
  return true;
}

void PendingRecovery::KeepAlive(std::vector<std::string> ids, bool reloaded) {
  // Refresh their lease in the same step as checking they are still ours: a peer's reclaim after
  // an outage longer than claim.min_idle must not deliver them at the same time.
  auto shared = std::make_shared<std::vector<std::string>>(std::move(ids));
  SendRaw(read_, ops_.KeepAlive(*shared), Guard([this, shared, reloaded](StatusOr<Reply> reply) {
            if (reply.ok() && redis::IsNoScript(reply->view()) && !reloaded) {
              std::vector<Command> loads;
              for (const redis::Script* script : ops_.Scripts()) {
                loads.push_back(script->Load());
              }
              read_->SendBatch(loads, read_->command_timeout(),
                               Guard([this, shared](const BatchResult& loaded) {
                                 Status status = loaded.failure;
                                 for (const Reply& r : loaded.replies) {
                                   if (status.ok() && r.IsError())
                                     status = redis::ErrorOf(r.view());
                                 }
                                 if (!status.ok()) return Failed(status);
                                 KeepAlive(std::move(*shared), true);
                               }));
              return;
            }
            StatusOr<std::vector<std::string>> lost =
                reply.ok() ? SubscriptionOps::ParseIds(reply->view())
                           : StatusOr<std::vector<std::string>>(reply.status());
            if (!lost.ok()) return Failed(lost.status());
            std::erase_if(*shared, [&](const std::string& id) {
              return std::find(lost->begin(), lost->end(), id) != lost->end();
            });
            if (shared->empty()) return PageDone();
            Fetch(std::move(*shared));
          }));
}

void PendingRecovery::Fetch(std::vector<std::string> ids) {
  auto shared = std::make_shared<std::vector<std::string>>(std::move(ids));
  read_->SendBatch(ops_.Fetch(*shared), read_->command_timeout(),
                   Guard([this, shared](const BatchResult& fetched) {
                     StatusOr<std::vector<StreamEntry>> entries =
                         fetched.failure.ok()
                             ? SubscriptionOps::ParseFetch(fetched.replies, *shared)
                             : StatusOr<std::vector<StreamEntry>>(fetched.failure);
                     if (!entries.ok()) return Failed(entries.status());
                     // XRANGE counts no delivery: the count is XPENDING's.
                     for (auto& entry : *entries) entry.attempts = counts_[entry.id];
                     recovered_ += entries->size();
                     host_->Route(std::move(*entries), IntakeSource::kRecover);
                     PageDone();
                   }));
}

void PendingRecovery::PageDone() {
  if (last_page_) Done();
  host_->StepEnded();
}

void PendingRecovery::Failed(const Status& status) {
  recovering_ = false;
  host_->RecoveryFailed(status);
}

bool PendingRecovery::AfterFailure(const Status& status) {
  // Tried again on the next lost connection or ambiguous settlement; the reclaim beat covers the
  // rest after claim.min_idle.
  LogWarn("cannot read own pending entries",
          {{"subscription", subscription_}, {"error", status.message()}});
  // Lanes kept for entries it was to bring back block their keys until it succeeds: again, after
  // the group is re-created or a pause (never in a tight loop on an error reply).
  const bool again = ledger_->has_kept_lanes();
  if (again) requested_ = true;
  return again;
}

void PendingRecovery::Done() {
  recovering_ = false;
  // What the re-read did not bring back was settled after all: its key's lane goes on (a lane
  // kept since this re-read began waits for the next one, which its release requested).
  ledger_->ReleaseKeptLanes(kept_up_to_);
  if (recovered_ > 0) {
    LogInfo("recovered own pending entries nothing here held",
            {{"subscription", subscription_}, {"count", static_cast<int64_t>(recovered_)}});
  }
}

}  // namespace streamcar::runtime
