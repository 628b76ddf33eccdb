#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/forwarding.h"
#include "berth/dataplane/nat_sessions.h"
#include "berth/dataplane/neighbor_discovery.h"
#include "berth/dataplane/reply_steering.h"
#include "berth/dataplane/service_map.h"
#include "berth/maglev/table.h"

namespace berth {

// The immutable state every worker reads (docs/architecture.md, snapshot and RCU): the service
// lookup, one Maglev table per service, the backends with a ready-made ForwardingTarget per port,
// and what each port answers for. The management thread builds one, publishes it with an atomic
// pointer store, and frees the previous one after the RCU grace period. Nothing in it changes after
// it is built, so workers read it without a lock.

// Stable numbers for per-service and per-backend counters, which outlive any one snapshot: the
// same service, or the same backend of a service, keeps its number across rebuilds, so a worker's
// counters stay with it. Owned by the management thread.
class CounterIds {
 public:
  // Room the workers' counter arrays are sized for (counters.h).
  static constexpr uint32_t kMaxServices = kCounterServiceSlots;
  static constexpr uint32_t kMaxBackends = kCounterBackendSlots;

  // The id of this service, or of this backend of this service; new names get the next free one.
  // ResourceExhausted past the capacity.
  absl::StatusOr<uint32_t> service(absl::string_view service);
  absl::StatusOr<uint32_t> backend(absl::string_view service, absl::string_view backend);

  // The id already given to this service or backend, without giving one.
  std::optional<uint32_t> findService(absl::string_view service) const;
  std::optional<uint32_t> findBackend(absl::string_view service, absl::string_view backend) const;

  // Names by id, for reports: "web", and "web/web-1" for backends.
  const std::vector<std::string>& serviceNames() const { return service_names_; }
  const std::vector<std::string>& backendNames() const { return backend_names_; }

 private:
  absl::flat_hash_map<std::string, uint32_t> services_;
  absl::flat_hash_map<std::string, uint32_t> backends_;
  std::vector<std::string> service_names_;
  std::vector<std::string> backend_names_;
};

// A port as the datapath sees it.
inline constexpr uint16_t kNoPort = UINT16_MAX;
inline constexpr size_t kVlanIdCount = 4096;  // 12-bit 802.1Q VLAN IDs

struct SnapshotPort {
  MacAddress mac;
  // The port's 802.1Q VLAN; 0: untagged (config.h, PortConfig::vlan).
  uint16_t vlan = 0;
  // The first port on the same device: the one whose queues the workers poll, and the index the
  // pipeline is called with for the device's frames.
  uint32_t device = 0;
  // On a device's first port, when one of the device's ports is tagged: the port for each VLAN
  // ID (untagged and priority-tagged frames at 0), kNoPort where none is. Empty: the device has
  // only this, untagged, port.
  std::vector<uint16_t> port_by_vlan;
  // The port VIP traffic received here leaves through (two-arm, docs/two-arm.md); this port's
  // own index unless the config names another.
  uint32_t egress = 0;
  std::optional<IpAddress> ipv4;
  std::optional<IpAddress> ipv6;
  uint16_t mtu = 1500;
  // The addresses berth answers ARP and ND for here: the port's own and `announce: arp` VIPs.
  std::vector<IpAddress> answered;
  // The next hops whose MACs the port resolves (gateway, l2dsr backends without a fixed MAC),
  // each with the MAC this snapshot uses, if known, and the slot where workers record the replies
  // to berth's requests and the claims they refuse (docs/neighbors.md).
  absl::flat_hash_map<IpAddress, ResolvingNextHop> resolving;
  // Whether a gratuitous ARP or unsolicited advertisement may change a next hop's MAC here.
  bool learn_announcements = false;
  // Whether the port has a kernel interface (docs/exception-path.md): frames that are not
  // berth's go there, each in its ExceptionClass, instead of being dropped.
  bool to_kernel = false;
  // The BGP neighbours, whose TCP port 179 traffic is the bgp class.
  std::vector<IpAddress> bgp_peers;
  // The sync peers, whose UDP to sync_port (network byte order; 0: none) is the sync class.
  std::vector<IpAddress> sync_peers;
  uint16_t sync_port = 0;
  // The addresses the health checks probe, whose TCP is the health class.
  absl::flat_hash_set<IpAddress> health_targets;
  // Full-NAT (docs/fullnat.md). As an egress: the port's local addresses of each IP version,
  // with their stable ids, and how its NIC spreads their replies over its queues (null: the
  // port has neither local addresses nor RSS). As a receiving port: the next hop replies to its
  // clients leave through (the port's gateway), ready once its MAC is known, and with RSS, how
  // its NIC spreads its clients' packets (ReplySteering::queueOfFlow).
  std::vector<NatLocalAddress> nat_ipv4;
  std::vector<NatLocalAddress> nat_ipv6;
  // The local addresses' pool of ports, host order. With a kernel interface, TCP and UDP to a
  // local address on a port outside it are the kernel's: the health probes' answers.
  uint16_t nat_first_port = 0;
  uint16_t nat_last_port = 0;
  std::shared_ptr<const ReplySteering> reply_steering;
  ForwardingTarget client_hop;
  bool client_hop_ready = false;

  const std::vector<NatLocalAddress>& natAddresses(IpFamily family) const {
    return family == IpFamily::kIpv4 ? nat_ipv4 : nat_ipv6;
  }
  // The local address `destination` is, of `family`: its stable id, or -1. A linear search:
  // a port has a few local addresses, and only packets to none of the VIPs ask.
  int32_t natAddressId(IpFamily family, const std::array<uint8_t, 16>& destination) const {
    for (const NatLocalAddress& local : natAddresses(family)) {
      if (local.address.bytes == destination) return local.id;
    }
    return -1;
  }
};

// A backend in one service, with where to send its packets from each port.
struct SnapshotBackend {
  std::string name;
  IpAddress address;
  uint32_t counter_id = 0;  // also the stable id connections remember it by
  bool healthy = true;      // false: no packet goes here, tracked connections move
  bool drained = false;     // weight 0: no new flows; tracked ones per the service's drain policy
  // Bounded load: C * weight / (the serving backends' total weight) while serving, else 0, so a
  // new flow may come here while its active flows < load_share * (serving total + 1).
  double load_share = 0;
};

struct SnapshotService {
  std::string name;
  HashFields hash_fields = HashFields::kFiveTuple;
  uint32_t hash_seed = kDefaultFlowHashSeed;
  Forwarding forwarding = Forwarding::kIpip;
  ForwardFunction forward = nullptr;
  Table table;
  // Table entry i is backend first_backend + i of the snapshot.
  uint32_t first_backend = 0;
  uint32_t counter_id = 0;
  bool drain_keeps_established = true;
  double bounded_load =
      0;  // C of boundedLoadChoice (consistent_hash.h); 0: new flows take the table's pick
  // The port its traffic leaves through whatever port it came in on; kNoPort: the receiving
  // port's egress.
  uint32_t egress = kNoPort;
  // What a Full-NAT reply comes from: the VIP and its port (network byte order).
  IpAddress vip;
  uint16_t port = 0;
  // A Full-NAT TCP service's new sessions put a PROXY protocol header in front of their
  // client's bytes (dataplane/proxy_stream.h).
  bool proxy_protocol = false;
};

inline constexpr uint32_t kNoBackendIndex = UINT32_MAX;

// Whether a tracked connection of `service` stays on `backend`: yes while it is healthy, and while
// drained only if the service keeps established connections on drain.
inline bool keepsConnection(const SnapshotService& service, const SnapshotBackend& backend) {
  return backend.healthy && (!backend.drained || service.drain_keeps_established);
}

class Snapshot {
 public:
  // Where a packet to this (VIP, port, protocol) goes, or nullopt.
  std::optional<uint32_t> findService(const FlowKey& flow) const { return services_.find(flow); }
  // The service a later fragment (no ports) to this VIP and protocol belongs with: set only when
  // exactly one service on that VIP and protocol hashes without ports, since a fragment cannot
  // say which port it was for.
  std::optional<uint32_t> findFragmentService(const FlowKey& flow) const;
  const SnapshotService& service(uint32_t index) const { return services_list_[index]; }
  size_t serviceCount() const { return services_list_.size(); }
  // The index of the service with this stable id (SnapshotService::counter_id), or
  // kNoServiceIndex when this snapshot no longer has it.
  static constexpr uint32_t kNoServiceIndex = UINT32_MAX;
  uint32_t serviceIndexOf(uint32_t counter_id) const {
    return counter_id < service_by_counter_id_.size() ? service_by_counter_id_[counter_id]
                                                      : kNoServiceIndex;
  }
  // A Full-NAT local address by its stable id (NatLocalAddress::id), of any port.
  const IpAddress& natLocalAddress(uint16_t id) const { return nat_local_addresses_[id]; }

  const SnapshotBackend& backend(uint32_t index) const { return backends_[index]; }
  size_t backendCount() const { return backends_.size(); }
  // The index of the backend with this stable id (SnapshotBackend::counter_id), or
  // kNoBackendIndex when this snapshot no longer has it.
  uint32_t backendIndexOf(uint32_t counter_id) const {
    return counter_id < backend_by_counter_id_.size() ? backend_by_counter_id_[counter_id]
                                                      : kNoBackendIndex;
  }

  // The rewrite parameters for `backend` leaving `port`, or nullptr while its next hop's MAC is
  // unknown.
  const ForwardingTarget* target(uint32_t port, uint32_t backend) const {
    const size_t at = size_t{port} * backends_.size() + backend;
    return target_ready_[at] ? &targets_[at] : nullptr;
  }

  const SnapshotPort& port(uint32_t index) const { return ports_[index]; }
  // The port `service`'s traffic received on `port` leaves through (two-arm).
  uint32_t egressOf(uint32_t port, const SnapshotService& service) const {
    return service.egress != kNoPort ? service.egress : ports_[port].egress;
  }
  // The port a frame received on the device of port `device` (its first port) is for, by its
  // outer VLAN tag: kNoPort when the device has no port on that VLAN.
  uint32_t receivingPort(uint32_t device, const ParsedPacket& packet) const {
    const uint16_t vlan = packet.vlan_tags > 0 ? packet.vlan_ids[0] : uint16_t{0};
    const std::vector<uint16_t>& by_vlan = ports_[device].port_by_vlan;
    if (by_vlan.empty()) return vlan == 0 ? device : kNoPort;
    return by_vlan[vlan];
  }
  size_t portCount() const { return ports_.size(); }

  uint64_t generation() const { return generation_; }
  // How many ICMP errors each worker may send (dataplane.icmp).
  const IcmpConfig& icmp() const { return icmp_; }

 private:
  friend class SnapshotBuilder;  // snapshot.cc: the only code that fills one

  ServiceMap services_;
  ServiceMap fragment_services_;  // keyed with both ports zero
  std::vector<SnapshotService> services_list_;
  std::vector<uint32_t> service_by_counter_id_;
  std::vector<IpAddress> nat_local_addresses_;  // by NatLocalAddress::id
  std::vector<SnapshotBackend> backends_;
  std::vector<uint32_t> backend_by_counter_id_;
  std::vector<ForwardingTarget> targets_;  // [port * backends + backend]
  std::vector<uint8_t> target_ready_;
  std::vector<SnapshotPort> ports_;
  uint64_t generation_ = 0;
  IcmpConfig icmp_;
};

// The Maglev table of every service, in config order: the slow part of a snapshot, rebuilt only
// when the config changes. Errors name the service. A caller that knows backends' health passes
// buildSnapshot() these tables after withHealth(): the snapshot takes each backend's health
// from its table.
absl::StatusOr<std::vector<Table>> buildServiceTables(const Config& config);

// One service as a snapshot takes it: its settings in force (a drained backend's weight 0) and
// its live table, which gives each backend's health.
struct ServiceInput {
  const ServiceConfig& config;
  const Table& table;
};

// The snapshot for the ports of `dataplane`, the `services` in order, each port's MAC (in config
// order), the outer checksums each port's NIC fills in (kChecksumOffload* bits, by port; none
// given: every checksum is written), the MACs learned so far, and for each port with
// snat_addresses the steering of its replies (portReplySteering(); none given: the port has no
// RSS, one queue). Pure: the same inputs give the same snapshot. Targets whose next hop is
// neither configured nor learned are left unready; the datapath drops their packets as
// next_hop_unresolved. Errors name the service.
absl::StatusOr<std::unique_ptr<const Snapshot>> buildSnapshot(
    const DataplaneConfig& dataplane, absl::Span<const ServiceInput> services,
    absl::Span<const MacAddress> port_macs, const NeighborTable& neighbors, CounterIds& counter_ids,
    uint64_t generation, absl::Span<const uint8_t> port_checksum_offloads = {},
    absl::Span<const std::shared_ptr<const ReplySteering>> port_steering = {});

// The steering of each port's Full-NAT local ports under the spread its NIC has (`spreads`, by
// port; a port missing there: no RSS), null for a port without snat_addresses. Built once at
// start, since ports do not change on reload: each is a Toeplitz hash per local port.
absl::StatusOr<std::vector<std::shared_ptr<const ReplySteering>>> portReplySteering(
    const DataplaneConfig& dataplane, absl::Span<const RssSpread> spreads);
// The same for `config`'s services with `tables` (in config order), for tests and benchmarks.
absl::StatusOr<std::unique_ptr<const Snapshot>> buildSnapshot(
    const Config& config, absl::Span<const Table> tables, absl::Span<const MacAddress> port_macs,
    const NeighborTable& neighbors, CounterIds& counter_ids, uint64_t generation);

// A next hop a port must resolve by ARP or ND: the gateway when it has no fixed MAC, and every
// l2dsr backend without a fixed MAC.
struct NextHopToResolve {
  uint16_t port = 0;
  IpAddress address;
  IpAddress source;  // the port's address of the same family, to ask from
};
std::vector<NextHopToResolve> nextHopsToResolve(const DataplaneConfig& dataplane,
                                                absl::Span<const ServiceConfig> services);
inline std::vector<NextHopToResolve> nextHopsToResolve(const Config& config) {
  return nextHopsToResolve(config.dataplane, config.services);
}
std::vector<NextHopToResolve> nextHopsToResolve(const DataplaneConfig& dataplane,
                                                absl::Span<const ServiceInput> services);

}  // namespace berth
