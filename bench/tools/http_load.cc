// The HTTP limit: CONCURRENCY threads, each with one keep-alive client (TCP_NODELAY), POST the
// same json envelope to the handler for SECONDS. Prints requests per second. No Redis.
// With MODE "api" it is a producer of the log API instead: it POSTs the entry {n, pad} as a JSON
// object to URL (.../v1/streams/<name>/entries) with no delivery headers, optionally with
// "Authorization: Bearer TOKEN"; a 2xx is a receipt. With MODE "batch<N>" (batch100) each POST is
// a batch append of N such entries (a JSON array), and the rate printed counts entries.
// Usage: http_load URL CONCURRENCY SECONDS [api|batch<N> [TOKEN]]

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string url = argv[1];
  const int concurrency = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  const auto slash = url.find('/', url.find("://") + 3);
  const std::string origin = url.substr(0, slash), path = url.substr(slash);
  const std::string mode = argc > 4 ? argv[4] : "";
  const int per_request = mode.starts_with("batch") ? std::atoi(mode.c_str() + 5) : 1;
  const bool api = mode == "api" || mode.starts_with("batch");
  const std::string token = argc > 5 ? argv[5] : "";
  const std::string pad(64, 'x');
  const std::string entry = R"({"n":"1","pad":")" + pad + R"("})";
  std::string body =
      api ? entry
          : R"({"id":"1700000000000-0","stream":"bench","group":"g","attempts":1,"payload":{"n":"1","pad":")" +
                pad + R"("}})";
  if (mode.starts_with("batch")) {
    body = "[";
    for (int i = 0; i < per_request; ++i) body += (i > 0 ? "," : "") + entry;
    body += "]";
  }
  std::atomic<int64_t> done{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&] {
      httplib::Client client(origin);
      client.set_tcp_nodelay(true);
      client.set_keep_alive(true);
      httplib::Headers headers;
      if (!api) {
        headers = {{"Streamcar-Stream", "bench"},
                   {"Streamcar-Group", "g"},
                   {"Streamcar-Id", "1700000000000-0"},
                   {"Streamcar-Attempts", "1"},
                   {"Idempotency-Key", "bench/1700000000000-0"}};
      } else if (!token.empty()) {
        headers = {{"Authorization", "Bearer " + token}};
      }
      while (!stop) {
        auto result = client.Post(path, headers, body, "application/json");
        if (result && result->status < 300) {
          done += per_request;
        } else {
          ++failed;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.1f %lld\n", done / elapsed, static_cast<long long>(failed.load()));
}
