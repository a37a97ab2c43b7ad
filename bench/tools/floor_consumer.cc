// The floor (issue 34): the leanest correct consumer a C++ engineer would write by hand, the
// baseline bench/run measures streamcar against in the same run. One thread: a blocking
// XREADGROUP COUNT 100 BLOCK 1000 (hiredis), then the entries it brought in waves of up to
// CONNECTIONS: one keep-alive POST per entry, each on its own connection (a blocking socket with
// TCP_NODELAY, one request in flight), the whole wave written before its answers are read, every
// answer read to its end; then one XACK of the ids answered 2xx. No retries, claims, leases,
// metrics or probes: an entry answered otherwise, or not at all, stays pending (a request is sent
// again only when the handler had closed its idle connection: Connection::kStale).
// It posts streamcar's request for batch_size 1 and format json (SPEC 3.1: the same headers and
// envelope), with two simplifications that bench entries never meet: every value is taken as
// UTF-8 (no base64) and a repeated field name is not gathered into an array.
// It prints "ready" once the group exists and the connections are open; with MAX_ENTRIES it exits
// after that many entries had their answer read (or failed), printing "ENTRIES ACKED".
// Usage: floor_consumer REDIS_PORT STREAM GROUP CONSUMER HANDLER_URL CONNECTIONS START
// [MAX_ENTRIES]
//   START: the group's first id when this creates the group ("0": the backlog, "$": new entries)

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

// An answer not complete after this long fails its entry (and closes its connection).
constexpr int kAnswerTimeoutSeconds = 10;
// A head longer than this is not an answer from a sane handler.
constexpr size_t kMaxHead = size_t{64} * 1024;

struct Target {
  std::string host, port, path, authority;
};

bool ParseUrl(const std::string& url, Target* out) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return false;
  const size_t slash = url.find('/', kScheme.size());
  out->authority = url.substr(kScheme.size(), slash - kScheme.size());
  out->path = slash == std::string::npos ? "/" : url.substr(slash);
  const size_t colon = out->authority.rfind(':');
  out->host = out->authority.substr(0, colon);
  out->port = colon == std::string::npos ? "80" : out->authority.substr(colon + 1);
  return !out->host.empty();
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// A whole decimal argument, or -1.
long long Number(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  return end == text || *end != '\0' || errno != 0 || value < 0 ? -1 : value;
}

// One keep-alive connection to the handler, one request in flight.
class Connection {
 public:
  explicit Connection(const addrinfo* address) : address_(address) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&& other) noexcept
      : address_(other.address_),
        fd_(other.fd_),
        eof_(other.eof_),
        ended_(other.ended_),
        reused_(other.reused_),
        in_(std::move(other.in_)) {
    other.fd_ = -1;
  }
  Connection& operator=(Connection&&) = delete;
  ~Connection() { Close(); }

  bool Open() {
    if (fd_ >= 0) return true;
    fd_ = ::socket(address_->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    const int one = 1;
    const timeval timeout{kAnswerTimeoutSeconds, 0};
    if (::connect(fd_, address_->ai_addr, address_->ai_addrlen) != 0 ||
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
      Close();
      return false;
    }
    in_.clear();
    return true;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // ReadAnswer's result when a connection that was open before its request (idle in the pool)
  // ended before any byte of the answer: the handler closed it while it was idle (a keep-alive
  // timeout) and most likely never read the request,
  // which the caller sends again on a new connection, as any client that reuses connections must.
  static constexpr int kStale = -1;

  // Writes the whole request, on a new connection if an idle one refuses it; false (and the
  // connection closed) when it could not.
  bool Send(std::string_view request) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      reused_ = fd_ >= 0;
      if (!Open()) return false;
      if (Write(request)) return true;
      if (!reused_) return false;
    }
    return false;
  }

  // Reads one final answer to the end and returns its status; 0 when there was none (the
  // connection failed, timed out or framed it wrongly: the connection is closed then), kStale.
  // Bytes left after the answer in what it read close the connection and fail the entry too.
  // Bytes the handler sends later, while the connection sits idle, are not looked for before it
  // carries the next request (no MSG_PEEK, unlike streamcar, SPEC 3.1): they would be taken for
  // that request's answer. The floor leaves out that check, as the issue defines it.
  int ReadAnswer() {
    int status = 0;
    bool keep = true;
    size_t head_end = 0, body = 0;
    do {
      while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
        if (in_.size() > kMaxHead || !Fill()) {
          const bool stale = ended_ && in_.empty() && reused_;
          Fail();
          return stale ? kStale : 0;
        }
      }
      status = ParseHead(std::string_view(in_).substr(0, head_end + 2), &keep, &body);
      if (status == 0) return Fail();
      if (status < 200) in_.erase(0, head_end + 4);  // an interim answer: the final one follows
    } while (status < 200);
    size_t end = head_end + 4;
    if (body == kToClose) {  // the body runs to the end of the connection
      while (Fill()) {
      }
      const bool complete = eof_;
      Close();
      return complete ? status : 0;
    }
    if (body == kChunked) {
      if (!SkipChunked(&end)) return Fail();
    } else {
      end += body;
    }
    while (in_.size() < end) {
      if (!Fill()) return Fail();
    }
    if (in_.size() > end) return Fail();
    in_.clear();
    if (!keep) Close();
    return status;
  }

 private:
  // Markers for `end` in place of a body length.
  static constexpr size_t kChunked = std::string::npos - 1;
  static constexpr size_t kToClose = std::string::npos - 2;

  int Fail() {
    Close();
    return 0;
  }

  bool Write(std::string_view request) {
    while (!request.empty()) {
      const ssize_t n = ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        Close();
        return false;
      }
      request.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Appends what the connection has; false at its end (eof_ then) or on an error or timeout.
  bool Fill() {
    char buffer[16384];
    while (fd_ >= 0) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      eof_ = n == 0;
      ended_ = eof_ || (n < 0 && errno == ECONNRESET);
      if (n <= 0) return false;
      in_.append(buffer, static_cast<size_t>(n));
      return true;
    }
    return false;
  }

  // The status of the head (its lines, each ending in CRLF) or 0 when malformed; `body` is the
  // body's length, kChunked or kToClose; `keep` false after "Connection: close".
  static int ParseHead(std::string_view head, bool* keep, size_t* body) {
    if (head.size() < 14 || !head.starts_with("HTTP/1.1 ")) return 0;
    int status = 0;
    for (size_t i = 9; i < 12; ++i) {
      if (head[i] < '0' || head[i] > '9') return 0;
      status = status * 10 + (head[i] - '0');
    }
    if (head[12] != ' ' && head[12] != '\r') return 0;
    bool chunked = false, sized = false;
    size_t length = 0;
    for (size_t at = head.find("\r\n") + 2; at < head.size();) {
      const size_t eol = head.find("\r\n", at);
      const std::string_view line = head.substr(at, eol - at);
      at = eol + 2;
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0 || line[colon - 1] == ' ') return 0;
      const std::string_view name = line.substr(0, colon);
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      if (EqualsNoCase(name, "Content-Length")) {
        if (sized || value.empty() || value.size() > 12) return 0;
        for (const char c : value) {
          if (c < '0' || c > '9') return 0;
          length = length * 10 + static_cast<size_t>(c - '0');
        }
        sized = true;
      } else if (EqualsNoCase(name, "Transfer-Encoding")) {
        if (!EqualsNoCase(value, "chunked")) return 0;
        chunked = true;
      } else if (EqualsNoCase(name, "Connection")) {
        *keep = !EqualsNoCase(value, "close");
      }
    }
    if (chunked && sized) return 0;  // RFC 9112 6.1: an error
    if (status == 204 || status == 304 || status < 200) {
      *body = 0;
    } else if (chunked) {
      *body = kChunked;
    } else {
      *body = sized ? length : kToClose;
    }
    return status;
  }

  // Reads a chunked body that starts at `*end` through its last chunk and trailers; `*end`
  // becomes the offset just past it.
  bool SkipChunked(size_t* end) {
    size_t at = *end;
    while (true) {
      size_t eol = 0;
      while ((eol = in_.find("\r\n", at)) == std::string::npos) {
        if (in_.size() - at > kMaxHead || !Fill()) return false;
      }
      char* stop = nullptr;
      const unsigned long long size = std::strtoull(in_.c_str() + at, &stop, 16);
      if (stop == in_.c_str() + at || (*stop != '\r' && *stop != ';') || size > (1ULL << 40)) {
        return false;
      }
      at = eol + 2;
      if (size == 0) break;
      while (in_.size() < at + size + 2) {
        if (!Fill()) return false;
      }
      if (in_.compare(at + size, 2, "\r\n") != 0) return false;
      at += size + 2;
    }
    while (true) {  // trailer lines, then the empty line
      size_t eol = 0;
      while ((eol = in_.find("\r\n", at)) == std::string::npos) {
        if (in_.size() - at > kMaxHead || !Fill()) return false;
      }
      const bool last = eol == at;
      at = eol + 2;
      if (last) break;
    }
    *end = at;
    return true;
  }

  const addrinfo* address_;
  int fd_ = -1;
  bool eof_ = false;     // the last Fill met the end of the connection
  bool ended_ = false;   // ... or its end or a reset
  bool reused_ = false;  // the request in flight went out on a connection opened before it
  std::string in_;
};

void AppendJsonString(std::string* out, const char* s, size_t n) {
  out->push_back('"');
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out->append(escaped);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

// The SPEC 3.1 request for one entry (an XREADGROUP entry reply: [id, [field, value, ...]]).
void BuildRequest(const Target& target, const std::string& stream, const std::string& group,
                  const redisReply* entry, std::string* body, std::string* out) {
  const std::string_view id(entry->element[0]->str, entry->element[0]->len);
  body->assign(R"({"id":")").append(id).append(R"(","stream":)");
  AppendJsonString(body, stream.data(), stream.size());
  body->append(R"(,"group":)");
  AppendJsonString(body, group.data(), group.size());
  body->append(R"(,"attempts":1,"payload":{)");
  const redisReply* fields = entry->element[1];
  for (size_t i = 0; fields->type == REDIS_REPLY_ARRAY && i + 1 < fields->elements; i += 2) {
    if (i > 0) body->push_back(',');
    AppendJsonString(body, fields->element[i]->str, fields->element[i]->len);
    body->push_back(':');
    AppendJsonString(body, fields->element[i + 1]->str, fields->element[i + 1]->len);
  }
  body->append("}}");
  out->assign("POST ").append(target.path).append(" HTTP/1.1\r\nHost: ").append(target.authority);
  out->append("\r\nContent-Type: application/json\r\nContent-Length: ");
  out->append(std::to_string(body->size())).append("\r\nStreamcar-Stream: ").append(stream);
  out->append("\r\nStreamcar-Group: ").append(group).append("\r\nStreamcar-Id: ").append(id);
  out->append("\r\nStreamcar-Attempts: 1\r\nIdempotency-Key: ").append(stream).append("/");
  out->append(id).append("\r\n\r\n").append(*body);
}

redisReply* Run(redisContext* redis, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  return static_cast<redisReply*>(
      redisCommandArgv(redis, static_cast<int>(args.size()), argv.data(), lengths.data()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr,
                 "usage: floor_consumer REDIS_PORT STREAM GROUP CONSUMER HANDLER_URL CONNECTIONS "
                 "START [MAX_ENTRIES]\n");
    return 2;
  }
  const std::string stream = argv[2], group = argv[3], consumer = argv[4];
  const long long port = Number(argv[1]), connections = Number(argv[6]);
  const long long max_entries = argc > 8 ? Number(argv[8]) : -1;
  Target target;
  if (!ParseUrl(argv[5], &target) || port < 1 || connections < 1 || (argc > 8 && max_entries < 0)) {
    return 2;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* address = nullptr;
  if (getaddrinfo(target.host.c_str(), target.port.c_str(), &hints, &address) != 0) return 1;

  redisContext* redis = redisConnect("127.0.0.1", static_cast<int>(port));
  if (redis == nullptr || redis->err != 0) return 1;
  redisReply* reply = Run(redis, {"XGROUP", "CREATE", stream, group, argv[7], "MKSTREAM"});
  if (reply == nullptr) return 1;
  const bool created =
      reply->type != REDIS_REPLY_ERROR || std::strncmp(reply->str, "BUSYGROUP", 9) == 0;
  freeReplyObject(reply);
  if (!created) return 1;
  std::vector<Connection> pool;
  for (int i = 0; i < connections; ++i) {
    pool.emplace_back(address);
    if (!pool.back().Open()) return 1;
  }
  std::puts("ready");
  std::fflush(stdout);

  const std::vector<std::string> read = {"XREADGROUP", "GROUP", group,     consumer, "COUNT", "100",
                                         "BLOCK",      "1000",  "STREAMS", stream,   ">"};
  std::vector<std::string> requests(pool.size());
  std::string body;
  std::vector<bool> sent(pool.size());
  std::vector<std::string> ack;
  long long taken = 0, acked = 0;
  while (max_entries < 0 || taken < max_entries) {
    reply = Run(redis, read);
    if (reply == nullptr) return 1;
    if (reply->type == REDIS_REPLY_ERROR) {
      std::fprintf(stderr, "floor_consumer: %s\n", reply->str);
      return 1;
    }
    ack.assign({"XACK", stream, group});
    const redisReply* entries =
        reply->type == REDIS_REPLY_ARRAY ? reply->element[0]->element[1] : nullptr;
    const size_t count = entries == nullptr ? 0 : entries->elements;
    for (size_t first = 0; first < count; first += pool.size()) {
      const size_t wave = std::min(pool.size(), count - first);
      for (size_t i = 0; i < wave; ++i) {
        BuildRequest(target, stream, group, entries->element[first + i], &body, &requests[i]);
        sent[i] = pool[i].Send(requests[i]);
      }
      for (size_t i = 0; i < wave; ++i) {
        int status = sent[i] ? pool[i].ReadAnswer() : 0;
        if (status == Connection::kStale)
          status = pool[i].Send(requests[i]) ? pool[i].ReadAnswer() : 0;
        if (status >= 200 && status < 300) {
          const redisReply* id = entries->element[first + i]->element[0];
          ack.emplace_back(id->str, id->len);
        }
      }
    }
    taken += static_cast<long long>(count);
    freeReplyObject(reply);
    if (ack.size() > 3) {
      reply = Run(redis, ack);
      if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) return 1;
      acked += reply->integer;
      freeReplyObject(reply);
    }
  }
  std::printf("%lld %lld\n", taken, acked);
  redisFree(redis);
  freeaddrinfo(address);
  return 0;
}
