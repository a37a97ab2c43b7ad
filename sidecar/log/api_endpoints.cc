#include "sidecar/log/api_endpoints.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/log.h"
#include "sidecar/common/text.h"
#include "sidecar/http/json_error.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/log/api_json.h"
#include "sidecar/log/api_route.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::log {
namespace {

// An Idempotency-Key longer than this is refused: it becomes part of a Redis key.
constexpr size_t kMaxIdempotencyKey = 512;

// The media type of a Content-Type value, lower-cased, without parameters.
std::string MediaType(std::string_view content_type) {
  return LowerAscii(TrimBlanks(content_type.substr(0, content_type.find(';'))));
}

bool HasBody(const ApiRequest& request) {
  return request.chunked || request.content_length.value_or(0) > 0;
}

// A POST whose body is a JSON array appends a batch (SPEC 10); any other appends one entry.
bool IsBatch(const ApiRequest& request) {
  const std::string* content_type = request.Header("content-type");
  return content_type != nullptr && MediaType(*content_type) == "application/json" &&
         IsJsonArray(request.body);
}

// A JSON answer (receipts, pages).
http::Response Json(int status, std::string body) {
  http::Response response;
  response.status = status;
  response.content_type = "application/json";
  response.body = std::move(body);
  return response;
}

http::Response MethodNotAllowed(std::string allow) {
  http::Response response = http::JsonError(405, "method not allowed: use " + allow);
  response.headers.emplace_back("Allow", std::move(allow));
  return response;
}

}  // namespace

const char* RouteName(ApiRoute route) {
  switch (route) {
    case ApiRoute::kProduce:
      return "produce";
    case ApiRoute::kRead:
      return "read";
    case ApiRoute::kFollow:
      return "follow";
    case ApiRoute::kOther:
      return "other";
  }
  return "other";
}

bool WantsFollow(const ApiRequest& request,
                 const std::vector<std::pair<std::string, std::string>>& query) {
  for (const auto& [name, value] : query) {
    if (name == "follow") return value == "true" || value == "1";
  }
  if (const std::string* accept = request.Header("accept")) {
    return LowerAscii(*accept).find("text/event-stream") != std::string::npos;
  }
  return false;
}

ApiEndpoints::ApiEndpoints(const config::ApiConfig& api,
                           const std::vector<config::LogStream>& streams, const ApiServerDeps& deps)
    : api_(api),
      deps_(deps),
      sessions_(
          [&] {
            auto options = deps.redis;
            options.client_name += ":api";
            return options;
          }(),
          ApiServer::kSessions),
      probe_(
          [&] {
            auto options = deps.redis;
            options.client_name += ":api-probe";
            return options;
          }(),
          "api-probe", deps.health),
      hub_(
          [&] {
            auto options = deps.redis;
            options.client_name += ":api-follow";
            return options;
          }(),
          nullptr),  // each follower gets its stream's archive, if it has one
      pump_(&hub_, FollowPumpOptions{.threads = ApiServer::kPumpThreads,
                                     .max_buffer_bytes = api.max_follow_buffer,
                                     .keep_alive = ApiServer::kKeepAliveInterval}) {
  for (const auto& stream : streams) {
    auto& added = streams_[stream.name] = std::make_unique<Stream>(stream, api);
    if (deps_.metrics != nullptr) {
      added->produced = &deps_.metrics->Produced(stream.name);
      deps_.metrics->Followers(stream.name);
    }
  }
  if (!api.token_file.empty()) token_ = std::make_unique<TokenFile>(api.token_file);
  // The answers each route can give exist at 0 from the start (SPEC 5), so rates and alerts
  // never see a missing series.
  if (deps_.metrics != nullptr) {
    const std::vector<std::pair<ApiRoute, std::vector<int>>> known = {
        {ApiRoute::kProduce, {200, 201, 400, 405, 409, 413, 500, 503}},
        {ApiRoute::kRead, {200, 400, 500, 503}},
        {ApiRoute::kFollow, {200, 400, 500, 503}},
        {ApiRoute::kOther, {400, 401, 403, 404, 405, 408, 413, 431, 503}},
    };
    for (const auto& [route, codes] : known) {
      for (int code : codes) {
        requests_[{route, code}] = &deps_.metrics->ApiRequests(RouteName(route), code);
      }
    }
  }
}

void ApiEndpoints::Attach(EventLoop* loop) {
  auto options = deps_.redis;
  options.client_name += ":api-append";
  append_links_ = std::make_unique<AppendLinks>(loop, std::move(options));
  for (auto& [name, stream] : streams_) {
    stream->appends = std::make_unique<AppendGroup>(&stream->producer, append_links_.get());
  }
}

void ApiEndpoints::Detach() {
  for (auto& [name, stream] : streams_) stream->appends.reset();
  append_links_.reset();
}

void ApiEndpoints::Stop() {
  stopping_ = true;
  pump_.Stop();  // every follower ends (on_end), before the hub they read from
  hub_.Stop();
}

void ApiEndpoints::Probe() {
  if (!probe_.connected()) {
    Millis retry_in{0};
    [[maybe_unused]] Status status = probe_.ConnectOnce(&retry_in);
    return;
  }
  // A failure drops the connection and marks it down in the shared health; nothing else to do.
  [[maybe_unused]] auto reply = probe_.Run(redis::Command("PING"));
}

void ApiEndpoints::Count(ApiRoute route, int status) {
  if (deps_.metrics == nullptr) return;
  auto known = requests_.find({route, status});
  if (known != requests_.end()) {
    known->second->Increment();
  } else {
    deps_.metrics->ApiRequests(RouteName(route), status).Increment();
  }
}

ArchiveStore* ApiEndpoints::ArchiveOf(const Stream& stream) const {
  // Only a stream with `archive: true` is read through the archive: a plain stream's reads must
  // not fail or hang with an archive they never use.
  return stream.config.archive ? deps_.archive : nullptr;
}

const ApiEndpoints::Stream* ApiEndpoints::Find(const std::string& name) const {
  auto it = streams_.find(name);
  return it == streams_.end() ? nullptr : it->second.get();
}

ApiRoute RouteOf(const ApiRequest& request) {
  if (request.method == "POST") return ApiRoute::kProduce;
  if (request.method != "GET") return ApiRoute::kOther;
  auto query = ParseQuery(request.query);
  return query.ok() && WantsFollow(request, *query) ? ApiRoute::kFollow : ApiRoute::kRead;
}

std::optional<http::Response> ApiEndpoints::Screen(const ApiRequest& request, ApiRoute* route,
                                                   bool* authenticated) {
  *route = ApiRoute::kOther;
  *authenticated = false;
  // The token first: without it, nothing else is told (not even which streams exist).
  if (token_) {
    const std::string* authorization = request.Header("authorization");
    if (authorization == nullptr || !token_->Allows(*authorization)) {
      http::Response response = http::JsonError(
          401, authorization == nullptr ? "missing bearer token" : "wrong bearer token");
      response.headers.emplace_back("WWW-Authenticate", "Bearer");
      // A client without the token must not keep a connection that those with it need.
      response.close = true;
      return response;
    }
    *authenticated = true;
  }
  // A browser names the page's origin: a page from elsewhere must not append or read through it
  // (a cross-site text/plain POST needs no preflight). Clients that are not browsers send none.
  if (const std::string* origin = request.Header("origin")) {
    const auto& allowed = api_.allowed_origins;
    if (std::find(allowed.begin(), allowed.end(), *origin) == allowed.end()) {
      return http::JsonError(403, "origin_not_allowed");
    }
  }
  return ScreenStream(request, route);
}

std::optional<http::Response> ApiEndpoints::ScreenStream(const ApiRequest& request,
                                                         ApiRoute* route) {
  auto name = StreamOfPath(request.path);
  if (!name.ok()) return http::JsonError(400, "malformed path: " + name.status().message());
  if (!name->has_value()) {
    return http::JsonError(404, "not found: the API serves /v1/streams/{name}/entries");
  }
  const Stream* stream = Find(**name);
  if (stream == nullptr) {
    return http::JsonError(
        404, "unknown stream \"" + PrintableOneLine(**name) + "\": not listed in streams");
  }
  const std::string allow = stream->config.produce ? "GET, POST" : "GET";
  const ApiRoute routed = RouteOf(request);
  if (routed == ApiRoute::kOther) return MethodNotAllowed(allow);
  *route = routed;
  if (routed == ApiRoute::kProduce) {
    // SPEC 10 lists 405 for a method a resource does not serve: a read-only stream serves GET.
    if (!stream->config.produce) return MethodNotAllowed(allow);
    if (request.content_length && *request.content_length > api_.max_body) {
      return http::JsonError(
          413, "request body over api.max_body (" + std::to_string(api_.max_body) + " bytes)");
    }
    return std::nullopt;
  }
  if (HasBody(request)) return http::JsonError(400, "a GET request has no body");
  return std::nullopt;
}

std::function<void()> ApiEndpoints::Handle(ApiRequest request, ApiRoute route,
                                           http::Responder responder) {
  auto name = StreamOfPath(request.path);
  const Stream* stream = name.ok() && name->has_value() ? Find(**name) : nullptr;
  if (stream == nullptr) {
    Count(route, 404);
    responder.Respond(http::JsonError(404, "unknown stream"));  // Screen ruled it out
    return {};
  }
  if (route == ApiRoute::kProduce && !IsBatch(request)) {
    ProduceOne(request, *stream, responder);
    return {};
  }
  constexpr size_t kHeadAllowance = 1024;  // a request's head and bookkeeping, roughly
  const size_t bytes = request.body.size() + request.path.size() + kHeadAllowance;
  if (waiting_bytes_.fetch_add(bytes) + bytes > kMaxWaitingBytes) {
    waiting_bytes_.fetch_sub(bytes);
    http::Response busy = http::JsonError(503, "too many requests are waiting for Redis already");
    busy.headers.emplace_back("Retry-After", "1");
    Count(route, busy.status);
    responder.Respond(std::move(busy));
    return {};
  }
  return
      [this, bytes, request = std::move(request), route, stream, responder = std::move(responder)] {
        waiting_bytes_.fetch_sub(bytes);
        HandleOnWorker(request, route, *stream, responder);
      };
}

void ApiEndpoints::HandleOnWorker(const ApiRequest& request, ApiRoute route, const Stream& stream,
                                  const http::Responder& responder) {
  std::optional<http::Response> answer;
  if (route == ApiRoute::kFollow && stream.config.shards == 0) {
    answer = Follow(request, stream, responder);
    if (!answer) return;  // an event stream now, counted when it started
  } else {
    answer = Answer(request, route, stream);
  }
  Count(route, answer->status);
  responder.Respond(std::move(*answer));
}

http::Response ApiEndpoints::Answer(const ApiRequest& request, ApiRoute route,
                                    const Stream& stream) {
  if (stream.config.shards > 0 && (route == ApiRoute::kRead || route == ApiRoute::kFollow)) {
    // Its entries are in its shard streams (SPEC 9), each its own log.
    return http::JsonError(400, "stream \"" + stream.config.name + "\" is sharded into " +
                                    std::to_string(stream.config.shards) + " shard streams (" +
                                    keys::ShardKey(stream.config.shard_key_pattern, 0) +
                                    " ...): list a shard stream under streams to read it");
  }
  if (route == ApiRoute::kProduce) return Produce(request, stream);
  if (route == ApiRoute::kRead) return Read(request, stream);
  return http::JsonError(404, "not found");
}

http::Response ApiEndpoints::Unavailable(const Status& status, int retry_after) const {
  // A LogReader marks the archive's errors; every other outage is Redis's.
  const std::string& message = status.message();
  http::Response response =
      message.starts_with(kArchiveErrorPrefix)
          ? http::JsonError(503,
                            "archive unavailable: " + message.substr(kArchiveErrorPrefix.size()))
          : http::JsonError(503, "Redis unavailable: " + message);
  response.headers.emplace_back("Retry-After", std::to_string(retry_after));
  return response;
}

http::Response ApiEndpoints::ReadFailure(const Status& status) const {
  const std::string& message = status.message();
  switch (status.code()) {
    case StatusCode::kInvalid:
      return http::JsonError(400, message);
    case StatusCode::kIo:
    case StatusCode::kTimeout:
      return Unavailable(status, 1);
    default:
      // Retrying cannot fix these: a key of another type, a damaged archive.
      if (message.starts_with(kArchiveErrorPrefix)) {
        return http::JsonError(
            500, "the archive cannot be read: " + message.substr(kArchiveErrorPrefix.size()));
      }
      return http::JsonError(500, "Redis refused the read: " + message);
  }
}

namespace {

// The appends a POST asks for, in *appends: one entry, or one per element of a JSON array body
// (a batch). An answer when the request is malformed.
std::optional<http::Response> AppendsOf(const ApiRequest& request,
                                        std::vector<AppendRequest>* appends, bool* batch) {
  const std::string* content_type = request.Header("content-type");
  const bool json = content_type != nullptr && MediaType(*content_type) == "application/json";
  *batch = IsBatch(request);
  if (*batch) {
    auto entries = EntriesFromJson(request.body);
    if (!entries.ok()) return http::JsonError(400, entries.status().message());
    if (entries->size() > Producer::kMaxBatch) {
      return http::JsonError(400, "a batch holds at most " + std::to_string(Producer::kMaxBatch) +
                                      " entries (got " + std::to_string(entries->size()) + ")");
    }
    for (auto& fields : *entries) appends->push_back(AppendRequest{.fields = std::move(fields)});
  } else if (json) {
    auto fields = FieldsFromJson(request.body);
    if (!fields.ok()) return http::JsonError(400, fields.status().message());
    appends->push_back(AppendRequest{.fields = std::move(*fields)});
  } else {
    appends->push_back(
        AppendRequest{.fields = {{"data", request.body},
                                 {"content_type", content_type != nullptr
                                                      ? *content_type
                                                      : std::string("application/octet-stream")}}});
  }
  if (const std::string* key = request.Header("idempotency-key")) {
    if (key->empty() || key->size() > kMaxIdempotencyKey) {
      return http::JsonError(
          400, "Idempotency-Key must be 1.." + std::to_string(kMaxIdempotencyKey) + " bytes");
    }
    // A batch's entry i has the key "K/i" (SPEC 10): a retry of the whole batch repeats every
    // key, and entry i is the same append as a single one with "K/i".
    for (size_t i = 0; i < appends->size(); ++i) {
      (*appends)[i].idempotency_key = *batch ? *key + "/" + std::to_string(i) : *key;
    }
  }
  if (const std::string* id = request.Header("streamcar-entry-id")) {
    if (*batch) {
      return http::JsonError(
          400, "Streamcar-Entry-Id names one entry's id: a batch's entries get Redis's ids");
    }
    if (!ParseId(*id)) {
      return http::JsonError(400, "Streamcar-Entry-Id must be <ms>-<seq>, like 1764513000000-0");
    }
    appends->front().entry_id = *id;
  }
  if (const std::string* key = request.Header("streamcar-key")) {
    for (auto& append : *appends) append.shard_key = *key;
  }
  return std::nullopt;
}

// The answer to a single append.
http::Response SingleAnswer(const AppendResult& result, const std::string& stream) {
  switch (result.kind) {
    case AppendResult::Kind::kAppended:
      return Json(201, ReceiptJson(result.id, stream));
    case AppendResult::Kind::kDuplicate:
      return Json(200, ReceiptJson(result.id, stream));
    case AppendResult::Kind::kNonMonotonic:
      return Json(409, NonMonotonicJson(result.id));
    case AppendResult::Kind::kOutOfRange:
      break;
  }
  return http::JsonError(400, kIdOutOfRange);
}

}  // namespace

void ApiEndpoints::ProduceOne(const ApiRequest& request, const Stream& stream,
                              const http::Responder& responder) {
  std::vector<AppendRequest> appends;
  bool batch = false;
  if (auto refused = AppendsOf(request, &appends, &batch)) {
    Count(ApiRoute::kProduce, refused->status);
    responder.Respond(std::move(*refused));
    return;
  }
  auto answer_of = [this, &stream](AppendGroup::Outcome outcome) {
    http::Response answer =
        outcome.status.ok()
            ? Appended(std::vector<AppendResult>{std::move(outcome.result)}, false, 1, stream)
            : Appended(outcome.status, false, outcome.retry_after, stream);
    Count(ApiRoute::kProduce, answer.status);
    return answer;
  };
  // It goes with the single appends of the stream that queue while a group is on its way; the
  // group answers on the loop, outside this call, so it writes the answer at once.
  auto refused = stream.appends->Append(std::move(appends.front()),
                                        [answer_of, responder](AppendGroup::Outcome outcome) {
                                          responder.RespondOnLoop(answer_of(std::move(outcome)));
                                        });
  if (refused) responder.Respond(answer_of(std::move(*refused)));
}

http::Response ApiEndpoints::Produce(const ApiRequest& request, const Stream& stream) {
  std::vector<AppendRequest> appends;
  bool batch = false;
  if (auto refused = AppendsOf(request, &appends, &batch)) return *refused;
  int retry_after = 1;
  auto lease = sessions_.Acquire(ApiServer::kSessionWait, &retry_after);
  if (!lease.ok()) return Unavailable(lease.status(), retry_after);
  return Appended(stream.producer.AppendAll(lease->session(), appends), batch, retry_after, stream);
}

http::Response ApiEndpoints::Appended(const StatusOr<std::vector<AppendResult>>& results,
                                      bool batch, int retry_after, const Stream& stream) {
  if (!results.ok()) {
    const Status& status = results.status();
    if (status.code() == StatusCode::kInvalid) return http::JsonError(400, status.message());
    if (status.code() == StatusCode::kServerError) {
      LogWarn("api: append refused by Redis",
              {{"stream", stream.config.name}, {"error", status.message()}});
      return http::JsonError(500, "Redis refused the append: " + status.message());
    }
    return Unavailable(status, retry_after);
  }
  int64_t appended = 0;
  for (const auto& result : *results) appended += result.kind == AppendResult::Kind::kAppended;
  if (stream.produced != nullptr && appended > 0) {
    stream.produced->Increment(static_cast<double>(appended));
  }
  if (!batch) return SingleAnswer(results->front(), stream.config.name);
  // A batch has no explicit ids: each entry is appended or a repeat of its idempotency key, and
  // its receipt is its id either way (SPEC 10: 201 with the ids in order).
  std::vector<std::string> ids;
  ids.reserve(results->size());
  for (const auto& result : *results) ids.push_back(result.id);
  return Json(201, BatchReceiptsJson(ids, stream.config.name));
}

http::Response ApiEndpoints::Read(const ApiRequest& request, const Stream& stream) {
  auto query = ParseQuery(request.query);
  if (!query.ok()) return http::JsonError(400, "malformed query: " + query.status().message());
  WindowQuery window;
  for (const auto& [name, value] : *query) {
    if (name == "since" || name == "until" || name == "after") {
      auto bound = ParseBound(value);
      if (!bound.ok()) return http::JsonError(400, name + ": " + bound.status().message());
      (name == "since" ? window.since : name == "until" ? window.until : window.after) = *bound;
    } else if (name == "count") {
      int count = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), count);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || count < 1 ||
          count > 10000) {
        return http::JsonError(400, "count must be a whole number from 1 to 10000");
      }
      window.count = count;
    } else if (name != "follow") {
      return http::JsonError(400, "unknown query parameter \"" + PrintableOneLine(name) +
                                      "\" (since, until, after, count, follow)");
    }
  }
  int retry_after = 1;
  auto lease = sessions_.Acquire(ApiServer::kSessionWait, &retry_after);
  if (!lease.ok()) return Unavailable(lease.status(), retry_after);
  LogReader reader(&lease->session(), ArchiveOf(stream));
  auto page = reader.Read(stream.config.name, window);
  if (!page.ok()) return ReadFailure(page.status());
  return Json(200, PageJson(page->entries, page->next));
}

namespace {

// Where a follow starts, in *start: just after Last-Event-ID (a reconnecting EventSource sends
// it, and it is later than the `since` of the URL it reconnects to), else after `after`, else from
// `since` inclusive, else from now on ("$"). An answer when the request cannot be followed.
std::optional<http::Response> FollowStart(const ApiRequest& request, std::string* start) {
  auto query = ParseQuery(request.query);
  if (!query.ok()) return http::JsonError(400, "malformed query: " + query.status().message());
  *start = "$";
  std::optional<std::string> since;
  std::optional<std::string> after;
  for (const auto& [name, value] : *query) {
    if (name == "since" || name == "after") {
      auto bound = ParseBound(value);
      if (!bound.ok()) return http::JsonError(400, name + ": " + bound.status().message());
      (name == "since" ? since : after) = *bound;
    } else if (name != "follow") {
      return http::JsonError(400, "\"" + PrintableOneLine(name) +
                                      "\" does not apply to follow (since, after, follow)");
    }
  }
  if (const std::string* last = request.Header("last-event-id")) {
    if (!ParseId(*last)) return http::JsonError(400, "Last-Event-ID must be an entry id");
    *start = *last;
  } else if (after) {
    *start = *after;
  } else if (since) {
    auto id = ParseId(*since);
    auto before = id ? Predecessor(*id) : std::nullopt;
    *start = before ? FormatId(*before) : "0-0";
  }
  return std::nullopt;
}

http::Response ShuttingDown() {
  http::Response response = http::JsonError(503, "the API is shutting down");
  response.headers.emplace_back("Retry-After", "1");
  return response;
}

}  // namespace

std::optional<http::Response> ApiEndpoints::Follow(const ApiRequest& request, const Stream& stream,
                                                   const http::Responder& responder) {
  std::string start;
  if (auto refused = FollowStart(request, &start)) return refused;
  if (stopping_) return ShuttingDown();
  if (followers_.fetch_add(1) >= ApiServer::kMaxFollowers) {
    followers_.fetch_sub(1);
    http::Response response = http::JsonError(503, "too many followers");
    response.headers.emplace_back("Retry-After", "5");
    return response;
  }
  if (deps_.metrics != nullptr) deps_.metrics->Followers(stream.config.name).Increment();
  // Runs once when the follower ends, whichever way (here, or on a pump thread).
  auto leave = [this, name = stream.config.name] {
    followers_.fetch_sub(1);
    if (deps_.metrics != nullptr) deps_.metrics->Followers(name).Decrement();
  };

  // Where "$" is and the first catch-up page are read before the 200 head, so that an outage
  // answers 503 + Retry-After and a key that is not a stream an error, as the other endpoints do.
  auto follower = hub_.Follow(stream.config.name, start, ArchiveOf(stream));
  std::vector<StreamEntry> entries;
  const Status first = follower->NextWithin(&entries, Millis(0), FollowPump::kFirstPageBytes);
  if (!first.ok()) {
    leave();
    return first.code() == StatusCode::kCancelled ? ShuttingDown() : ReadFailure(first);
  }
  Count(ApiRoute::kFollow, 200);
  http::Response head;
  head.content_type = "text/event-stream";
  head.headers.emplace_back("X-Accel-Buffering", "no");
  responder.StartStream(std::move(head));
  pump_.Add(std::move(follower), std::move(entries), responder, std::move(leave));
  return std::nullopt;
}

}  // namespace streamcar::log
