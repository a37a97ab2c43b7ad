// `streamcar route --subscription NAME KEY` (SPEC 1, 9): which shard of a sharded subscription a
// producer's KEY goes to. It reads only the configuration: no Redis is needed to route.

#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/config/loader.h"
#include "sidecar/keys/sharding_keys.h"

namespace streamcar::cli {

int RouteCommand(const Arguments& args) {
  auto config = config::LoadConfigFile(args.config_path);
  if (!config.ok()) {
    std::cerr << "streamcar: " << config.status().message() << "\n";
    return 2;
  }
  int exit_code = 0;
  const config::Subscription* sub =
      FindSubscriptionOrReport(*config, args.subscription, &exit_code);
  if (sub == nullptr) return exit_code;
  if (!sub->sharding.enabled()) {
    std::cerr << "streamcar: subscription \"" << sub->name << "\" is not sharded (no "
              << "sharding.shards in " << config->source_file << ")\n";
    return 2;
  }
  const int shard = keys::ShardOf(args.key, sub->sharding.shards);
  std::cout << shard << " " << keys::ShardKey(sub->ShardKeyPattern(), shard) << "\n";
  return 0;
}

}  // namespace streamcar::cli
