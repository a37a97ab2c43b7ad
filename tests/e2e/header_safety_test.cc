// SPEC 3.1 "Entry data never becomes HTTP framing", against the real binary and a real handler:
// whoever can XADD cannot add a header, split a request, or get a refused entry counted as
// handled, in any format.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

// A handler that records each request exactly as its bytes arrived (header values are not
// decoded, unlike the shared test handler), so percent-encoding and framing can be asserted. It
// speaks just enough HTTP/1.1: keep-alive, Content-Length bodies.
struct RawRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& lower_name) const {
    for (const auto& [name, value] : headers) {
      if (name == lower_name) return value;
    }
    return "";
  }
};

class RawHandler {
 public:
  using Status = std::function<int(const RawRequest&)>;
  RawHandler() : port_(FreePort()) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd_, 64) != 0) {
      throw std::runtime_error("raw handler cannot listen");
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~RawHandler() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    {
      std::lock_guard lock(mutex_);
      for (int client : clients_) ::shutdown(client, SHUT_RDWR);
    }
    for (auto& t : connections_) t.join();
    for (int client : clients_) ::close(client);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  void SetStatus(Status status) {
    std::lock_guard lock(mutex_);
    status_ = std::move(status);
  }
  std::vector<RawRequest> Requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  size_t Count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        if (stop_) return;
        continue;
      }
      std::lock_guard lock(mutex_);
      clients_.push_back(client);
      connections_.emplace_back([this, client] { Serve(client); });
    }
  }
  void Serve(int client) {
    std::string in;
    char buffer[65536];
    while (!stop_) {
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
        if (n <= 0) return;
        in.append(buffer, static_cast<size_t>(n));
      }
      RawRequest request;
      const std::string head = in.substr(0, head_end);
      size_t line_end = head.find("\r\n");
      const std::string line = head.substr(0, line_end);
      const size_t sp1 = line.find(' ');
      const size_t sp2 = line.find(' ', sp1 + 1);
      request.method = line.substr(0, sp1);
      request.path = line.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t content_length = 0;
      size_t at = line_end == std::string::npos ? head.size() : line_end + 2;
      while (at < head.size()) {
        size_t end = head.find("\r\n", at);
        if (end == std::string::npos) end = head.size();
        const std::string field = head.substr(at, end - at);
        at = end + 2;
        const size_t colon = field.find(':');
        std::string name = field.substr(0, colon);
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        std::string value = colon == std::string::npos ? "" : field.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        if (name == "content-length") content_length = std::stoul(value);
        request.headers.emplace_back(name, value);
      }
      in.erase(0, head_end + 4);
      while (in.size() < content_length) {
        const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
        if (n <= 0) return;
        in.append(buffer, static_cast<size_t>(n));
      }
      request.body = in.substr(0, content_length);
      in.erase(0, content_length);
      int status;
      {
        std::lock_guard lock(mutex_);
        status = status_ ? status_(request) : 200;
        requests_.push_back(request);
      }
      const std::string answer =
          "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\n\r\n";
      if (::send(client, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return;
    }
  }

  int port_;
  int fd_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  Status status_;
  std::vector<RawRequest> requests_;
  std::vector<int> clients_;
  std::vector<std::thread> connections_;
  std::thread acceptor_;
};

class HeaderSafetyTest : public E2eTest {
 protected:
  // The fields of the dead letter of `id`, or empty.
  std::map<std::string, std::string> DeadLetterOf(const std::string& id) {
    auto reply = redis_->Run({"XRANGE", "orders:dlq", "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      std::map<std::string, std::string> out;
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        out[std::string(fields[k].Str())] = std::string(fields[k + 1].Str());
      }
      if (out["streamcar.id"] == id) return out;
    }
    return {};
  }

  SidecarConfig Config(const std::string& handler_extra) {
    SidecarConfig c;
    c.handler_url = raw_.url();
    c.handler_extra = handler_extra;
    return c;
  }

  std::vector<RawRequest> RequestsFor(const std::string& id) {
    std::vector<RawRequest> out;
    for (auto& r : raw_.Requests()) {
      if (r.Header("streamcar-id") == id) out.push_back(r);
    }
    return out;
  }

  // Every header name any request carried, lower-cased.
  std::vector<std::string> AllHeaderNames() {
    std::vector<std::string> names;
    for (const auto& r : raw_.Requests()) {
      for (const auto& [name, value] : r.headers) names.push_back(name);
    }
    return names;
  }

  bool AnyRequestOn(const std::string& path) {
    for (const auto& r : raw_.Requests()) {
      if (r.path == path) return true;
    }
    return false;
  }

  RawHandler raw_;
};

TEST_F(HeaderSafetyTest, CrlfInTypeAddsNoHeaderInAnyFormat) {
  for (const std::string format : {"cloudevents", "json", "raw"}) {
    SCOPED_TRACE(format);
    redis_->Run({"DEL", "orders"});
    auto c = Config("format: " + format);
    auto sidecar = StartSidecar(c);
    const std::string id = Add({"type", "evil\r\nX-Injected: 1", "data", "x", "traceparent",
                                "00-abc\r\nX-Injected: 2", "tracestate", "a=b\r\nX-Injected: 3"});
    ASSERT_TRUE(Eventually([&] { return RequestsFor(id).size() == 1; }, seconds(15)))
        << sidecar->Logs();
    ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
    for (const auto& name : AllHeaderNames()) EXPECT_NE(name, "x-injected");
    const auto requests = RequestsFor(id);
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].Header("traceparent"), "");
    EXPECT_EQ(requests[0].Header("tracestate"), "");
    if (format == "cloudevents") {
      EXPECT_EQ(requests[0].Header("ce-type"), "evil%0D%0AX-Injected:%201");
    }
    sidecar->Terminate();
    ASSERT_EQ(sidecar->Wait(seconds(15)), 0);
  }
}

TEST_F(HeaderSafetyTest, ATypeCannotSplitTheRequestOrAnswerForTheHandler) {
  // The handler refuses every request for real entries and accepts anything on /smuggled: if the
  // type could split the request, the forged request's 200 could be taken as the answer to the
  // next entry, which would be acknowledged without its own 2xx.
  raw_.SetStatus([](const RawRequest& r) { return r.path == "/smuggled" ? 200 : 503; });
  auto c = Config("format: cloudevents");
  auto sidecar = StartSidecar(c);
  const std::string smuggle =
      "x\r\nContent-Length: 0\r\n\r\nPOST /smuggled HTTP/1.1\r\nHost: h\r\n"
      "ce-specversion: 1.0\r\nce-id: forged\r\nce-source: /x\r\nce-type: forged\r\n"
      "Content-Length: 0\r\n\r\n";
  const std::string first = Add({"type", smuggle, "data", "x"});
  const std::string second = Add({"type", "plain", "data", "y"});
  // Each entry is refused max_attempts (3) times and dead-lettered: none counts as handled.
  ASSERT_TRUE(Eventually([&] { return Len("orders:dlq") == 2; }, seconds(20))) << sidecar->Logs();
  EXPECT_EQ(PendingCount(), 0);
  EXPECT_FALSE(AnyRequestOn("/smuggled"));
  EXPECT_EQ(RequestsFor(first).size(), 3u);
  EXPECT_EQ(RequestsFor(second).size(), 3u);
  EXPECT_EQ(DeadLetterOf(first)["streamcar.reason"], "max_attempts");
  EXPECT_EQ(DeadLetterOf(first)["streamcar.status"], "503");
  EXPECT_EQ(DeadLetterOf(second)["streamcar.reason"], "max_attempts");
  for (const auto& r : raw_.Requests()) {
    EXPECT_EQ(r.path, "/");
    EXPECT_NE(r.Header("ce-id"), "forged");
  }
  EXPECT_EQ(Metric("streamcar_deliveries_total", {"outcome=\"success\""}), 0);
}

TEST_F(HeaderSafetyTest, ContentTypeWithCrlfIsDeadLetteredInvalidAndNothingIsPosted) {
  for (const std::string format : {"raw", "cloudevents"}) {
    SCOPED_TRACE(format);
    redis_->Run({"DEL", "orders", "orders:dlq"});
    const size_t before = raw_.Count();
    auto c = Config("format: " + format);
    auto sidecar = StartSidecar(c);
    const std::string bad =
        Add({"data", "x", "content_type", "text/plain\r\nX-Injected: 1\r\n\r\nPOST /smuggled"});
    // A later entry proves delivery went on (and gives the refused one time to be sent, were it).
    const std::string sentinel = Add({"data", "y", "content_type", "text/plain; charset=utf-8"});
    ASSERT_TRUE(Eventually([&] { return RequestsFor(sentinel).size() == 1; }, seconds(15)))
        << sidecar->Logs();
    ASSERT_TRUE(
        Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(10)))
        << sidecar->Logs();
    EXPECT_EQ(raw_.Count(), before + 1);  // only the sentinel
    EXPECT_TRUE(RequestsFor(bad).empty());
    EXPECT_FALSE(AnyRequestOn("/smuggled"));
    EXPECT_EQ(RequestsFor(sentinel)[0].Header("content-type"), "text/plain; charset=utf-8");
    auto dead = DeadLetterOf(bad);
    EXPECT_EQ(dead["streamcar.reason"], "invalid");
    EXPECT_NE(dead["streamcar.error"].find("content_type"), std::string::npos)
        << dead["streamcar.error"];
    EXPECT_EQ(dead["content_type"], "text/plain\r\nX-Injected: 1\r\n\r\nPOST /smuggled");
    EXPECT_TRUE(WaitMetric("streamcar_dead_lettered_total", {"reason=\"invalid\""}, 1, seconds(5)));
    sidecar->Terminate();
    ASSERT_EQ(sidecar->Wait(seconds(15)), 0);
  }
}

TEST_F(HeaderSafetyTest, BatchModeCarriesHostileFieldsInTheBodyOnly) {
  auto c = Config("batch_size: 10");
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  for (int i = 0; i < 5; ++i) {
    Add({"type", "evil\r\nX-Injected: 1", "traceparent", "x\r\n\r\nPOST /smuggled HTTP/1.1",
         "content_type", "a\r\nb"});
  }
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0 && Len("orders") == 5; }, seconds(15)))
      << sidecar->Logs();
  for (const auto& name : AllHeaderNames()) EXPECT_NE(name, "x-injected");
  EXPECT_FALSE(AnyRequestOn("/smuggled"));
  size_t entries = 0;
  for (const auto& r : raw_.Requests()) {
    for (size_t at = r.body.find("\"id\""); at != std::string::npos;
         at = r.body.find("\"id\"", at + 1)) {
      ++entries;
    }
    EXPECT_NE(r.body.find("evil\\r\\nX-Injected: 1"), std::string::npos) << r.body;
  }
  EXPECT_EQ(entries, 5u);
}

TEST_F(HeaderSafetyTest, CloudEventsAttributesArePercentEncoded) {
  auto c = Config("format: cloudevents");
  c.stream = "\"orders \xC3\xA9/q1 2024\"";  // YAML-quoted: spaces, '/' and non-ASCII
  auto sidecar = StartSidecar(c);
  const std::string stream = "orders \xC3\xA9/q1 2024";
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  Add({"type", "caf\xC3\xA9 100% \"x\"", "type", "second", "data", "{}", "content_type",
       "application/json"},
      stream);
  ASSERT_TRUE(Eventually([&] { return raw_.Count() == 1; }, seconds(15))) << sidecar->Logs();
  const auto r = raw_.Requests()[0];
  EXPECT_EQ(r.Header("ce-type"), "caf%C3%A9%20100%25%20%22x%22");
  EXPECT_EQ(r.Header("ce-source"), "/streams/orders%20%C3%A9%2Fq1%202024");
  EXPECT_EQ(r.Header("ce-specversion"), "1.0");
  EXPECT_EQ(r.Header("content-type"), "application/json");
}

}  // namespace
}  // namespace streamcar::testing
