// The Redis limit: one consumer drains a preloaded stream with XREADGROUP COUNT 500 and one XACK
// per batch, no HTTP. Prints entries per second.
// Usage: redis_drain PORT STREAM GROUP

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "sidecar/redis/connection.h"

using streamcar::redis::Command;

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  streamcar::redis::ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = std::atoi(argv[1]);
  const std::string stream = argv[2], group = argv[3];
  auto connection = streamcar::redis::Connection::Open(options);
  if (!connection.ok()) return 1;
  auto& redis = **connection;
  int64_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    auto reply = redis.Run(Command("XREADGROUP")
                               .Arg("GROUP")
                               .Arg(group)
                               .Arg("limit")
                               .Arg("COUNT")
                               .Arg(int64_t{500})
                               .Arg("STREAMS")
                               .Arg(stream)
                               .Arg(">"));
    if (!reply.ok() || reply->IsNil()) break;
    auto entries = reply->view()[0][1];
    if (entries.Size() == 0) break;
    Command ack("XACK");
    ack.Arg(stream).Arg(group);
    for (size_t i = 0; i < entries.Size(); ++i) ack.Arg(entries[i][0].Str());
    if (!redis.Run(ack).ok()) return 1;
    total += static_cast<int64_t>(entries.Size());
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.1f %lld\n", total / elapsed, static_cast<long long>(total));
}
