#include "tests/e2e/log_api_fixture.h"

#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

namespace streamcar::testing {

int ConnectTo(int port, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool ReadSome(int fd, std::string* buffer, milliseconds wait, bool* closed) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char chunk[16384];
  const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
  if (n <= 0) {
    *closed = true;
    return false;
  }
  buffer->append(chunk, static_cast<size_t>(n));
  return true;
}

std::string JsonString(const std::string& json, const std::string& key) {
  const std::string marker = "\"" + key + "\":\"";
  const size_t start = json.find(marker);
  if (start == std::string::npos) return "";
  const size_t from = start + marker.size();
  return json.substr(from, json.find('"', from) - from);
}

int64_t ResidentKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  }
  return -1;
}

int ThreadCount(pid_t pid) {
  DIR* tasks = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (tasks == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(tasks);
  return count;
}

void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

ApiAnswer Exchange(int port, const std::string& method, const std::string& path,
                   const std::vector<std::string>& headers, const std::string& body,
                   milliseconds timeout) {
  const auto start = Clock::now();
  ApiAnswer answer;
  const int fd = ConnectTo(port);
  if (fd < 0) return answer;
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& header : headers) request += header + "\r\n";
  if (!body.empty() || method == "POST") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "Connection: close\r\n\r\n" + body;
  std::string text;
  bool closed = false;
  const auto deadline = start + timeout;
  if (SendAll(fd, request)) {
    while (!closed && Clock::now() < deadline) ReadSome(fd, &text, milliseconds(50), &closed);
  }
  ::close(fd);
  answer.took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  if (text.size() < 12 || !text.starts_with("HTTP/1.1 ")) return answer;
  answer.status = std::stoi(text.substr(9, 3));
  const size_t body_at = text.find("\r\n\r\n");
  answer.body = body_at == std::string::npos ? "" : text.substr(body_at + 4);
  return answer;
}

namespace {

// Takes every whole event off the front of *buffer (the body of an SSE answer) and passes the id of
// each that has one to `on_id`, in order; a partial event stays in *buffer.
void TakeEventIds(std::string* buffer, const std::function<void(const std::string&)>& on_id) {
  size_t end;
  while ((end = buffer->find("\n\n")) != std::string::npos) {
    const std::string block = "\n" + buffer->substr(0, end);
    buffer->erase(0, end + 2);
    const size_t id_at = block.find("\nid: ");
    if (id_at == std::string::npos) continue;  // a comment (keep-alive)
    const size_t from = id_at + 5;
    on_id(block.substr(from, block.find('\n', from) - from));
  }
}

}  // namespace

void ReadEventStream(int fd, const std::atomic<bool>& stop, std::atomic<int>* status,
                     const std::function<void(const std::string&)>& on_id) {
  std::string buffer;
  bool closed = false;
  bool in_body = false;
  while (!closed && !stop.load()) {
    ReadSome(fd, &buffer, milliseconds(50), &closed);
    if (!in_body) {
      const size_t head_end = buffer.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      *status = buffer.size() >= 12 ? std::stoi(buffer.substr(9, 3)) : -1;
      if (*status != 200) return;
      buffer.erase(0, head_end + 4);
      in_body = true;
    }
    TakeEventIds(&buffer, on_id);
  }
}

SseFollower::SseFollower(int port, const std::string& path,
                         const std::vector<std::string>& headers) {
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& header : headers) request += header + "\r\n";
  request += "\r\n";
  thread_ = std::thread([this, port, request] { Run(port, request); });
}

SseFollower::~SseFollower() {
  stop_ = true;
  thread_.join();
}

std::vector<std::string> SseFollower::ids() const {
  std::lock_guard lock(mutex_);
  return ids_;
}

bool SseFollower::WaitEvents(size_t count, milliseconds timeout) const {
  return Eventually([&] { return ids().size() >= count; }, timeout);
}

void SseFollower::Run(int port, const std::string& request) {
  const int fd = ConnectTo(port);
  if (fd < 0) return;
  if (SendAll(fd, request)) {
    ReadEventStream(fd, stop_, &status_, [this](const std::string& id) {
      std::lock_guard lock(mutex_);
      ids_.push_back(id);
    });
  }
  ::close(fd);
}

HealthProbe::HealthProbe(int port) {
  thread_ = std::thread([this, port] {
    while (!stop_.load()) {
      const ApiAnswer answer = Exchange(port, "GET", "/healthz", {}, "", seconds(5));
      ++polls_;
      if (answer.status != 200 || answer.took > seconds(1)) ++failures_;
      if (answer.took.count() > slowest_.load()) slowest_ = answer.took.count();
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
}

HealthProbe::~HealthProbe() {
  stop_ = true;
  thread_.join();
}

std::string LogApiTest::LogApiYaml(const LogApiConfig& c) const {
  return "version: 1\nredis: { url: \"" + redis_->url() +
         "\", connect_timeout: " + c.connect_timeout + ", command_timeout: " + c.command_timeout +
         " }\nadmin: { listen: \"127.0.0.1:" + std::to_string(admin_port_) +
         "\" }\napi:\n  listen: \"" + c.listen_host + ":" + std::to_string(api_port_) + "\"\n" +
         c.api_extra + "streams:\n" + c.streams + c.top_extra;
}

void LogApiTest::StartApi(const LogApiConfig& c) {
  sidecar_ =
      std::make_unique<SidecarProcess>(LogApiYaml(c), std::vector<std::string>{}, admin_port_);
  // A binary that refuses its configuration exits at once: no need to wait the whole timeout.
  const bool ready = Eventually(
      [&] { return !sidecar_->running() || HttpGet(admin_port_, "/readyz").first == 200; },
      seconds(15));
  ASSERT_TRUE(ready && sidecar_->running()) << sidecar_->Logs();
}

}  // namespace streamcar::testing
