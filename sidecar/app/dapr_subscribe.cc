#include "sidecar/app/dapr_subscribe.h"

#include <ctime>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/delivery/dapr_subscription.h"
#include "sidecar/delivery/http_get.h"
#include "sidecar/delivery/http_target.h"
#include "sidecar/delivery/request_auth.h"

namespace streamcar::app {
namespace {

// What one question to the app gave: the declarations, a reason to ask again (retry set), or
// an answer that cannot be used.
struct Asked {
  std::vector<delivery::DaprTopicRoute> routes;
  Status status;
  bool retry = false;
};

// What the question carries besides Host and User-Agent: what every request to the handler
// carries (SPEC 11, docs/configuration.md), handler.headers and handler.auth, as the health
// probe adds auth to its GET (delivery/http_client.cc). Made again for each question, so a
// token file that rotates while the app starts is read as it is now.
StatusOr<delivery::http1::HeaderList> QuestionHeaders(const config::HandlerConfig& handler) {
  delivery::http1::HeaderList headers = {{"Accept", "application/json"}};
  for (const auto& [name, value] : handler.headers) headers.emplace_back(name, value);
  const Clock& clock = SystemClock::Instance();
  auto auth = delivery::RequestAuth::Create(handler.auth, clock.Now());
  if (!auth.ok()) return auth.status();
  if (*auth != nullptr) (*auth)->AddHeaders({}, clock, &headers);
  return headers;
}

Asked AskApp(const config::HandlerConfig& handler, const std::string& url, Millis timeout) {
  Asked asked;
  auto headers = QuestionHeaders(handler);
  if (!headers.ok()) {
    asked.status = headers.status();
    return asked;
  }
  // Over handler.unix_socket when set: SPEC 11, every request to the handler goes there.
  const delivery::HttpTarget target =
      delivery::ViaUnixSocket(delivery::SplitUrl(url), handler.unix_socket);
  auto answer = delivery::HttpGet(target, *headers, timeout);
  if (!answer.ok()) {
    asked.status = answer.status();
    asked.retry = answer.status().code() != StatusCode::kInvalid;
    return asked;
  }
  const int status = answer->status;
  // Dapr reads a 404 as "this app subscribes to nothing programmatically".
  if (status == 404) return asked;
  if (status < 200 || status >= 300) {
    asked.status = Status(StatusCode::kIo, url + " answered " + std::to_string(status));
    asked.retry = true;
    return asked;
  }
  auto routes = delivery::ParseDaprSubscribe(answer->body);
  if (!routes.ok()) {
    asked.status = routes.status();
    return asked;
  }
  asked.routes = std::move(*routes);
  return asked;
}

// Sleeps `delay` unless SIGTERM or SIGINT comes first (true).
bool SignalledDuring(const sigset_t& signals, Millis delay) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(delay);
  const timespec wait{static_cast<time_t>(seconds.count()),
                      static_cast<long>((delay - seconds).count() * 1000000)};
  const int received = sigtimedwait(&signals, nullptr, &wait);
  return received == SIGTERM || received == SIGINT;
}

int ConfigurationError(const std::string& message) {
  LogError("configuration error: " + message, {{"exit_code", 2}});
  return 2;
}

}  // namespace

std::optional<int> ResolveDaprRoutes(config::Config* config, const sigset_t& signals) {
  auto app = delivery::DaprAppUrl(config->subscriptions);
  if (!app.ok()) return ConfigurationError(app.status().message());
  if (app->empty()) return std::nullopt;
  const std::string url = *app + "/dapr/subscribe";
  Millis timeout{0};
  // The handler configuration the question goes out with: the first subscription's that asks
  // (DaprAppUrl checked that every one that asks names the same app).
  const config::HandlerConfig* handler = nullptr;
  for (const auto& sub : config->subscriptions) {
    if (!delivery::WantsDaprSubscribe(sub)) continue;
    timeout = std::max(timeout, sub.handler.timeout);
    if (handler == nullptr) handler = &sub.handler;
  }
  // The app is usually still starting beside us: a short first wait, then up to 5 s apart.
  RetryStreak streak(Millis(200), Millis(5000));
  for (;;) {
    Asked asked = AskApp(*handler, url, timeout);
    if (asked.status.ok()) {
      if (Status s = delivery::ApplyDaprRoutes(asked.routes, &config->subscriptions); !s.ok()) {
        return ConfigurationError(s.message());
      }
      for (const auto& sub : config->subscriptions) {
        if (sub.handler.format != config::Format::kDapr) continue;
        LogInfo("dapr route", {{"subscription", sub.name},
                               {"url", config::MaskUrlPassword(sub.handler.url)},
                               {"dead_letter", sub.dead_letter.stream}});
      }
      return std::nullopt;
    }
    if (!asked.retry) {
      return ConfigurationError(config::MaskUrlPassword(url) + ": " + asked.status.message());
    }
    const Millis retry_in = streak.Failed();
    LogWarn("the app does not answer GET /dapr/subscribe yet, retrying",
            {{"url", config::MaskUrlPassword(url)},
             {"error", asked.status.message()},
             {"retry_in_ms", static_cast<int64_t>(retry_in.count())}});
    if (SignalledDuring(signals, retry_in)) {
      LogInfo("shutdown complete", {{"left_pending", int64_t{0}}, {"drained", true}});
      return 0;
    }
  }
}

}  // namespace streamcar::app
