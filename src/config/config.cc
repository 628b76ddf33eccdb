#include "berth/config/config.h"

#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view toString(Protocol protocol) { return protocol == Protocol::kTcp ? "tcp" : "udp"; }

absl::string_view toString(Forwarding forwarding) {
  switch (forwarding) {
    case Forwarding::kIpip:
      return "ipip";
    case Forwarding::kGue:
      return "gue";
    case Forwarding::kGre:
      return "gre";
    case Forwarding::kL2Dsr:
      return "l2dsr";
  }
  return "unknown";
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
  std::vector<Backend> result;
  result.reserve(backends.size());
  for (const BackendConfig& backend : backends) result.push_back({backend.name, backend.weight});
  return result;
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

std::vector<std::string> sectionsNeedingRestart(const Config& running, const Config& next) {
  std::vector<std::string> sections;
  if (running.dataplane.eal != next.dataplane.eal) sections.push_back("dataplane.eal");
  if (running.dataplane.ports != next.dataplane.ports) sections.push_back("dataplane.ports");
  if (running.dataplane.conntrack != next.dataplane.conntrack) {
    sections.push_back("dataplane.conntrack");
  }
  if (running.metrics != next.metrics) sections.push_back("metrics");
  return sections;
}

}  // namespace berth
