#include "berth/config/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// Every loader error carries where it happened: source:line:column: field.path: message.
class ErrorSite {
 public:
  ErrorSite(absl::string_view source, std::string path, const YAML::Mark& mark)
      : source_(source), path_(std::move(path)), mark_(mark) {
    // An empty document has no position; point at its start.
    if (mark_.line < 0 || mark_.column < 0) mark_.line = mark_.column = 0;
  }

  absl::Status error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", mark_.line + 1, ":",
                                                   mark_.column + 1, ": ", path_, ": ", message));
  }
  std::string warning(absl::string_view message) const {
    return absl::StrCat(source_, ":", mark_.line + 1, ": ", path_, ": ", message);
  }
  int line() const { return mark_.line + 1; }

 private:
  absl::string_view source_;
  std::string path_;
  YAML::Mark mark_;
};

// A YAML map whose keys have been checked against the allowed set, with each value's position.
class Fields {
 public:
  struct Field {
    YAML::Node value;
    YAML::Mark key_mark;
  };

  static absl::StatusOr<Fields> read(absl::string_view source, const std::string& path,
                                     const YAML::Node& node,
                                     std::initializer_list<absl::string_view> allowed) {
    if (!node.IsMap()) {
      return ErrorSite(source, path, node.Mark()).error("expected a map of keys to values");
    }
    Fields fields(source, path, node.Mark());
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      const ErrorSite site(source, path.empty() ? key : absl::StrCat(path, ".", key),
                           it->first.Mark());
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return site.error(
            absl::StrCat("unknown key; expected one of: ", absl::StrJoin(allowed, ", ")));
      }
      if (!fields.fields_.emplace(key, Field{it->second, it->first.Mark()}).second) {
        return site.error("key appears twice");
      }
    }
    return fields;
  }

  bool has(absl::string_view key) const { return fields_.contains(key); }
  const YAML::Node* find(absl::string_view key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second.value;
  }
  std::string pathOf(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }
  ErrorSite site(absl::string_view key) const {
    auto it = fields_.find(key);
    // A value's own mark points at the value; an empty value has none, so fall back to its key.
    const YAML::Mark mark = it == fields_.end()                 ? mark_
                            : it->second.value.Mark().is_null() ? it->second.key_mark
                                                                : it->second.value.Mark();
    return ErrorSite(source_, pathOf(key), mark);
  }
  ErrorSite self() const { return ErrorSite(source_, path_, mark_); }

  absl::StatusOr<std::string> requiredString(absl::string_view key) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) return self().error(absl::StrCat("missing required key '", key, "'"));
    if (!node->IsScalar() || node->Scalar().empty()) {
      return site(key).error("expected a non-empty string");
    }
    return node->Scalar();
  }

  // An integer in [low, high], or `fallback` when the key is absent.
  absl::StatusOr<int64_t> integer(absl::string_view key, int64_t low, int64_t high,
                                  std::optional<int64_t> fallback) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) {
      if (fallback) return *fallback;
      return self().error(absl::StrCat("missing required key '", key, "'"));
    }
    int64_t value = 0;
    if (!node->IsScalar() || !absl::SimpleAtoi(node->Scalar(), &value) || value < low ||
        value > high) {
      return site(key).error(absl::StrCat("must be an integer from ", low, " to ", high, ", got '",
                                          node->IsScalar() ? node->Scalar() : "a non-scalar", "'"));
    }
    return value;
  }

  absl::StatusOr<IpAddress> address(absl::string_view key) const {
    absl::StatusOr<std::string> text = requiredString(key);
    if (!text.ok()) return text.status();
    absl::StatusOr<IpAddress> address = IpAddress::parse(*text);
    if (!address.ok()) return site(key).error(address.status().message());
    return address;
  }

 private:
  Fields(absl::string_view source, std::string path, YAML::Mark mark)
      : source_(source), path_(std::move(path)), mark_(mark) {}

  absl::string_view source_;
  std::string path_;
  YAML::Mark mark_;
  absl::flat_hash_map<std::string, Field> fields_;
};

absl::StatusOr<BackendConfig> parseBackend(absl::string_view source, const std::string& path,
                                           const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields,
                         Fields::read(source, path, node, {"name", "address", "weight"}));
  BackendConfig backend;
  backend.line = fields.self().line();
  BERTH_ASSIGN_OR_RETURN(backend.name, fields.requiredString("name"));
  BERTH_ASSIGN_OR_RETURN(backend.address, fields.address("address"));
  BERTH_ASSIGN_OR_RETURN(backend.weight, fields.integer("weight", 0, kMaxWeight, 1));
  return backend;
}

absl::StatusOr<ServiceConfig> parseService(absl::string_view source, const std::string& path,
                                           const YAML::Node& node,
                                           std::vector<std::string>& warnings) {
  BERTH_ASSIGN_OR_RETURN(
      const Fields fields,
      Fields::read(source, path, node,
                   {"name", "vip", "port", "protocol", "table_size", "hash_fields", "backends"}));
  ServiceConfig service;
  service.line = fields.self().line();
  BERTH_ASSIGN_OR_RETURN(service.name, fields.requiredString("name"));
  BERTH_ASSIGN_OR_RETURN(service.vip, fields.address("vip"));
  BERTH_ASSIGN_OR_RETURN(service.port, fields.integer("port", 1, 65535, std::nullopt));

  BERTH_ASSIGN_OR_RETURN(const std::string protocol, fields.requiredString("protocol"));
  if (protocol == "tcp") {
    service.protocol = Protocol::kTcp;
  } else if (protocol == "udp") {
    service.protocol = Protocol::kUdp;
  } else {
    return fields.site("protocol").error(absl::StrCat("must be tcp or udp, got '", protocol, "'"));
  }

  BERTH_ASSIGN_OR_RETURN(service.table_size,
                         fields.integer("table_size", 2, kMaxTableSize, kDefaultTableSize));
  if (!isPrime(service.table_size)) {
    return fields.site("table_size")
        .error(absl::StrCat(service.table_size,
                            " is not prime; Maglev needs a prime table size (65537 and 655373 are "
                            "common choices)"));
  }

  if (fields.has("hash_fields")) {
    BERTH_ASSIGN_OR_RETURN(const std::string text, fields.requiredString("hash_fields"));
    absl::StatusOr<HashFields> hash_fields = parseHashFields(text);
    if (!hash_fields.ok()) return fields.site("hash_fields").error(hash_fields.status().message());
    service.hash_fields = *hash_fields;
  }

  const YAML::Node* backends = fields.find("backends");
  if (backends == nullptr) return fields.self().error("missing required key 'backends'");
  if (!backends->IsSequence() && !backends->IsNull()) {
    return fields.site("backends").error("expected a list of backends");
  }
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<IpAddress> addresses;
  for (size_t i = 0; i < backends->size(); ++i) {
    const std::string backend_path = absl::StrCat(fields.pathOf("backends"), "[", i, "]");
    const YAML::Node backend_node = (*backends)[i];
    BERTH_ASSIGN_OR_RETURN(BackendConfig backend, parseBackend(source, backend_path, backend_node));
    const ErrorSite site(source, backend_path, backend_node.Mark());
    if (!names.insert(backend.name).second) {
      return site.error(absl::StrCat("duplicate backend name '", backend.name, "' in service '",
                                     service.name, "'"));
    }
    if (!addresses.insert(backend.address).second) {
      return site.error(absl::StrCat("backend address ", backend.address.toString(),
                                     " is already used by another backend of service '",
                                     service.name, "'"));
    }
    service.backends.push_back(std::move(backend));
  }

  const std::vector<Backend> maglev_backends = service.maglevBackends();
  if (absl::Status status = validateBackends(maglev_backends, service.table_size); !status.ok()) {
    return fields.site("backends").error(status.message());
  }
  if (uint64_t{service.table_size} < 100 * uint64_t{service.backends.size()}) {
    warnings.push_back(
        fields.site("table_size")
            .warning(absl::StrCat(service.table_size, " is less than 100 slots for each of ",
                                  service.backends.size(),
                                  " backends; balance and failover disruption "
                                  "suffer, consider a larger prime such as 655373")));
  }
  return service;
}

}  // namespace

absl::StatusOr<Config> parseConfig(absl::string_view yaml_text, absl::string_view source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return ErrorSite(source_name, "yaml", e.mark).error(e.msg);
  }
  if (root.IsNull()) {
    return ErrorSite(source_name, "config", root.Mark())
        .error("is empty; expected a map with 'services'");
  }

  Config config;
  try {
    BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source_name, "", root, {"services"}));
    const YAML::Node* services = fields.find("services");
    if (services == nullptr) return fields.self().error("missing required key 'services'");
    if (!services->IsSequence() && !services->IsNull()) {
      return fields.site("services").error("expected a list of services");
    }
    absl::flat_hash_set<std::string> names;
    absl::flat_hash_map<std::tuple<IpAddress, uint16_t, Protocol>, std::string> listeners;
    for (size_t i = 0; i < services->size(); ++i) {
      const std::string path = absl::StrCat("services[", i, "]");
      const YAML::Node node = (*services)[i];
      BERTH_ASSIGN_OR_RETURN(ServiceConfig service,
                             parseService(source_name, path, node, config.warnings));
      const ErrorSite site(source_name, path, node.Mark());
      if (!names.insert(service.name).second) {
        return site.error(absl::StrCat("duplicate service name '", service.name, "'"));
      }
      auto [it, inserted] =
          listeners.emplace(std::tuple(service.vip, service.port, service.protocol), service.name);
      if (!inserted) {
        return site.error(absl::StrCat(toString(service.protocol), " ", service.vip.toString(), ":",
                                       service.port, " is already served by service '", it->second,
                                       "'"));
      }
      config.services.push_back(std::move(service));
    }
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed trees while they are walked; report, never escape.
    return ErrorSite(source_name, "yaml", e.mark).error(e.msg);
  }
  return config;
}

absl::StatusOr<Config> loadConfigFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  return parseConfig(text.str(), path);
}

}  // namespace berth
