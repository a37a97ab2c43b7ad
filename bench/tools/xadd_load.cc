// The append baseline for the log API's produce benchmark: CONCURRENCY connections straight to
// Redis, each keeping DEPTH XADDs in flight (one pipeline of DEPTH per round trip; DEPTH 1 is one
// append, one receipt, like an API client) for SECONDS. Each entry is {n, pad: 64 bytes}, the body
// the API benchmark posts. Prints entries per second and failures.
// Usage: xadd_load PORT STREAM CONCURRENCY DEPTH SECONDS

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/redis/connection.h"

using streamcar::redis::Command;

int main(int argc, char** argv) {
  if (argc < 6) return 2;
  streamcar::redis::ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = std::atoi(argv[1]);
  const std::string stream = argv[2];
  const int concurrency = std::atoi(argv[3]);
  const int depth = std::atoi(argv[4]);
  const double seconds = std::atof(argv[5]);
  const std::string pad(64, 'x');
  std::atomic<int64_t> done{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&] {
      auto connection = streamcar::redis::Connection::Open(options);
      if (!connection.ok()) {
        ++failed;
        return;
      }
      std::vector<Command> pipeline;
      for (int d = 0; d < depth; ++d) {
        pipeline.push_back(
            Command("XADD").Arg(stream).Arg("*").Arg("n").Arg("1").Arg("pad").Arg(pad));
      }
      while (!stop) {
        auto replies = (*connection)->RunPipeline(pipeline);
        if (!replies.ok()) {
          ++failed;
          return;
        }
        done += depth;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.1f %lld\n", static_cast<double>(done) / elapsed,
              static_cast<long long>(failed.load()));
}
