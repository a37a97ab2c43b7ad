#include "tests/support/redis_monitor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace streamcar::testing {
namespace {

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

RedisMonitor::RedisMonitor(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return;
  static constexpr char kMonitor[] = "MONITOR\r\n";
  if (::send(fd_, kMonitor, sizeof(kMonitor) - 1, MSG_NOSIGNAL) != sizeof(kMonitor) - 1) return;
  // The first reply is +OK; everything after it is one "+<time> [db addr] "cmd" "arg"..." line
  // per command.
  std::string first;
  char c;
  while (::recv(fd_, &c, 1, 0) == 1) {
    first += c;
    if (first.ends_with("\r\n")) break;
  }
  ok_ = first == "+OK\r\n";
  if (ok_) thread_ = std::thread([this] { ReadLoop(); });
}

RedisMonitor::~RedisMonitor() {
  stop_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void RedisMonitor::ReadLoop() {
  char chunk[65536];
  while (!stop_) {
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return;
    buffer_.append(chunk, static_cast<size_t>(n));
    size_t end;
    while ((end = buffer_.find("\r\n")) != std::string::npos) {
      Parse(buffer_.substr(0, end));
      buffer_.erase(0, end + 2);
    }
  }
}

// `+1700000000.123456 [0 127.0.0.1:5555] "XADD" "orders" "*" "k" "v"`: the quoted words, with
// Redis's escapes (\" \\ \n \r \t \xHH) undone.
void RedisMonitor::Parse(const std::string& line) {
  const size_t start = line.find("] ");
  if (line.empty() || line[0] != '+' || start == std::string::npos) return;
  std::vector<std::string> words;
  for (size_t i = start + 2; i < line.size(); ++i) {
    if (line[i] != '"') continue;
    std::string word;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\' || i + 1 >= line.size()) {
        word += line[i];
        continue;
      }
      const char e = line[++i];
      if (e == 'n') {
        word += '\n';
      } else if (e == 'r') {
        word += '\r';
      } else if (e == 't') {
        word += '\t';
      } else if (e == 'x' && i + 2 < line.size()) {
        word += static_cast<char>(std::stoi(line.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        word += e;
      }
    }
    words.push_back(std::move(word));
  }
  if (words.empty()) return;
  words[0] = Upper(words[0]);
  // "[0 lua]" for a command a script ran, "[0 127.0.0.1:5555]" for a client's.
  const bool from_script = line.rfind(" lua]", start) != std::string::npos;
  std::lock_guard lock(mutex_);
  commands_.push_back(std::move(words));
  from_script_.push_back(from_script);
}

std::vector<std::vector<std::string>> RedisMonitor::Commands() const {
  std::lock_guard lock(mutex_);
  return commands_;
}

std::vector<RedisMonitor::Seen> RedisMonitor::CommandsWithSource() const {
  std::lock_guard lock(mutex_);
  std::vector<Seen> out;
  out.reserve(commands_.size());
  for (size_t i = 0; i < commands_.size(); ++i) out.push_back({commands_[i], from_script_[i]});
  return out;
}

std::vector<std::string> RedisMonitor::Matching(const std::string& name) const {
  const std::string wanted = Upper(name);
  std::vector<std::string> out;
  for (const auto& words : Commands()) {
    std::string head = words[0];
    if (wanted.find(' ') != std::string::npos && words.size() > 1) head += " " + Upper(words[1]);
    if (head != wanted) continue;
    std::string printable;
    for (const auto& w : words) printable += (printable.empty() ? "" : " ") + w;
    out.push_back(printable);
  }
  return out;
}

}  // namespace streamcar::testing
