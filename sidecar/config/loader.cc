#include "sidecar/config/loader.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sidecar/common/log.h"
#include "sidecar/common/text.h"
#include "sidecar/config/dead_letter_default.h"
#include "sidecar/config/fields.h"
#include "sidecar/config/validate.h"

namespace streamcar::config {
namespace {

// Cross-key rules name a path; give them the line of the list item or the section they are in.
int LineForPath(const Reader& in, const std::string& path, const YAML::Node& root) {
  for (const auto& field : ConfigFields()) {
    if (!field.nested) continue;
    const std::string key(field.key);
    if (path.starts_with(key + "[")) {
      return in.ItemLine(key, std::strtoul(path.c_str() + key.size() + 1, nullptr, 10));
    }
  }
  for (const auto& field : ConfigFields()) {
    const std::string key(field.key);
    if (field.nested && path.starts_with(key) && root[key] && root[key].IsMap()) {
      return Reader::Line(root[key]);
    }
  }
  return 0;
}

// log.level's default: $STREAMCAR_LOG_LEVEL when set and not empty (a `log.level` in the file,
// read after this, wins). An unknown value is the same error `run` gives for it before loading.
LogLevel LevelFromEnv(const Reader& in, const EnvLookup& env) {
  const auto value = env("STREAMCAR_LOG_LEVEL");
  if (!value || value->empty()) return LogLevel::kInfo;
  auto level = ParseLogLevel(*value);
  if (!level.ok()) {
    throw ConfigProblem{in.Locate(0, "STREAMCAR_LOG_LEVEL", level.status().message())};
  }
  return *level;
}

Config Decode(const std::string& file, const EnvLookup& env, const YAML::Node& root) {
  Reader in(file, env);
  Config config;
  config.source_file = file;
  if (!root || root.IsNull()) in.Fail(root, "", "the file is empty (see SPEC section 2)");
  in.RequireMap(root, "(top level)");
  config.log.level = LevelFromEnv(in, env);
  ReadSection<Config>(in, root, "", ConfigFields(), &config);
  if (config.consumer_name.empty()) config.consumer_name = HostName();
  FillDeadLetterDefaults(&config);
  FillShardRouting(&config);
  ValidateConfig(config, [&](const std::string& path, const std::string& message) {
    throw ConfigProblem{in.Locate(LineForPath(in, path, root), path, message)};
  });
  return config;
}

}  // namespace

StatusOr<Config> LoadConfigText(std::string_view yaml, const std::string& source_name,
                                const EnvLookup& env) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return Decode(source_name, env, root);
  } catch (const ConfigProblem& problem) {
    return Status(StatusCode::kInvalid, PrintableOneLine(problem.message));
  } catch (const YAML::Exception& e) {
    std::string message = source_name;
    if (e.mark.line >= 0) {
      message += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    return Status(StatusCode::kInvalid, PrintableOneLine(message + ": invalid YAML: " + e.msg));
  }
}

StatusOr<Config> LoadConfigFile(const std::string& path, const EnvLookup& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(StatusCode::kInvalid,
                  path + ": cannot read the configuration file: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return LoadConfigText(text.str(), path, env);
}

std::string EmitEffectiveYaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  WriteSection<Config>(out, ConfigFields(), config);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace streamcar::config
