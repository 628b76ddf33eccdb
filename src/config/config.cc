#include "berth/config/config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "berth/maglev/consistent_hash.h"

namespace berth {

absl::string_view toString(Protocol protocol) { return protocol == Protocol::kTcp ? "tcp" : "udp"; }

namespace {

constexpr absl::string_view kForwardingNames[] = {BERTH_FORWARDING_MODES(BERTH_ENUMERATOR_NAME)};

}  // namespace

absl::string_view toString(Forwarding forwarding) { return nameIn(kForwardingNames, forwarding); }

std::optional<Forwarding> parseForwarding(absl::string_view name) {
  for (size_t mode = 0; mode < std::size(kForwardingNames); ++mode) {
    if (kForwardingNames[mode] == name) return static_cast<Forwarding>(mode);
  }
  return std::nullopt;
}

absl::Span<const absl::string_view> forwardingNames() { return kForwardingNames; }

absl::string_view toString(ExceptionClass exception_class) {
  static constexpr absl::string_view kNames[] = {BERTH_EXCEPTION_CLASSES(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, exception_class);
}

absl::string_view toString(ExceptionKind kind) {
  return kind == ExceptionKind::kTap ? "tap" : "virtio-user";
}

absl::string_view toString(HealthCheckType type) {
  switch (type) {
    case HealthCheckType::kNone:
      return "none";
    case HealthCheckType::kTcp:
      return "tcp";
    case HealthCheckType::kHttp:
      return "http";
  }
  return "unknown";
}

std::string ServiceConfig::listener() const {
  const std::string address = vip.isV4() ? vip.toString() : absl::StrCat("[", vip.toString(), "]");
  return absl::StrCat(toString(protocol), " ", address, ":", port);
}

std::vector<Backend> ServiceConfig::hashingBackends() const {
  std::vector<int64_t> positive;
  for (const BackendConfig& backend : backends) {
    if (backend.weight > 0) positive.push_back(backend.weight);
  }
  int64_t drained_weight = 1;
  if (!positive.empty()) {
    auto median = positive.begin() + static_cast<ptrdiff_t>((positive.size() - 1) / 2);
    std::nth_element(positive.begin(), median, positive.end());
    drained_weight = *median;
  }
  std::vector<Backend> result;
  result.reserve(backends.size());
  for (const BackendConfig& backend : backends) {
    result.push_back({backend.name, backend.weight > 0 ? backend.weight : drained_weight});
  }
  return result;
}

absl::StatusOr<Table> servingTable(const ServiceConfig& service, const Table& base,
                                   const std::vector<bool>& healthy_in_config_order,
                                   const absl::flat_hash_set<std::string>& drained_names) {
  if (!healthy_in_config_order.empty() &&
      healthy_in_config_order.size() != service.backends.size()) {
    return absl::InvalidArgumentError(absl::StrCat(healthy_in_config_order.size(),
                                                   " health flags for ", service.backends.size(),
                                                   " backends"));
  }
  // The table lists its backends sorted by name; the config may list them in any order.
  std::vector<bool> healthy(base.backends().size(), true);
  std::vector<bool> drained(base.backends().size(), false);
  for (size_t b = 0; b < service.backends.size(); ++b) {
    const BackendConfig& backend = service.backends[b];
    absl::StatusOr<uint16_t> index = base.indexOf(backend.name);
    if (!index.ok()) continue;
    if (!healthy_in_config_order.empty()) healthy[*index] = healthy_in_config_order[b];
    drained[*index] = backend.weight == 0 || drained_names.contains(backend.name);
  }
  return withHealth(base, healthy, drained);
}

absl::StatusOr<Table> buildServingTable(const ServiceConfig& service) {
  absl::StatusOr<Table> base = buildTable(service.hashingBackends(), service.tableOptions());
  if (!base.ok()) return base.status();
  return servingTable(service, *base);
}

TableOptions ServiceConfig::tableOptions() const {
  return {.algorithm = algorithm, .table_size = table_size, .ring_replicas = ring_replicas};
}

std::optional<IpAddress> BgpConfig::nextHopFor(IpFamily family,
                                               const DataplaneConfig& dataplane) const {
  for (const PortConfig& candidate : dataplane.ports) {
    if (candidate.name != port) continue;
    return family == IpFamily::kIpv4 ? candidate.ipv4 : candidate.ipv6;
  }
  return std::nullopt;
}

const ServiceConfig* Config::findService(absl::string_view name) const {
  for (const ServiceConfig& service : services) {
    if (service.name == name) return &service;
  }
  return nullptr;
}

std::vector<IpAddress> PortConfig::snatAddressesOf(IpFamily family) const {
  std::vector<IpAddress> addresses;
  for (const IpAddress& address : snat_addresses) {
    if (address.family == family) addresses.push_back(address);
  }
  return addresses;
}

std::vector<std::string> sectionsNeedingRestart(const Config& running, const Config& next) {
  std::vector<std::string> sections;
  if (running.dataplane.eal != next.dataplane.eal) sections.push_back("dataplane.eal");
  if (running.dataplane.ports != next.dataplane.ports) sections.push_back("dataplane.ports");
  if (running.dataplane.strict_numa != next.dataplane.strict_numa) {
    sections.push_back("dataplane.strict_numa");
  }
  if (running.dataplane.idle != next.dataplane.idle) sections.push_back("dataplane.idle");
  if (running.dataplane.conntrack != next.dataplane.conntrack) {
    sections.push_back("dataplane.conntrack");
  }
  if (running.metrics != next.metrics) sections.push_back("metrics");
  if (running.fleet != next.fleet) sections.push_back("fleet");
  if (running.sync != next.sync) sections.push_back("sync");
  return sections;
}

}  // namespace berth
