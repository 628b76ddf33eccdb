#include "berth/dataplane/snapshot.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

absl::StatusOr<uint32_t> idFor(absl::flat_hash_map<std::string, uint32_t>& ids,
                               std::vector<std::string>& names, std::string key, uint32_t limit,
                               absl::string_view what) {
  if (auto it = ids.find(key); it != ids.end()) return it->second;
  if (names.size() >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", limit, " ", what, " since berthd started; restart to renumber"));
  }
  const auto id = static_cast<uint32_t>(names.size());
  ids.emplace(key, id);
  names.push_back(std::move(key));
  return id;
}

const std::optional<IpAddress>& portAddress(const PortConfig& port, IpFamily family) {
  return family == IpFamily::kIpv4 ? port.ipv4 : port.ipv6;
}

}  // namespace

absl::StatusOr<uint32_t> CounterIds::service(absl::string_view service) {
  return idFor(services_, service_names_, std::string(service), kMaxServices, "services");
}

absl::StatusOr<uint32_t> CounterIds::backend(absl::string_view service, absl::string_view backend) {
  return idFor(backends_, backend_names_, absl::StrCat(service, "/", backend), kMaxBackends,
               "backends");
}

std::optional<uint32_t> CounterIds::findService(absl::string_view service) const {
  auto it = services_.find(service);
  if (it == services_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> CounterIds::findBackend(absl::string_view service,
                                                absl::string_view backend) const {
  auto it = backends_.find(absl::StrCat(service, "/", backend));
  if (it == backends_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Snapshot::findFragmentService(const FlowKey& flow) const {
  FlowKey without_ports = flow;
  without_ports.source_port = 0;
  without_ports.destination_port = 0;
  return fragment_services_.find(without_ports);
}

absl::StatusOr<std::vector<Table>> buildServiceTables(const Config& config) {
  std::vector<Table> tables;
  tables.reserve(config.services.size());
  for (const ServiceConfig& service : config.services) {
    absl::StatusOr<Table> table = buildTable(service.hashingBackends(), service.tableOptions());
    if (!table.ok()) {
      return absl::Status(table.status().code(),
                          absl::StrCat("service '", service.name, "': ", table.status().message()));
    }
    tables.push_back(*std::move(table));
  }
  return tables;
}

absl::StatusOr<std::unique_ptr<const Snapshot>> buildSnapshot(
    const Config& config, absl::Span<const Table> tables, absl::Span<const MacAddress> port_macs,
    const NeighborTable& neighbors, CounterIds& counter_ids, uint64_t generation) {
  if (tables.size() != config.services.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tables.size(), " tables for ", config.services.size(), " services"));
  }
  if (port_macs.size() != config.dataplane.ports.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(port_macs.size(), " port MACs for ", config.dataplane.ports.size(), " ports"));
  }
  auto snapshot = std::make_unique<Snapshot>();
  snapshot->generation_ = generation;

  for (size_t p = 0; p < config.dataplane.ports.size(); ++p) {
    const PortConfig& port = config.dataplane.ports[p];
    SnapshotPort view;
    view.mac = port_macs[p];
    view.ipv4 = port.ipv4;
    view.ipv6 = port.ipv6;
    view.mtu = port.mtu;
    if (port.ipv4) view.answered.push_back(*port.ipv4);
    if (port.ipv6) view.answered.push_back(*port.ipv6);
    snapshot->ports_.push_back(std::move(view));
  }
  for (const NextHopToResolve& hop : nextHopsToResolve(config)) {
    snapshot->ports_[hop.port].resolving.emplace(hop.address, neighbors.find(hop.address));
  }

  // Fragment lookup: (VIP, protocol) to the one service there that hashes without ports. A
  // 5-tuple service beside it on the same VIP drops its own later fragments anyway, so handing
  // those to the portless service's backend costs a stray fragment there, never a flow.
  absl::flat_hash_map<ServiceKey, int> portless_services;
  for (size_t s = 0; s < config.services.size(); ++s) {
    const ServiceConfig& config_service = config.services[s];
    const Table& table = tables[s];
    if (table.backends().size() != config_service.backends.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "service '", config_service.name, "': the table has ", table.backends().size(),
          " backends, the config ", config_service.backends.size()));
    }
    ServiceKey key;
    key.family = config_service.vip.family;
    key.address = config_service.vip.bytes;
    key.protocol = static_cast<uint8_t>(config_service.protocol);
    if (config_service.hash_fields != HashFields::kFiveTuple) {
      ServiceKey fragment_key = key;
      auto [it, inserted] = portless_services.try_emplace(fragment_key, static_cast<int>(s));
      if (!inserted) it->second = -1;  // ambiguous: fragments of this VIP go nowhere
    }
    key.port = static_cast<uint16_t>((config_service.port >> 8) | (config_service.port << 8));
    if (!snapshot->services_.insert(key, static_cast<uint32_t>(s))) {
      return absl::InvalidArgumentError(absl::StrCat("service '", config_service.name,
                                                     "' repeats another's VIP, port and protocol"));
    }

    BERTH_ASSIGN_OR_RETURN(const uint32_t service_counter,
                           counter_ids.service(config_service.name));
    snapshot->services_list_.push_back(
        SnapshotService{config_service.name, config_service.hash_fields, kDefaultFlowHashSeed,
                        config_service.forwarding, forwardFunctionFor(config_service.forwarding),
                        table, static_cast<uint32_t>(snapshot->backends_.size()), service_counter,
                        config_service.drain_keeps_established, config_service.bounded_load});
    double serving_weight = 0;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      if (table.healthy()[b]) serving_weight += static_cast<double>(table.backends()[b].weight);
    }
    // The table indexes its backends sorted by name; the config may list them in any order.
    absl::flat_hash_map<absl::string_view, const BackendConfig*> by_name;
    for (const BackendConfig& backend : config_service.backends) by_name[backend.name] = &backend;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      const Backend& backend = table.backends()[b];
      auto it = by_name.find(backend.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(absl::StrCat("service '", config_service.name,
                                                       "': the table's backend '", backend.name,
                                                       "' is not in the config"));
      }
      BERTH_ASSIGN_OR_RETURN(const uint32_t backend_counter,
                             counter_ids.backend(config_service.name, backend.name));
      const bool serving = table.healthy()[b] && backend.weight > 0;
      const double load_share = serving ? config_service.bounded_load *
                                              static_cast<double>(backend.weight) / serving_weight
                                        : 0.0;
      snapshot->backends_.push_back(SnapshotBackend{backend.name, it->second->address,
                                                    backend_counter, table.healthy()[b],
                                                    backend.weight == 0, load_share});
      if (snapshot->backend_by_counter_id_.size() <= backend_counter) {
        snapshot->backend_by_counter_id_.resize(backend_counter + 1, kNoBackendIndex);
      }
      snapshot->backend_by_counter_id_[backend_counter] =
          static_cast<uint32_t>(snapshot->backends_.size() - 1);
    }
  }
  for (const auto& [key, service] : portless_services) {
    if (service >= 0) snapshot->fragment_services_.insert(key, static_cast<uint32_t>(service));
  }

  // One target per (port, backend): what the rewrite needs, resolved once here so that a worker
  // reads one struct per packet.
  const size_t backend_count = snapshot->backends_.size();
  snapshot->targets_.resize(config.dataplane.ports.size() * backend_count);
  snapshot->target_ready_.assign(snapshot->targets_.size(), 0);
  for (size_t p = 0; p < config.dataplane.ports.size(); ++p) {
    const PortConfig& port = config.dataplane.ports[p];
    std::optional<MacAddress> gateway_mac = port.gateway_mac;
    if (!gateway_mac && port.gateway) gateway_mac = neighbors.find(*port.gateway);
    for (size_t s = 0; s < config.services.size(); ++s) {
      const ServiceConfig& config_service = config.services[s];
      const SnapshotService& service = snapshot->services_list_[s];
      for (size_t b = 0; b < service.table.backends().size(); ++b) {
        const size_t index = service.first_backend + b;
        const SnapshotBackend& backend = snapshot->backends_[index];
        ForwardingTarget& target = snapshot->targets_[p * backend_count + index];
        target.backend = backend.address;
        target.source_mac = port_macs[p];
        target.gue_port = config_service.gue_port;
        target.mtu = port.mtu;
        const std::optional<IpAddress>& source = portAddress(port, backend.address.family);
        if (source) target.outer_source = *source;
        std::optional<MacAddress> next_hop;
        if (config_service.forwarding == Forwarding::kL2Dsr) {
          // The backend must sit on this port's L2; its MAC is configured or learned here.
          const BackendConfig* backend_config = nullptr;
          for (const BackendConfig& candidate : config_service.backends) {
            if (candidate.name == backend.name) backend_config = &candidate;
          }
          next_hop = backend_config->mac ? backend_config->mac : neighbors.find(backend.address);
        } else {
          next_hop = source ? gateway_mac : std::nullopt;
        }
        if (next_hop) {
          target.destination_mac = *next_hop;
          snapshot->target_ready_[p * backend_count + index] = 1;
        }
      }
    }
  }

  for (const ServiceConfig& service : config.services) {
    if (!service.announce_arp) continue;
    for (size_t p = 0; p < snapshot->ports_.size(); ++p) {
      if (portAddress(config.dataplane.ports[p], service.vip.family)) {
        std::vector<IpAddress>& answered = snapshot->ports_[p].answered;
        if (std::find(answered.begin(), answered.end(), service.vip) == answered.end()) {
          answered.push_back(service.vip);
        }
      }
    }
  }
  return std::unique_ptr<const Snapshot>(std::move(snapshot));
}

std::vector<NextHopToResolve> nextHopsToResolve(const Config& config) {
  std::vector<NextHopToResolve> hops;
  absl::flat_hash_set<std::pair<uint16_t, IpAddress>> seen;
  auto add = [&](uint16_t port, const IpAddress& address) {
    const std::optional<IpAddress>& source =
        portAddress(config.dataplane.ports[port], address.family);
    if (source && seen.insert({port, address}).second) hops.push_back({port, address, *source});
  };
  for (uint16_t p = 0; p < config.dataplane.ports.size(); ++p) {
    const PortConfig& port = config.dataplane.ports[p];
    if (port.gateway && !port.gateway_mac) add(p, *port.gateway);
    for (const ServiceConfig& service : config.services) {
      if (service.forwarding != Forwarding::kL2Dsr) continue;
      for (const BackendConfig& backend : service.backends) {
        if (!backend.mac) add(p, backend.address);
      }
    }
  }
  return hops;
}

}  // namespace berth
