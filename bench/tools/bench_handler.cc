// The benchmark's handler: answers 204 at once (TCP_NODELAY, keep-alive) and records, for each
// entry, the time from the producer's timestamp (field "t", µs since the epoch) to receipt.
// GET /stats returns "count p50_us p99_us p999_us" and resets; GET /count returns entries seen,
// GET /requests "POSTs entries" (the POSTs that carried them, read together with the entries:
// entries per POST between two reads is how full the batches were).
// With UNIX_SOCKET it also listens there (SPEC 11, handler.unix_socket), the same handlers and
// counters on both, so that one run compares loopback TCP with the socket (bench/run
// --unix-socket).
// Usage: bench_handler PORT THREADS [UNIX_SOCKET]

#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Entries in a body: one "attempts" per envelope, batch or not.
int64_t CountEntries(const std::string& body) {
  int64_t n = 0;
  for (size_t at = 0; (at = body.find("\"attempts\":", at)) != std::string::npos; ++at) ++n;
  return n;
}

// Every "t":"<µs>" in the body (one per entry that carries a send time).
void CollectLatencies(const std::string& body, int64_t now, std::vector<int64_t>* out) {
  size_t at = 0;
  while ((at = body.find("\"t\":\"", at)) != std::string::npos) {
    at += 5;
    out->push_back(now - std::strtoll(body.c_str() + at, nullptr, 10));
  }
}

// httplib 0.11 listens on TCP only; its accept loop takes any listening socket in svr_sock_, so
// BindUnix gives it a Unix socket instead.
class HandlerServer final : public httplib::Server {
 public:
  bool BindUnix(const std::string& path) {
    ::unlink(path.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (fd < 0 || path.size() >= sizeof(address.sun_path)) return false;
    path.copy(address.sun_path, path.size());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd, 1024) != 0) {
      ::close(fd);
      return false;
    }
    svr_sock_ = fd;
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 18080;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 64;
  std::mutex mutex;
  std::vector<int64_t> latencies;
  std::atomic<int64_t> entries{0};
  std::atomic<int64_t> requests{0};
  HandlerServer tcp_server;
  HandlerServer unix_server;
  for (HandlerServer* server : {&tcp_server, &unix_server}) {
    server->set_tcp_nodelay(true);
    server->set_keep_alive_max_count(1 << 30);
    server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server->Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
      const int64_t now = NowMicros();
      std::vector<int64_t> local;
      CollectLatencies(req.body, now, &local);
      entries += CountEntries(req.body);
      ++requests;
      if (!local.empty()) {
        std::lock_guard lock(mutex);
        latencies.insert(latencies.end(), local.begin(), local.end());
      }
      res.status = 204;
    });
    server->Get("/count", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::to_string(entries.load()), "text/plain");
    });
    server->Get("/requests", [&](const httplib::Request&, httplib::Response& res) {
      const int64_t posts = requests.load();  // before the entries: never more POSTs than entries
      res.set_content(std::to_string(posts) + " " + std::to_string(entries.load()), "text/plain");
    });
    server->Get("/stats", [&](const httplib::Request&, httplib::Response& res) {
      std::vector<int64_t> all;
      {
        std::lock_guard lock(mutex);
        all.swap(latencies);
      }
      std::sort(all.begin(), all.end());
      auto pct = [&](double p) {
        return all.empty() ? 0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
      };
      res.set_content(std::to_string(all.size()) + " " + std::to_string(pct(0.5)) + " " +
                          std::to_string(pct(0.99)) + " " + std::to_string(pct(0.999)),
                      "text/plain");
    });
  }
  std::thread on_socket;
  if (argc > 3) {
    if (!unix_server.BindUnix(argv[3])) return 1;
    on_socket = std::thread([&] { unix_server.listen_after_bind(); });
  }
  tcp_server.listen("127.0.0.1", port);
  unix_server.stop();
  if (on_socket.joinable()) on_socket.join();
}
