#include "sidecar/config/route_fields.h"

#include <sys/un.h>

#include "sidecar/common/token_file.h"
#include "sidecar/config/url_rules.h"

namespace streamcar::config {

namespace {

std::string CheckTokenFile(const std::string& path) {
  if (path.empty()) return {};
  auto token = ReadTokenFile(path);
  return token.ok() ? std::string() : token.status().message();
}

std::string CheckOptionalUrl(const std::string& url) {
  return url.empty() ? std::string() : CheckHttpUrl(url);
}

// equals / prefix: present (even as "") or absent.
template <std::optional<std::string> RouteConfig::*M>
void ReadMatchText(Reader& in, const Field<RouteConfig>&, const YAML::Node&,
                   const YAML::Node& value, const std::string& path, RouteConfig* out) {
  out->*M = in.Text(value, path);
}

template <std::optional<std::string> RouteConfig::*M>
void WriteMatchText(Writer& out, const Field<RouteConfig>& field, const RouteConfig& route) {
  if (!(route.*M)) return;  // only the one of equals and prefix that is set
  out << YAML::Key << std::string(field.key) << YAML::Value << *(route.*M);
}

constexpr auto kRouteFields = std::to_array<Field<RouteConfig>>({
    Text<&RouteConfig::field>("field", kRequired),
    Custom<RouteConfig>("equals", &ReadMatchText<&RouteConfig::equals>,
                        &WriteMatchText<&RouteConfig::equals>),
    Custom<RouteConfig>("prefix", &ReadMatchText<&RouteConfig::prefix>,
                        &WriteMatchText<&RouteConfig::prefix>),
    Text<&RouteConfig::url>("url", kUrlPassword, &CheckOptionalUrl),
    Bool<&RouteConfig::drop>("drop"),
});

// The rules between a route's keys; `item` is its mapping.
void CheckRoute(const Reader& in, const YAML::Node& item, const std::string& path,
                const RouteConfig& route) {
  if (route.equals && route.prefix) {
    in.Fail(item["prefix"], path + ".prefix", "set equals or prefix, not both");
  }
  if (!route.equals && !route.prefix) {
    in.Fail(item, path,
            "needs equals or prefix (what the value of field \"" + route.field +
                "\" is compared with)");
  }
  if (route.drop && !route.url.empty()) {
    in.Fail(item["url"], path + ".url",
            "a route with drop: true acknowledges its entries without delivering them; it has "
            "no url");
  }
  if (!route.drop && route.url.empty()) {
    in.Fail(item, path + ".url",
            "required: where this route's entries are delivered (or drop: true to acknowledge "
            "them without a delivery)");
  }
}

}  // namespace

std::string CheckUnixSocket(const std::string& path) {
  if (path.empty()) return {};
  if (path.front() != '/') {
    return "must be an absolute path, like /var/run/app/http.sock (got \"" + path + "\")";
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return "a Unix socket path has at most " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
           " bytes (got " + std::to_string(path.size()) + ")";
  }
  return {};
}

constexpr std::array<Field<HandlerAuthConfig>, 2> kHandlerAuthFields = {
    Text<&HandlerAuthConfig::bearer_token_file>("bearer_token_file", 0, &CheckTokenFile),
    Text<&HandlerAuthConfig::hmac_secret>("hmac_secret", kSecret),
};

void ReadRoutes(Reader& in, const Field<Subscription>&, const YAML::Node&, const YAML::Node& value,
                const std::string& path, Subscription* out) {
  out->routes.clear();
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    in.Fail(value, path,
            "must be a list of routes, e.g. [{field: type, equals: order.created, url: "
            "\"http://127.0.0.1:8080/created\"}]");
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const YAML::Node item = value[i];
    in.RequireMap(item, item_path);
    RouteConfig route;
    ReadSection<RouteConfig>(in, item, item_path, kRouteFields, &route);
    CheckRoute(in, item, item_path, route);
    out->routes.push_back(std::move(route));
  }
}

void WriteRoutes(Writer& out, const Field<Subscription>& field, const Subscription& sub) {
  out << YAML::Key << std::string(field.key) << YAML::Value;
  if (sub.routes.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& route : sub.routes) {
    out << YAML::BeginMap;
    WriteSection<RouteConfig>(out, kRouteFields, route);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace streamcar::config
