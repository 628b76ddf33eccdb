#include "berth/dataplane/snapshot.h"

#include <arpa/inet.h>

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
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

// Whether `mode`'s backends are reached at their own MACs on `port`'s segment: l2dsr's always,
// fullnat's where the port has no gateway (docs/fullnat.md); the others' through the gateway.
bool resolvesBackendsOnLink(Forwarding mode, const PortConfig& port) {
  if (mode == Forwarding::kL2Dsr) return true;
  return mode == Forwarding::kFullNat && !port.gateway && !port.gateway_mac;
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
    absl::StatusOr<Table> table = buildServingTable(service);
    if (!table.ok()) {
      return absl::Status(table.status().code(),
                          absl::StrCat("service '", service.name, "': ", table.status().message()));
    }
    tables.push_back(*std::move(table));
  }
  return tables;
}

namespace {

// The next hops of `services` (anything with size() and operator[] giving a ServiceConfig).
template <typename ServiceAt>
std::vector<NextHopToResolve> nextHopsOf(const DataplaneConfig& dataplane, size_t service_count,
                                         ServiceAt service_at) {
  std::vector<NextHopToResolve> hops;
  absl::flat_hash_set<std::pair<uint16_t, IpAddress>> seen;
  auto add = [&](uint16_t port, const IpAddress& address) {
    const std::optional<IpAddress>& source = portAddress(dataplane.ports[port], address.family);
    if (source && seen.insert({port, address}).second) hops.push_back({port, address, *source});
  };
  // Backends are only reached through ports that some traffic leaves by: with two-arm, the
  // uplink's segment has none of them (docs/two-arm.md).
  absl::flat_hash_set<absl::string_view> egress_ports;
  for (const PortConfig& port : dataplane.ports) {
    egress_ports.insert(port.egress.empty() ? port.name : port.egress);
  }
  for (size_t s = 0; s < service_count; ++s) {
    if (!service_at(s).egress.empty()) egress_ports.insert(service_at(s).egress);
  }
  for (uint16_t p = 0; p < dataplane.ports.size(); ++p) {
    const PortConfig& port = dataplane.ports[p];
    if (port.gateway && !port.gateway_mac) add(p, *port.gateway);
    if (!egress_ports.contains(port.name)) continue;
    for (size_t s = 0; s < service_count; ++s) {
      const ServiceConfig& service = service_at(s);
      if (!resolvesBackendsOnLink(service.forwarding, port)) continue;
      for (const BackendConfig& backend : service.backends) {
        if (!backend.mac) add(p, backend.address);
      }
    }
  }
  return hops;
}

}  // namespace

// Fills one Snapshot in four steps: ports, services (lookup, backends, counter ids), forwarding
// targets, and the addresses each port answers for. Each step reads what the earlier ones
// filled.
class SnapshotBuilder {
 public:
  SnapshotBuilder(const DataplaneConfig& dataplane, absl::Span<const ServiceInput> services,
                  absl::Span<const MacAddress> port_macs,
                  absl::Span<const uint8_t> port_checksum_offloads,
                  absl::Span<const std::shared_ptr<const ReplySteering>> port_steering,
                  const NeighborTable& neighbors, uint64_t generation)
      : dataplane_(dataplane),
        services_(services),
        port_macs_(port_macs),
        port_checksum_offloads_(port_checksum_offloads),
        port_steering_(port_steering),
        neighbors_(neighbors),
        snapshot_(std::make_unique<Snapshot>()) {
    snapshot_->generation_ = generation;
    snapshot_->icmp_ = dataplane.icmp;
  }

  absl::StatusOr<std::unique_ptr<const Snapshot>> build(CounterIds& counter_ids) {
    if (port_macs_.size() != dataplane_.ports.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(port_macs_.size(), " port MACs for ", dataplane_.ports.size(), " ports"));
    }
    BERTH_RETURN_IF_ERROR(checkEgressNames());
    addPorts();
    BERTH_RETURN_IF_ERROR(addLocalAddresses());
    BERTH_RETURN_IF_ERROR(addServices(counter_ids));
    addTargets();
    addAnsweredVips();
    return std::unique_ptr<const Snapshot>(std::move(snapshot_));
  }

 private:
  // The index of the port named `name`; the loader made sure there is one.
  uint32_t portIndexOf(absl::string_view name) const {
    for (size_t p = 0; p < dataplane_.ports.size(); ++p) {
      if (dataplane_.ports[p].name == name) return static_cast<uint32_t>(p);
    }
    return kNoPort;
  }

  absl::Status checkEgressNames() const {
    for (const PortConfig& port : dataplane_.ports) {
      if (!port.egress.empty() && portIndexOf(port.egress) == kNoPort) {
        return absl::InvalidArgumentError(
            absl::StrCat("port '", port.name, "': no egress port named '", port.egress, "'"));
      }
    }
    for (const ServiceInput& service : services_) {
      const std::string& egress = service.config.egress;
      if (!egress.empty() && portIndexOf(egress) == kNoPort) {
        return absl::InvalidArgumentError(absl::StrCat("service '", service.config.name,
                                                       "': no egress port named '", egress, "'"));
      }
    }
    return absl::OkStatus();
  }

  // Each port's MAC, addresses and MTU, the addresses it answers for itself, and the next hops
  // it resolves with what is known of them.
  void addPorts() {
    // The addresses the services' health checks probe: TCP from them is the exception path's
    // health class on a port with a kernel interface.
    absl::flat_hash_set<IpAddress> health_targets;
    for (const ServiceInput& service : services_) {
      for (const BackendConfig& backend : service.config.backends) {
        if (backend.health.type != HealthCheckType::kNone && backend.health.address) {
          health_targets.insert(*backend.health.address);
        }
      }
    }
    for (size_t p = 0; p < dataplane_.ports.size(); ++p) {
      const PortConfig& port = dataplane_.ports[p];
      SnapshotPort view;
      view.mac = port_macs_[p];
      view.ipv4 = port.ipv4;
      view.ipv6 = port.ipv6;
      view.mtu = port.mtu;
      view.vlan = port.vlan;
      view.egress = port.egress.empty() ? static_cast<uint32_t>(p) : portIndexOf(port.egress);
      view.device = static_cast<uint32_t>(p);
      for (size_t first = 0; first < p; ++first) {
        if (dataplane_.ports[first].device == port.device) {
          view.device = static_cast<uint32_t>(first);
          break;
        }
      }
      view.learn_announcements = port.learn_announcements;
      view.to_kernel = port.exception.has_value();
      if (view.to_kernel) {
        view.bgp_peers = dataplane_.bgp_peers;
        view.sync_peers = dataplane_.sync_peers;
        view.sync_port = htons(dataplane_.sync_port);
        view.health_targets = health_targets;
      }
      if (port.ipv4) view.answered.push_back(*port.ipv4);
      if (port.ipv6) view.answered.push_back(*port.ipv6);
      snapshot_->ports_.push_back(std::move(view));
    }
    // Each device's VLAN map, on its first port, once one of its ports is tagged.
    for (size_t p = 0; p < snapshot_->ports_.size(); ++p) {
      const SnapshotPort& port = snapshot_->ports_[p];
      if (port.vlan == 0) continue;
      std::vector<uint16_t>& by_vlan = snapshot_->ports_[port.device].port_by_vlan;
      if (by_vlan.empty()) by_vlan.assign(kVlanIdCount, kNoPort);
      by_vlan[port.vlan] = static_cast<uint16_t>(p);
    }
    for (size_t p = 0; p < snapshot_->ports_.size(); ++p) {
      const SnapshotPort& port = snapshot_->ports_[p];
      std::vector<uint16_t>& by_vlan = snapshot_->ports_[port.device].port_by_vlan;
      if (port.vlan == 0 && !by_vlan.empty()) by_vlan[0] = static_cast<uint16_t>(p);
    }
    const auto service_at = [&](size_t s) -> const ServiceConfig& { return services_[s].config; };
    for (const NextHopToResolve& hop : nextHopsOf(dataplane_, services_.size(), service_at)) {
      snapshot_->ports_[hop.port].resolving.emplace(hop.address,
                                                    neighbors_.resolving(hop.port, hop.address));
    }
  }

  // Each port's Full-NAT local addresses, numbered in config order (ports do not change on
  // reload, so neither do the ids sessions keep), answered for by ARP and ND on the port, with
  // the steering of their replies; and each port's next hop to the clients.
  absl::Status addLocalAddresses() {
    for (size_t p = 0; p < dataplane_.ports.size(); ++p) {
      const PortConfig& port = dataplane_.ports[p];
      SnapshotPort& view = snapshot_->ports_[p];
      std::optional<MacAddress> gateway_mac = port.gateway_mac;
      if (!gateway_mac && port.gateway) {
        gateway_mac = neighbors_.find(static_cast<uint16_t>(p), *port.gateway);
      }
      view.client_hop.source_mac = port_macs_[p];
      view.client_hop.mtu = port.mtu;
      view.client_hop.vlan = port.vlan;
      if (gateway_mac) {
        view.client_hop.destination_mac = *gateway_mac;
        view.client_hop_ready = true;
      }
      if (p < port_steering_.size()) view.reply_steering = port_steering_[p];
      view.nat_first_port = port.snat_first_port;
      view.nat_last_port = port.snat_last_port;
      for (const IpAddress& address : port.snat_addresses) {
        const auto id = static_cast<uint16_t>(snapshot_->nat_local_addresses_.size());
        snapshot_->nat_local_addresses_.push_back(address);
        (address.isV4() ? view.nat_ipv4 : view.nat_ipv6).push_back({id, address});
        view.answered.push_back(address);
      }
    }
    // Built here only where the caller gave none (tests, benchmarks): ports without RSS.
    if (port_steering_.empty()) {
      BERTH_ASSIGN_OR_RETURN(const std::vector<std::shared_ptr<const ReplySteering>> unspread,
                             portReplySteering(dataplane_, {}));
      for (size_t p = 0; p < unspread.size(); ++p)
        snapshot_->ports_[p].reply_steering = unspread[p];
    }
    return absl::OkStatus();
  }

  // The (VIP, port, protocol) lookup, the fragment lookup, and each service's backends.
  absl::Status addServices(CounterIds& counter_ids) {
    // Fragment lookup: (VIP, protocol) to the one service there that hashes without ports. A
    // 5-tuple service beside it on the same VIP drops its own later fragments anyway, so handing
    // those to the portless service's backend costs a stray fragment there, never a flow.
    absl::flat_hash_map<ServiceKey, int> portless_services;
    for (size_t s = 0; s < services_.size(); ++s) {
      const ServiceConfig& config = services_[s].config;
      ServiceKey key;
      key.family = config.vip.family;
      key.address = config.vip.bytes;
      key.protocol = static_cast<uint8_t>(config.protocol);
      if (config.hash_fields != HashFields::kFiveTuple) {
        auto [it, inserted] = portless_services.try_emplace(key, static_cast<int>(s));
        if (!inserted) it->second = -1;  // ambiguous: fragments of this VIP go nowhere
      }
      key.port = static_cast<uint16_t>((config.port >> 8) | (config.port << 8));
      if (!snapshot_->services_.insert(key, static_cast<uint32_t>(s))) {
        return absl::InvalidArgumentError(
            absl::StrCat("service '", config.name, "' repeats another's VIP, port and protocol"));
      }
      BERTH_RETURN_IF_ERROR(addService(services_[s], counter_ids));
    }
    for (const auto& [key, service] : portless_services) {
      if (service >= 0) snapshot_->fragment_services_.insert(key, static_cast<uint32_t>(service));
    }
    return absl::OkStatus();
  }

  absl::Status addService(const ServiceInput& input, CounterIds& counter_ids) {
    const ServiceConfig& config = input.config;
    const Table& table = input.table;
    if (table.backends().size() != config.backends.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("service '", config.name, "': the table has ", table.backends().size(),
                       " backends, the config ", config.backends.size()));
    }
    BERTH_ASSIGN_OR_RETURN(const uint32_t service_counter, counter_ids.service(config.name));
    snapshot_->services_list_.push_back(SnapshotService{
        config.name, config.hash_fields, kDefaultFlowHashSeed, config.forwarding,
        forwardFunctionFor(config.forwarding), table,
        static_cast<uint32_t>(snapshot_->backends_.size()), service_counter,
        config.drain_keeps_established, config.bounded_load,
        config.egress.empty() ? kNoPort : portIndexOf(config.egress), config.vip,
        static_cast<uint16_t>((config.port >> 8) | (config.port << 8)), config.proxy_protocol});
    std::vector<uint32_t>& services_by_counter = snapshot_->service_by_counter_id_;
    if (services_by_counter.size() <= service_counter) {
      services_by_counter.resize(service_counter + 1, Snapshot::kNoServiceIndex);
    }
    services_by_counter[service_counter] =
        static_cast<uint32_t>(snapshot_->services_list_.size() - 1);
    double serving_weight = 0;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      if (table.serves(b)) serving_weight += static_cast<double>(table.backends()[b].weight);
    }
    // The table indexes its backends sorted by name; the config may list them in any order.
    absl::flat_hash_map<absl::string_view, const BackendConfig*> by_name;
    for (const BackendConfig& backend : config.backends) by_name[backend.name] = &backend;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      const Backend& backend = table.backends()[b];
      auto it = by_name.find(backend.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(absl::StrCat("service '", config.name,
                                                       "': the table's backend '", backend.name,
                                                       "' is not in the config"));
      }
      BERTH_ASSIGN_OR_RETURN(const uint32_t backend_counter,
                             counter_ids.backend(config.name, backend.name));
      const bool serving = table.serves(b);
      const double load_share =
          serving ? config.bounded_load * static_cast<double>(backend.weight) / serving_weight
                  : 0.0;
      snapshot_->backends_.push_back(
          SnapshotBackend{backend.name, it->second->address, backend_counter, table.healthy()[b],
                          table.drained()[b] || backend.weight == 0, load_share});
      backend_configs_.push_back(it->second);
      std::vector<uint32_t>& by_counter = snapshot_->backend_by_counter_id_;
      if (by_counter.size() <= backend_counter)
        by_counter.resize(backend_counter + 1, kNoBackendIndex);
      by_counter[backend_counter] = static_cast<uint32_t>(snapshot_->backends_.size() - 1);
    }
    return absl::OkStatus();
  }

  // One target per (port, backend): what the rewrite needs, resolved once here so that a worker
  // reads one struct per packet.
  void addTargets() {
    const size_t backend_count = snapshot_->backends_.size();
    snapshot_->targets_.resize(dataplane_.ports.size() * backend_count);
    snapshot_->target_ready_.assign(snapshot_->targets_.size(), 0);
    for (size_t p = 0; p < dataplane_.ports.size(); ++p) {
      const PortConfig& port = dataplane_.ports[p];
      std::optional<MacAddress> gateway_mac = port.gateway_mac;
      if (!gateway_mac && port.gateway) {
        gateway_mac = neighbors_.find(static_cast<uint16_t>(p), *port.gateway);
      }
      for (size_t s = 0; s < services_.size(); ++s) {
        const ServiceConfig& config = services_[s].config;
        const SnapshotService& service = snapshot_->services_list_[s];
        for (size_t b = 0; b < service.table.backends().size(); ++b) {
          const size_t index = service.first_backend + b;
          const SnapshotBackend& backend = snapshot_->backends_[index];
          ForwardingTarget& target = snapshot_->targets_[p * backend_count + index];
          target.backend = backend.address;
          target.source_mac = port_macs_[p];
          target.gue_port = config.gue_port;
          target.mtu = port.mtu;
          target.vlan = port.vlan;
          if (p < port_checksum_offloads_.size()) {
            target.checksum_offload = port_checksum_offloads_[p];
          }
          const std::optional<IpAddress>& source = portAddress(port, backend.address.family);
          if (source) target.outer_source = *source;
          std::optional<MacAddress> next_hop;
          if (resolvesBackendsOnLink(config.forwarding, port)) {
            // The backend must sit on this port's L2; its MAC is configured or learned here.
            const std::optional<MacAddress>& fixed = backend_configs_[index]->mac;
            next_hop = fixed ? fixed : neighbors_.find(static_cast<uint16_t>(p), backend.address);
          } else {
            next_hop = source ? gateway_mac : std::nullopt;
          }
          if (next_hop) {
            target.destination_mac = *next_hop;
            snapshot_->target_ready_[p * backend_count + index] = 1;
          }
          prepareOuterHeaders(target);
        }
      }
    }
  }

  // `announce: arp` VIPs, answered on each port with an address of the VIP's family.
  void addAnsweredVips() {
    for (const ServiceInput& input : services_) {
      const ServiceConfig& service = input.config;
      if (!service.announce_arp) continue;
      for (size_t p = 0; p < snapshot_->ports_.size(); ++p) {
        if (!portAddress(dataplane_.ports[p], service.vip.family)) continue;
        std::vector<IpAddress>& answered = snapshot_->ports_[p].answered;
        if (std::find(answered.begin(), answered.end(), service.vip) == answered.end()) {
          answered.push_back(service.vip);
        }
      }
    }
  }

  const DataplaneConfig& dataplane_;
  absl::Span<const ServiceInput> services_;
  absl::Span<const MacAddress> port_macs_;
  absl::Span<const uint8_t> port_checksum_offloads_;
  absl::Span<const std::shared_ptr<const ReplySteering>> port_steering_;
  const NeighborTable& neighbors_;
  std::unique_ptr<Snapshot> snapshot_;
  std::vector<const BackendConfig*> backend_configs_;  // parallel to snapshot_->backends_
};

absl::StatusOr<std::unique_ptr<const Snapshot>> buildSnapshot(
    const DataplaneConfig& dataplane, absl::Span<const ServiceInput> services,
    absl::Span<const MacAddress> port_macs, const NeighborTable& neighbors, CounterIds& counter_ids,
    uint64_t generation, absl::Span<const uint8_t> port_checksum_offloads,
    absl::Span<const std::shared_ptr<const ReplySteering>> port_steering) {
  return SnapshotBuilder(dataplane, services, port_macs, port_checksum_offloads, port_steering,
                         neighbors, generation)
      .build(counter_ids);
}

absl::StatusOr<std::vector<std::shared_ptr<const ReplySteering>>> portReplySteering(
    const DataplaneConfig& dataplane, absl::Span<const RssSpread> spreads) {
  std::vector<std::shared_ptr<const ReplySteering>> steering(dataplane.ports.size());
  const bool full_nat = absl::c_any_of(
      dataplane.ports, [](const PortConfig& port) { return !port.snat_addresses.empty(); });
  for (size_t p = 0; p < dataplane.ports.size() && full_nat; ++p) {
    const PortConfig& port = dataplane.ports[p];
    const RssSpread spread = p < spreads.size() ? spreads[p] : RssSpread{};
    // A port without local addresses but with RSS: its clients' ICMP errors find their
    // session's worker by it.
    if (port.snat_addresses.empty() && spread.key.empty()) continue;
    absl::StatusOr<ReplySteering> built =
        port.snat_addresses.empty()
            ? ReplySteering::withoutLocalPorts(spread)
            : ReplySteering::build(spread, port.snat_first_port, port.snat_last_port);
    if (!built.ok()) {
      return absl::Status(built.status().code(),
                          absl::StrCat("port '", port.name, "': ", built.status().message()));
    }
    steering[p] = std::make_shared<const ReplySteering>(*std::move(built));
  }
  return steering;
}

absl::StatusOr<std::unique_ptr<const Snapshot>> buildSnapshot(
    const Config& config, absl::Span<const Table> tables, absl::Span<const MacAddress> port_macs,
    const NeighborTable& neighbors, CounterIds& counter_ids, uint64_t generation) {
  if (tables.size() != config.services.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tables.size(), " tables for ", config.services.size(), " services"));
  }
  std::vector<ServiceInput> services;
  services.reserve(tables.size());
  for (size_t s = 0; s < tables.size(); ++s) services.push_back({config.services[s], tables[s]});
  return buildSnapshot(config.dataplane, services, port_macs, neighbors, counter_ids, generation);
}

std::vector<NextHopToResolve> nextHopsToResolve(const DataplaneConfig& dataplane,
                                                absl::Span<const ServiceConfig> services) {
  return nextHopsOf(dataplane, services.size(),
                    [&](size_t s) -> const ServiceConfig& { return services[s]; });
}

std::vector<NextHopToResolve> nextHopsToResolve(const DataplaneConfig& dataplane,
                                                absl::Span<const ServiceInput> services) {
  return nextHopsOf(dataplane, services.size(),
                    [&](size_t s) -> const ServiceConfig& { return services[s].config; });
}

}  // namespace berth
