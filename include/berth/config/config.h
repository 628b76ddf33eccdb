#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/table.h"
#include "berth/net/flow_hash.h"
#include "berth/net/ip_address.h"
#include "berth/net/mac_address.h"
#include "berth/util/named_enum.h"

namespace berth {

// The validated configuration model. Only the loader creates one, and only after every check has
// passed, so code that holds a Config can trust all of it. Line numbers point into the YAML
// source for messages that the control plane emits later (say, a health check that never rises).

enum class Protocol : uint8_t { kTcp = 6, kUdp = 17 };
absl::string_view toString(Protocol protocol);

// How packets leave for a backend (docs/architecture.md).
// The forwarding modes and their names in the config, from one list:
//   ipip   IPv4-in-IPv4 or IPv6-in-IPv6
//   gue    outer UDP to gue_port; source port from the flow hash
//   gre    GRE, as Maglev sends it
//   l2dsr    destination MAC rewritten to the backend's; the IP packet unchanged
//   fullnat  both addresses and ports rewritten, the replies back through berth (docs/fullnat.md)
#define BERTH_FORWARDING_MODES(X) \
  X(kIpip, "ipip") X(kGue, "gue") X(kGre, "gre") X(kL2Dsr, "l2dsr") X(kFullNat, "fullnat")
enum class Forwarding : uint8_t { BERTH_FORWARDING_MODES(BERTH_ENUMERATOR) };
absl::string_view toString(Forwarding forwarding);
// The mode named `name`, or nullopt.
std::optional<Forwarding> parseForwarding(absl::string_view name);
// Every mode's name, in the list's order.
absl::Span<const absl::string_view> forwardingNames();

// Where a setting was written: its YAML line, for messages the control plane emits later. Two
// settings written on different lines are still the same settings, so the structs below compare
// equal whatever their lines (a reload that only moves text around changes nothing).
struct SourceLine {
  int number = 0;

  friend bool operator==(const SourceLine&, const SourceLine&) { return true; }
};

// A DPDK port berth receives VIP traffic on and sends to backends from.
enum class RssKeyKind : uint8_t {
  kRandom,     // drawn at each start
  kSymmetric,  // 0x6d5a repeated: a flow and its reverse on the same queue
  kFixed,      // given in the config
};

// What a port's peer spreads flows over the port's queues with (PortConfig::peer_rss): a packet
// goes to queue table[toeplitz(key, tuple) & (table.size() - 1)], the tuple holding TCP's and
// UDP's ports in both IP versions.
struct PeerRssConfig {
  std::vector<uint8_t> key;     // 40 to 52 bytes
  std::vector<uint16_t> table;  // the queue of each entry, a power of two of them

  friend bool operator==(const PeerRssConfig&, const PeerRssConfig&) = default;
};

// The classes of a port's traffic that go to its kernel interface, each with its own rate and
// queue, so that a flood of one cannot starve another (docs/exception-path.md): BGP (TCP port
// 179 to or from a configured BGP neighbour), ARP and neighbour discovery, the health checks'
// answers (TCP from an address berth probes), flow sync (UDP to sync.listen's port from a sync
// peer), ICMP, and the rest. In order of priority.
#define BERTH_EXCEPTION_CLASSES(X) \
  X(kBgp, "bgp")                   \
  X(kNeighbor, "arp_nd")           \
  X(kHealth, "health")             \
  X(kSync, "sync")                 \
  X(kIcmp, "icmp")                 \
  X(kOther, "other")

enum class ExceptionClass : uint8_t { BERTH_EXCEPTION_CLASSES(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kExceptionClassCount = static_cast<size_t>(ExceptionClass::kCount);
absl::string_view toString(ExceptionClass exception_class);

// How the kernel interface is made: a tap device (/dev/net/tun), or DPDK's virtio-user port
// over vhost-net, which moves frames through shared rings instead of a read and a write each.
enum class ExceptionKind : uint8_t { kTap, kVirtioUser };
absl::string_view toString(ExceptionKind kind);

// A port's kernel interface (docs/exception-path.md): what arrives on the port that is not
// berth's own traffic (not a VIP's, not an ARP or ND question berth answers) goes to it, and what
// the kernel sends on it leaves through the port. berthd makes it at start with the port's MAC,
// MTU and addresses, and it goes away when berthd stops.
struct ExceptionConfig {
  ExceptionKind kind = ExceptionKind::kTap;
  std::string name;  // the kernel interface's name: 1 to 15 bytes
  // The port's addresses on the interface, with these prefix lengths: the kernel's on-link route
  // to peers such as the BGP router.
  uint8_t ipv4_prefix_length = 24;
  uint8_t ipv6_prefix_length = 64;
  // Frames a second each class may bring to the kernel (a burst of a tenth of a second, at least
  // 16 frames, passes at once), indexed by ExceptionClass.
  // Flow sync's 20,000: a peer sends at most 256 datagrams a 10 ms turn in a burst of news, and
  // a heartbeat a second otherwise.
  std::array<uint32_t, kExceptionClassCount> per_second = {2'000,  1'000, 5'000,
                                                           20'000, 1'000, 10'000};

  friend bool operator==(const ExceptionConfig&, const ExceptionConfig&) = default;
};

struct PortConfig {
  std::string name;
  // A PCI address ("0000:3b:00.0") or a vdev string ("net_pcap0,rx_pcap=in.pcap,...").
  std::string device;
  // The 802.1Q VLAN the port is on, 1 to 4094; 0: untagged frames (and priority-tagged, VLAN
  // 0). Ports that share a device differ in VLAN; each is its own L3 interface with its own
  // addresses, gateway and kernel interface, and receives only its VLAN's frames
  // (docs/vlans.md). queues and rss_key are the device's, so its ports give the same.
  uint16_t vlan = 0;
  std::optional<IpAddress> ipv4;  // at least one of ipv4 and ipv6
  std::optional<IpAddress> ipv6;
  // Where encapsulated traffic goes next: an address resolved by ARP or ND, or a fixed MAC.
  std::optional<IpAddress> gateway;
  std::optional<MacAddress> gateway_mac;
  uint16_t mtu = 1500;
  // Queue pairs, each polled by one worker. 0: one per worker where the PMD has RSS, one
  // otherwise. Set it for a port whose peer spreads flows over the queues itself (memif).
  uint16_t queues = 0;
  // Descriptors per RX and per TX queue, 64 to 32768; the driver's limits and alignment adjust
  // them (rte_eth_dev_adjust_nb_rx_tx_desc), and berthd reports what is in use. More ride out
  // longer stalls of a worker before the NIC counts imissed, at the cost of mbufs and cache.
  // The device's, like queues.
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  // The mbuf pool's size; 0: sized from the descriptors, queues, workers and the exception
  // path's queues, which is what berthd logs at start. A smaller pool saves memory at the risk
  // of rx_nombuf. The device's.
  uint32_t mbufs = 0;
  // Whether the outer IPv4 header checksum, and the outer UDP checksum of GUE over IPv6, are
  // left to the NIC where it offers that offload; the bytes sent are the same either way. The
  // device's.
  bool checksum_offload = true;
  // The Toeplitz key RSS spreads flows over the queues with. A key anyone knows (the symmetric
  // 0x6d5a, or a NIC's default) lets a sender compute flows that all land on one worker, so by
  // default a random key is drawn at each start.
  RssKeyKind rss_key = RssKeyKind::kRandom;
  std::vector<uint8_t> rss_key_bytes;  // kFixed: the key, as long as the NIC's
  // For a port without RSS of its own whose peer spreads flows over its queues (memif): the
  // Toeplitz key and redirection table the peer spreads with, as a NIC's RSS would, so that
  // Full-NAT chooses local ports whose replies the peer puts on the owning worker's queue
  // (docs/fullnat.md). Empty key: not declared.
  PeerRssConfig peer_rss;
  // Whether a gratuitous ARP or an unsolicited neighbour advertisement may change a next hop's
  // MAC here. Off, only replies to berth's own requests do (docs/neighbors.md).
  bool learn_announcements = false;
  // The port's kernel interface; none: frames that are not berth's are counted and dropped.
  std::optional<ExceptionConfig> exception;
  // Two-arm (docs/two-arm.md): the port whose next hop VIP traffic received here goes to the
  // backends through, from that port's address, MAC and VLAN; empty: this port. Replies berth
  // makes itself (ICMP, ARP, ND) still leave through the port the frame came in on.
  std::string egress;
  // Full-NAT (docs/fullnat.md): the local addresses that `forwarding: fullnat` connections
  // leaving through this port take as their source, and the ports of each they may use (host
  // order). berth answers ARP and ND for them here; none is the port's own address.
  std::vector<IpAddress> snat_addresses;
  uint16_t snat_first_port = 1024;
  uint16_t snat_last_port = 65535;
  // The health probes of fullnat services through this port come from its first local address
  // of the backend's IP version, on the kProbeSourcePorts ports just below snat_first_port.
  static constexpr uint16_t kProbeSourcePorts = 64;
  SourceLine line;

  // The local addresses of `family`.
  std::vector<IpAddress> snatAddressesOf(IpFamily family) const;

  friend bool operator==(const PortConfig&, const PortConfig&) = default;
};

// The per-core connection table (dataplane/conntrack.h).
struct ConntrackConfig {
  uint32_t entries_per_core = 1 << 20;
  uint32_t max_inserts_per_sec = 0;  // per core; 0: no limit
  uint32_t tcp_established_s = 300;
  uint32_t tcp_opening_s = 5;
  uint32_t tcp_closing_s = 10;
  uint32_t udp_s = 30;
  // Full-NAT sessions per core (dataplane/nat_sessions.h), live and in their reuse hold
  // together: 272 bytes each at a power of two (docs/fullnat.md). Allocated only where a port has
  // snat_addresses.
  uint32_t nat_sessions_per_core = 1 << 18;

  friend bool operator==(const ConntrackConfig&, const ConntrackConfig&) = default;
};

// The ICMP errors the datapath sends (dataplane/icmp_reply.h): "fragmentation needed" and
// "packet too big", each worker limited to a token bucket of these, so that a flood of oversized
// packets cannot turn berth into a flood of replies. Applies on reload.
struct IcmpConfig {
  uint32_t too_big_per_second = 1000;  // per worker
  uint32_t too_big_burst = 100;

  friend bool operator==(const IcmpConfig&, const IcmpConfig&) = default;
};

// How next hops' MACs are resolved and kept (docs/neighbors.md). Applies on reload.
struct NeighborConfig {
  // A learned MAC holds this long before anything may change it.
  uint32_t lock_time_ms = 1000;
  // A known next hop is asked again this often; berth learns only from answers to its own
  // requests, so this is how soon it follows a replaced gateway.
  uint32_t refresh_interval_ms = 30'000;
  // How long a request waits for its answer, and how often an unanswered one is asked again.
  uint32_t request_timeout_ms = 1000;
  // Unanswered requests after a refresh, before the next hop is marked unresolved.
  uint32_t refresh_retries = 3;

  friend bool operator==(const NeighborConfig&, const NeighborConfig&) = default;
};

// Workers that sleep while their queues stay empty (docs/architecture.md, "The worker"), for hosts
// where berthd shares its cores; without it a worker busy-polls, which is what a dedicated
// appliance wants. Changing it needs a restart.
struct IdleConfig {
  // Loops in a row that receive nothing before the worker first sleeps.
  uint32_t after_empty_polls = 1000;
  // Sleeps start at 1 us and double while nothing arrives, up to this: the longest a frame that
  // arrives during a sleep waits for the worker to wake, beyond the kernel's wake-up.
  uint32_t max_sleep_us = 100;

  friend bool operator==(const IdleConfig&, const IdleConfig&) = default;
};

struct DataplaneConfig {
  std::vector<std::string> eal;  // EAL arguments, as on berthd's command line before "--"
  std::vector<PortConfig> ports;
  ConntrackConfig conntrack;
  IcmpConfig icmp;
  NeighborConfig neighbors;
  // The BGP neighbours' addresses (bgp.neighbors, copied by the loader): TCP port 179 from
  // them is the bgp class of the exception path. Applies on reload.
  std::vector<IpAddress> bgp_peers;
  // The sync peers' addresses and sync.listen's port (copied by the loader): UDP from them to
  // that port is the sync class of the exception path. 0: no sync.
  std::vector<IpAddress> sync_peers;
  uint16_t sync_port = 0;
  // A worker lcore on another NUMA socket than a port it polls reads every frame across the
  // socket interconnect: berthd warns at start, or with strict_numa refuses to start.
  bool strict_numa = false;
  // None: workers never sleep.
  std::optional<IdleConfig> idle;

  friend bool operator==(const DataplaneConfig&, const DataplaneConfig&) = default;
};

// How a backend's health is checked by the management thread, over kernel sockets.
enum class HealthCheckType : uint8_t {
  kNone,  // always healthy
  kTcp,   // healthy while a TCP connect succeeds
  kHttp,  // healthy while GET path answers with a status in [expect_low, expect_high]
};
absl::string_view toString(HealthCheckType type);

struct HealthCheckConfig {
  HealthCheckType type = HealthCheckType::kNone;
  uint32_t interval_ms = 2000;
  uint32_t timeout_ms = 1000;  // at most interval_ms
  uint32_t rise = 2;           // consecutive successes that turn an unhealthy backend healthy
  uint32_t fall = 3;           // consecutive failures that turn a healthy backend unhealthy
  // Where probes go. In a service's settings, unset means the backend's address and the
  // service's port; a backend's resolved settings always have both.
  std::optional<IpAddress> address;
  std::optional<uint16_t> port;
  std::string http_path = "/";
  uint16_t expect_low = 200;
  uint16_t expect_high = 399;
  // The kernel interface the probes leave through (SO_BINDTODEVICE), from `via: PORT`: that
  // port's exception interface. Empty: wherever the host's routes send them.
  std::string interface;
  // A fullnat service's probes (docs/fullnat.md): the local address they come from, and the
  // source ports they take in turn, [source_first_port, source_first_port + source_ports), which
  // lie outside the pool so that berth passes their answers to the kernel. Unset: the kernel
  // chooses both.
  std::optional<IpAddress> source;
  uint16_t source_first_port = 0;
  uint16_t source_ports = 0;
  // The service sends a PROXY protocol header (ServiceConfig::proxy_protocol): an HTTP probe
  // starts with one of its own, the LOCAL command's (net/proxy_protocol.h), as the backend
  // expects one in front of every connection's first byte.
  bool proxy_header = false;

  friend bool operator==(const HealthCheckConfig&, const HealthCheckConfig&) = default;
};

struct BackendConfig {
  std::string name;
  IpAddress address;
  // 0 drains the backend: no new flows, established ones finish. A drain moves only the
  // backend's own slots (ServiceConfig::hashingBackends()).
  int64_t weight = 1;
  std::optional<MacAddress> mac;  // l2dsr: fixed instead of resolved by ARP or ND
  // The service's health settings with this backend's overrides, address and port filled in.
  HealthCheckConfig health;
  SourceLine line;

  friend bool operator==(const BackendConfig&, const BackendConfig&) = default;
};

struct ServiceConfig {
  std::string name;
  IpAddress vip;
  uint16_t port = 0;
  Protocol protocol = Protocol::kTcp;
  uint32_t table_size = kDefaultTableSize;
  // `table_size: auto`: table_size is the smallest prime of at least max(65537, 100 per backend),
  // so a reload that changes the number of backends may change it.
  bool table_size_auto = false;
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t ring_replicas = kDefaultRingReplicas;  // algorithm: ring only
  HashFields hash_fields = HashFields::kFiveTuple;
  Forwarding forwarding = Forwarding::kIpip;
  uint16_t gue_port = 0;      // set exactly when forwarding is kGue
  bool announce_arp = false;  // answer ARP (IPv4) or ND (IPv6) for the VIP
  bool announce_bgp = false;  // a route for the VIP over BGP, through BIRD (BgpConfig)
  // What a drained backend's (weight 0) established connections do: stay until they end (the
  // default, keep_established), or move to the table's pick with their next packet (repick).
  bool drain_keeps_established = true;
  // Bounded-load consistent hashing (maglev/consistent_hash.h, boundedLoadChoice): a new flow goes
  // past a backend holding C times its weighted mean of active flows. 0: off.
  double bounded_load = 0;
  HealthCheckConfig health;  // the service's settings, before per-backend overrides
  std::vector<BackendConfig> backends;
  // The port this service's traffic leaves through to its backends, whichever port it came in
  // on; empty: the receiving port's egress (PortConfig::egress).
  std::string egress;
  // `proxy_protocol: v2` (fullnat and TCP only): each connection's client and VIP, in a PROXY
  // protocol version 2 header in front of its first byte toward the backend (docs/fullnat.md).
  bool proxy_protocol = false;
  SourceLine line;

  // The backends as the base table's build takes them, and the build's options. A backend with
  // weight 0 is drained, and a drain gives up only the backend's own slots (servingTable()), so
  // it takes part in the base table with the weight it most likely had: the lower median of the
  // service's positive weights, or 1 if there are none. In a pool of equal weights, setting one
  // backend's weight to 0 then moves exactly that backend's slots.
  std::vector<Backend> hashingBackends() const;
  TableOptions tableOptions() const;
  // "tcp 198.18.100.1:80", "udp [2001:db8::1]:53": what the service listens on.
  std::string listener() const;

  friend bool operator==(const ServiceConfig&, const ServiceConfig&) = default;
};

// The table that serves `service`, from its base table, buildTable(service.hashingBackends(),
// service.tableOptions()): backends that `healthy` marks down (config order; empty: all up) and
// drained ones, named in `drained` (run-time drains) or configured with weight 0, give up their
// slots by min-disruption failover (maglev/table.h withHealth()). So the table is a pure function
// of (config, healthy set, drained set), whatever the order of the changes that led to it.
absl::StatusOr<Table> servingTable(const ServiceConfig& service, const Table& base,
                                   const std::vector<bool>& healthy = {},
                                   const absl::flat_hash_set<std::string>& drained = {});
// The base table and servingTable() of it, with every backend healthy and no run-time drain.
absl::StatusOr<Table> buildServingTable(const ServiceConfig& service);

// berthd's Prometheus text endpoint: off unless the config has a `metrics` section.
inline constexpr char kDefaultMetricsListen[] = "127.0.0.1:9464";
struct MetricsConfig {
  std::optional<Endpoint> listen;  // none: no endpoint

  friend bool operator==(const MetricsConfig&, const MetricsConfig&) = default;
};

// Announcing VIPs over BGP: berth drives BIRD, which speaks BGP to the routers that
// spread VIP traffic over berth instances by ECMP (docs/scale-out.md).
struct BgpNeighbor {
  IpAddress address;
  uint32_t asn = 0;
  SourceLine line;

  friend bool operator==(const BgpNeighbor&, const BgpNeighbor&) = default;
};

struct BgpConfig {
  uint32_t asn = 0;     // this instance's
  IpAddress router_id;  // an IPv4 address, unique among BGP speakers
  // The DPDK port whose addresses are the routes' next hops: where routers send VIP traffic.
  std::string port;
  std::vector<BgpNeighbor> neighbors;
  uint32_t hold_time_s = 9;  // BGP hold time: how long a silent instance keeps its routes
  // On a stop, how long berthd goes on forwarding once berth-announcer has withdrawn its routes
  // from BIRD: the time routers get to take the withdrawal into their FIBs.
  uint32_t forward_after_withdrawal_ms = 2000;
  SourceLine line;

  // The next hop for a VIP of `family`: the port's address of that family.
  std::optional<IpAddress> nextHopFor(IpFamily family, const DataplaneConfig& dataplane) const;

  friend bool operator==(const BgpConfig&, const BgpConfig&) = default;
};

// A fleet of instances that share their services through etcd (docs/scale-out.md, "A fleet
// through etcd"): `berthctl fleet push` writes a version of the services, and every instance
// applies each version in order. The local file keeps what is per instance (dataplane, metrics,
// bgp and this section) and has no services of its own. Without the section, berthd serves its
// local file's services alone.
struct FleetConfig {
  // etcd's client URLs, all http:// or all https://; a request that fails on one goes to the next.
  std::vector<std::string> endpoints;
  // Every key the fleet uses starts with it: several fleets may share one etcd.
  std::string prefix = "/berth";
  // This instance's name in `berthctl fleet status`, unique in the fleet; default: the host name.
  std::string name;
  // TLS to etcd (https:// endpoints): the CA that signed etcd's certificate, and this instance's
  // client certificate and key where etcd asks for one. Empty: the system's CAs, no client
  // certificate.
  std::string ca;
  std::string cert;
  std::string key;
  // Versions kept in etcd, the newest ones; older ones are deleted and their revisions compacted
  // by the push that makes them old.
  uint32_t keep_versions = 10;
  // The last version this instance applied, which it serves when it starts while etcd is down.
  std::string cache = "/var/lib/berth/fleet-version.yaml";
  // How long this instance stays listed after it stops renewing its lease.
  uint32_t lease_ttl_s = 10;
  // Down verdicts from live instances that take a backend out of the fleet's tables; 0 for a
  // majority of the live instances (fleet/agreed_health.h).
  uint32_t health_quorum = 0;
  SourceLine line;

  friend bool operator==(const FleetConfig&, const FleetConfig&) = default;
};

// Flow sync (docs/scale-out.md, "Flows that survive an instance"): instances behind the same ECMP
// routers tell each other about the flows they track off their tables' picks, over signed UDP.

// A shared secret that signs sync datagrams: a file holding at least 16 bytes (read at start).
struct SyncKeyConfig {
  uint8_t id = 0;  // 1..255, carried in each datagram
  std::string file;
  SourceLine line;

  friend bool operator==(const SyncKeyConfig&, const SyncKeyConfig&) = default;
};

struct SyncConfig {
  // Where this instance takes datagrams from its peers, on the kernel's network (on a one-NIC
  // appliance, the port's kernel interface); they are sent from here too.
  Endpoint listen;
  // The other instances' listen endpoints; with a fleet section, the fleet's instances are peers
  // too, each at the endpoint it reports.
  std::vector<Endpoint> peers;
  // One or two keys: datagrams are signed with the first and taken under either, so that keys
  // rotate without a flag day (add the new one second, then first on every instance, then
  // remove the old).
  std::vector<SyncKeyConfig> keys;
  // Peers' flows held at most, and changes to them a second (docs/scale-out.md).
  uint32_t max_records = 1 << 20;
  uint32_t max_changes_per_second = 100'000;
  SourceLine line;

  friend bool operator==(const SyncConfig&, const SyncConfig&) = default;
};

struct Config {
  DataplaneConfig dataplane;
  MetricsConfig metrics;
  std::optional<BgpConfig> bgp;
  std::optional<FleetConfig> fleet;
  std::optional<SyncConfig> sync;
  // From the local file, or with a fleet section from the fleet version applied.
  std::vector<ServiceConfig> services;
  // Advice that does not stop the config from loading, each naming its field and line.
  std::vector<std::string> warnings;
  // What the loader chose where the config let it (a table size of `auto`), each naming its
  // field and line: logged by berthd at start and on reload, printed by berthctl.
  std::vector<std::string> notes;
  // CRC32-C of the text this config was parsed from: `status` shows the one in force, which
  // after a refused reload is not the file on disk.
  uint32_t source_crc32c = 0;

  // The service with this name, or nullptr.
  const ServiceConfig* findService(absl::string_view name) const;
};

// The sections of `next` that differ from `running` in what berthd sets up once, at start: the
// EAL, the ports, the per-core connection tables, idle workers, the metrics endpoint and the
// fleet's etcd. A reload that changes one of them needs a restart. Empty when `next` can be applied
// in place.
std::vector<std::string> sectionsNeedingRestart(const Config& running, const Config& next);

}  // namespace berth
