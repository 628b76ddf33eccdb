#include "berth/config/loader.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "berth/config/drivers.h"
#include "berth/config/eal_options.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/net/crc32c.h"
#include "berth/net/toeplitz.h"
#include "berth/util/status_macros.h"
#include "berth/util/whole_file.h"
#include "config/yaml_fields.h"

namespace berth {
namespace {

// The kernel interface of the port `via` names; empty while the ports are not known.
absl::StatusOr<std::string> viaInterface(const Fields& fields, const std::string& port_name,
                                         const DataplaneConfig* dataplane) {
  if (dataplane == nullptr) return std::string();
  const auto port = absl::c_find_if(
      dataplane->ports, [&](const PortConfig& candidate) { return candidate.name == port_name; });
  if (port == dataplane->ports.end()) {
    return fields.site("via").error(absl::StrCat("no port named '", port_name, "'"));
  }
  if (!port->exception) {
    return fields.site("via").error(
        absl::StrCat("port '", port_name, "' has no exception interface to send probes from"));
  }
  return port->exception->name;
}

// Health settings at `path`: every key optional, each falling back to `base` (the defaults for a
// service, the service's settings for a backend).
// `dataplane` gives the ports `via` may name; null: the ports are not known yet (a fleet
// version, checked before an instance applies it with its own), and any name passes.
absl::StatusOr<HealthCheckConfig> parseHealth(absl::string_view source, const std::string& path,
                                              const YAML::Node& node, const HealthCheckConfig& base,
                                              const DataplaneConfig* dataplane) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields,
                         Fields::read(source, path, node,
                                      {"type", "interval", "timeout", "rise", "fall", "address",
                                       "port", "path", "expect", "via"}));
  HealthCheckConfig health = base;
  BERTH_ASSIGN_OR_RETURN(const std::string type,
                         fields.choice("type", {"none", "tcp", "http"}, toString(base.type)));
  health.type = type == "tcp"    ? HealthCheckType::kTcp
                : type == "http" ? HealthCheckType::kHttp
                                 : HealthCheckType::kNone;
  BERTH_ASSIGN_OR_RETURN(health.interval_ms,
                         fields.milliseconds("interval", 0.05, 3600, base.interval_ms));
  BERTH_ASSIGN_OR_RETURN(health.timeout_ms,
                         fields.milliseconds("timeout", 0.01, 60, base.timeout_ms));
  if (health.timeout_ms > health.interval_ms) {
    return fields.site(fields.has("timeout") ? "timeout" : "interval")
        .error(absl::StrCat("the timeout (", health.timeout_ms / 1000.0,
                            " s) must not exceed the interval (", health.interval_ms / 1000.0,
                            " s)"));
  }
  BERTH_ASSIGN_OR_RETURN(health.rise, fields.integer("rise", 1, 100, base.rise));
  BERTH_ASSIGN_OR_RETURN(health.fall, fields.integer("fall", 1, 100, base.fall));
  if (fields.has("address")) {
    BERTH_ASSIGN_OR_RETURN(health.address, fields.address("address"));
  }
  if (fields.has("port")) {
    BERTH_ASSIGN_OR_RETURN(health.port, fields.integer("port", 1, 65535, std::nullopt));
  }
  if (fields.has("path")) {
    BERTH_ASSIGN_OR_RETURN(health.http_path, fields.requiredString("path"));
    if (health.http_path[0] != '/' ||
        health.http_path.find_first_of(" \r\n") != std::string::npos) {
      return fields.site("path").error("must start with '/' and hold no spaces or line breaks");
    }
  }
  if (const YAML::Node* expect = fields.find("expect"); expect != nullptr) {
    // A status code ("200") or an inclusive range ("200-299").
    const std::string text = expect->IsScalar() ? expect->Scalar() : "";
    const size_t dash = text.find('-');
    int low = 0;
    int high = 0;
    const bool parsed = dash == std::string::npos
                            ? absl::SimpleAtoi(text, &low) && (high = low, true)
                            : absl::SimpleAtoi(text.substr(0, dash), &low) &&
                                  absl::SimpleAtoi(text.substr(dash + 1), &high);
    if (!parsed || low < 100 || high > 599 || low > high) {
      return fields.site("expect").error(absl::StrCat(
          "must be an HTTP status (100-599) or a range such as 200-299, got '", text, "'"));
    }
    health.expect_low = static_cast<uint16_t>(low);
    health.expect_high = static_cast<uint16_t>(high);
  }
  if (fields.has("via")) {
    // The probes leave through that port's kernel interface, so they follow the data path's
    // segment whatever the host's routes say (docs/exception-path.md).
    BERTH_ASSIGN_OR_RETURN(const std::string port_name, fields.requiredString("via"));
    BERTH_ASSIGN_OR_RETURN(health.interface, viaInterface(fields, port_name, dataplane));
  }
  if (health.type != HealthCheckType::kHttp && (fields.has("path") || fields.has("expect"))) {
    return fields.site(fields.has("path") ? "path" : "expect")
        .error("only applies with type: http");
  }
  return health;
}

absl::StatusOr<BackendConfig> parseBackend(absl::string_view source, const std::string& path,
                                           const YAML::Node& node, const ServiceConfig& service,
                                           const DataplaneConfig* dataplane) {
  ErrorList errors;
  BERTH_ASSIGN_OR_RETURN(
      const Fields fields,
      Fields::read(source, path, node, {"name", "address", "weight", "mac", "health"}, errors));
  BackendConfig backend;
  backend.line.number = fields.self().line();
  errors.assign(backend.name, fields.requiredString("name"));
  errors.assign(backend.address, fields.address("address"));
  errors.assign(backend.weight, fields.integer("weight", 0, kMaxWeight, 1));
  errors.assign(backend.mac, fields.optionalMac("mac"));
  backend.health = service.health;
  if (const YAML::Node* health = fields.find("health"); health != nullptr && !health->IsNull()) {
    errors.assign(backend.health,
                  parseHealth(source, fields.pathOf("health"), *health, service.health, dataplane));
  }
  if (!errors.empty()) return errors.status();
  if (!backend.health.address) backend.health.address = backend.address;
  if (!backend.health.port) backend.health.port = service.port;
  return backend;
}

// The service's protocol and how its table is made: size, algorithm, bounded load and the
// fields hashed.
absl::Status parseTableFields(const Fields& fields, ServiceConfig& service) {
  BERTH_ASSIGN_OR_RETURN(const std::string protocol, fields.requiredString("protocol"));
  if (protocol == "tcp") {
    service.protocol = Protocol::kTcp;
  } else if (protocol == "udp") {
    service.protocol = Protocol::kUdp;
  } else {
    return fields.site("protocol").error(absl::StrCat("must be tcp or udp, got '", protocol, "'"));
  }

  const YAML::Node* table_size = fields.find("table_size");
  service.table_size_auto =
      table_size != nullptr && table_size->IsScalar() && table_size->Scalar() == "auto";
  if (!service.table_size_auto) {
    BERTH_ASSIGN_OR_RETURN(service.table_size,
                           fields.integer("table_size", 2, kMaxTableSize, kDefaultTableSize));
  }
  if (!service.table_size_auto && !isPrime(service.table_size)) {
    return fields.site("table_size")
        .error(absl::StrCat(service.table_size,
                            " is not prime; Maglev needs a prime table size (65537 and 655373 are "
                            "common choices)"));
  }

  BERTH_ASSIGN_OR_RETURN(const std::string algorithm,
                         fields.choice("algorithm", {"maglev", "ring", "rendezvous"}, "maglev"));
  service.algorithm = *parseAlgorithm(algorithm);
  if (service.algorithm == Algorithm::kRing) {
    BERTH_ASSIGN_OR_RETURN(service.ring_replicas,
                           fields.integer("replicas", 1, kMaxRingReplicas, kDefaultRingReplicas));
  } else if (fields.has("replicas")) {
    return fields.site("replicas").error("only applies with algorithm: ring");
  }
  BERTH_ASSIGN_OR_RETURN(
      const std::optional<double> bounded_load,
      fields.optionalNumberAbove("bounded_load", kMinBoundedLoad, kMaxBoundedLoad));
  service.bounded_load = bounded_load.value_or(0);

  if (fields.has("hash_fields")) {
    BERTH_ASSIGN_OR_RETURN(const std::string text, fields.requiredString("hash_fields"));
    absl::StatusOr<HashFields> hash_fields = parseHashFields(text);
    if (!hash_fields.ok()) return fields.site("hash_fields").error(hash_fields.status().message());
    service.hash_fields = *hash_fields;
  }
  return absl::OkStatus();
}

// How the service's packets leave: the forwarding mode, its port, the egress port, and how the
// VIP is announced and drains behave.
absl::Status parseForwardingFields(const Fields& fields, const DataplaneConfig* dataplane,
                                   ServiceConfig& service) {
  BERTH_ASSIGN_OR_RETURN(const std::string forwarding,
                         fields.choice("forwarding", forwardingNames(), "ipip"));
  service.forwarding = *parseForwarding(forwarding);
  if (service.forwarding == Forwarding::kGue) {
    BERTH_ASSIGN_OR_RETURN(service.gue_port, fields.integer("gue_port", 1, 65535, std::nullopt));
  } else if (fields.has("gue_port")) {
    return fields.site("gue_port").error("only applies with forwarding: gue");
  }
  if (fields.has("egress")) {
    BERTH_ASSIGN_OR_RETURN(service.egress, fields.requiredString("egress"));
    if (dataplane != nullptr && absl::c_none_of(dataplane->ports, [&](const PortConfig& port) {
          return port.name == service.egress;
        })) {
      return fields.site("egress").error(absl::StrCat("no port named '", service.egress, "'"));
    }
  }
  BERTH_ASSIGN_OR_RETURN(const std::string announce,
                         fields.choice("announce", {"arp", "bgp", "none"}, "none"));
  service.announce_arp = announce == "arp";
  service.announce_bgp = announce == "bgp";
  BERTH_ASSIGN_OR_RETURN(
      const std::string drain,
      fields.choice("drain", {"keep_established", "repick"}, "keep_established"));
  service.drain_keeps_established = drain == "keep_established";
  BERTH_ASSIGN_OR_RETURN(const std::string proxy_protocol,
                         fields.choice("proxy_protocol", {"v2", "none"}, "none"));
  service.proxy_protocol = proxy_protocol == "v2";
  if (service.proxy_protocol && service.forwarding != Forwarding::kFullNat) {
    return fields.site("proxy_protocol")
        .error(absl::StrCat("only applies with forwarding: fullnat (with ",
                            toString(service.forwarding),
                            " berth never sees the backend's side of the connection to shift)"));
  }
  if (service.proxy_protocol && service.protocol != Protocol::kTcp) {
    return fields.site("proxy_protocol").error("only applies to a tcp service");
  }
  return absl::OkStatus();
}

// The service's backends: unique names and addresses, of the IP version the mode needs.
absl::Status parseBackends(absl::string_view source, const Fields& fields,
                           const DataplaneConfig* dataplane, ServiceConfig& service) {
  ErrorList errors;
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
    absl::StatusOr<BackendConfig> parsed =
        parseBackend(source, backend_path, backend_node, service, dataplane);
    if (!errors.record(parsed.status())) continue;
    BackendConfig& backend = *parsed;
    const ErrorSite site(source, backend_path, backend_node.Mark());
    if (!names.insert(backend.name).second) {
      errors.record(site.error(absl::StrCat("duplicate backend name '", backend.name,
                                            "' in service '", service.name, "'")));
      continue;
    }
    // IPIP carries the client's packet whole, and L2 DSR hands it over unchanged: either way
    // the backend must speak the VIP's IP version. Full-NAT translates IPv6 clients to IPv4
    // backends (NAT64), not the other way (docs/fullnat.md).
    if (service.forwarding == Forwarding::kFullNat && backend.address.isV4() &&
        !service.vip.isV4()) {
      // NAT64.
    } else if (service.forwarding == Forwarding::kFullNat &&
               backend.address.family != service.vip.family) {
      errors.record(site.error(absl::StrCat(
          "backend address ", backend.address.toString(),
          " is IPv6 behind an IPv4 VIP: forwarding: fullnat translates IPv6 clients to IPv4 "
          "backends (NAT64), not IPv4 clients to IPv6 backends")));
      continue;
    }
    const bool same_family_needed =
        service.forwarding == Forwarding::kIpip || service.forwarding == Forwarding::kL2Dsr;
    if (same_family_needed && backend.address.family != service.vip.family) {
      errors.record(site.error(absl::StrCat("backend address ", backend.address.toString(),
                                            " is not of the VIP's IP version, which forwarding: ",
                                            toString(service.forwarding), " needs")));
      continue;
    }
    if (backend.mac && service.forwarding != Forwarding::kL2Dsr &&
        service.forwarding != Forwarding::kFullNat) {
      errors.record(site.error("a backend mac only applies with forwarding: l2dsr or fullnat"));
      continue;
    }
    if (!addresses.insert(backend.address).second) {
      errors.record(site.error(absl::StrCat("backend address ", backend.address.toString(),
                                            " is already used by another backend of service '",
                                            service.name, "'")));
      continue;
    }
    service.backends.push_back(std::move(backend));
  }
  return errors.status();
}

// The table's size (auto: 100 slots a backend, prime), checked against the backends, with a
// warning where each gets fewer than 100 slots.
absl::Status sizeTable(const Fields& fields, ServiceConfig& service,
                       std::vector<std::string>& warnings, std::vector<std::string>& notes) {
  if (service.table_size_auto) {
    // 100 slots a backend keeps balance and failover disruption near their ideals.
    uint64_t size = std::max<uint64_t>(kDefaultTableSize, 100 * uint64_t{service.backends.size()});
    while (!isPrime(size)) ++size;
    if (size > kMaxTableSize) {
      return fields.site("table_size")
          .error(absl::StrCat("auto needs ", size, " slots for ", service.backends.size(),
                              " backends, more than ", kMaxTableSize));
    }
    service.table_size = static_cast<uint32_t>(size);
    notes.push_back(fields.site("table_size")
                        .note(absl::StrCat("auto: M = ", service.table_size, " for ",
                                           service.backends.size(), " backend(s)")));
  }
  const std::vector<Backend> hashing_backends = service.hashingBackends();
  if (absl::Status status = validateBackends(hashing_backends, service.table_size); !status.ok()) {
    return fields.site("backends").error(status.message());
  }
  if (absl::Status status = validateTable(hashing_backends, service.tableOptions()); !status.ok()) {
    return fields.site(fields.has("replicas") ? "replicas" : "algorithm").error(status.message());
  }
  if (uint64_t{service.table_size} < 100 * uint64_t{service.backends.size()}) {
    // The smallest prime that gives every backend 100 slots, where the table can be that big.
    uint64_t suggestion = 100 * uint64_t{service.backends.size()};
    while (suggestion < kMaxTableSize && !isPrime(suggestion)) ++suggestion;
    warnings.push_back(
        fields.site("table_size")
            .warning(absl::StrCat(
                service.table_size, " is less than 100 slots for each of ", service.backends.size(),
                " backends; balance and failover disruption suffer",
                suggestion <= kMaxTableSize
                    ? absl::StrCat(", consider a larger prime such as ", suggestion)
                    : std::string())));
  }
  return absl::OkStatus();
}

// A service that can send no new flow anywhere is legal (backends to come, all drained on
// purpose) but seldom meant: its VIP takes packets and drops them.
void warnIfServingNothing(const Fields& fields, const ServiceConfig& service,
                          std::vector<std::string>& warnings) {
  const std::string listener =
      absl::StrCat(toString(service.protocol), " ", service.vip.toString(), ":", service.port);
  if (service.backends.empty()) {
    warnings.push_back(
        fields.site("backends")
            .warning(absl::StrCat("service '", service.name, "' has no backends: every packet to ",
                                  listener, " is dropped and counted as no_backend")));
  } else if (absl::c_all_of(service.backends,
                            [](const BackendConfig& backend) { return backend.weight == 0; })) {
    warnings.push_back(
        fields.site("backends")
            .warning(absl::StrCat("every backend of service '", service.name,
                                  "' has weight 0 (drained): no new flow to ", listener,
                                  " is served, each is dropped and counted as no_backend; give one "
                                  "a weight to serve")));
  }
}

absl::StatusOr<ServiceConfig> parseService(absl::string_view source, const std::string& path,
                                           const YAML::Node& node, const DataplaneConfig* dataplane,
                                           std::vector<std::string>& warnings,
                                           std::vector<std::string>& notes) {
  ErrorList errors;
  BERTH_ASSIGN_OR_RETURN(
      const Fields fields,
      Fields::read(source, path, node,
                   {"name", "vip", "port", "protocol", "table_size", "algorithm", "replicas",
                    "bounded_load", "hash_fields", "forwarding", "gue_port", "announce", "drain",
                    "health", "backends", "egress", "proxy_protocol"},
                   errors));
  ServiceConfig service;
  service.line.number = fields.self().line();
  errors.assign(service.name, fields.requiredString("name"));
  const bool vip_parsed = errors.assign(service.vip, fields.address("vip"));
  errors.assign(service.port, fields.integer("port", 1, 65535, std::nullopt));

  errors.record(parseTableFields(fields, service));
  const bool forwarding_parsed = errors.record(parseForwardingFields(fields, dataplane, service));
  if (const YAML::Node* health = fields.find("health"); health != nullptr && !health->IsNull()) {
    errors.assign(service.health, parseHealth(source, fields.pathOf("health"), *health,
                                              HealthCheckConfig{}, dataplane));
  }
  // A Full-NAT connection keeps its session's backend; new ones take the table's pick.
  if (forwarding_parsed && service.forwarding == Forwarding::kFullNat && service.bounded_load > 0) {
    errors.record(fields.site("bounded_load").error("does not apply with forwarding: fullnat"));
  }
  // The backends' checks against the VIP's version and the mode need both.
  if (vip_parsed && forwarding_parsed) {
    errors.record(parseBackends(source, fields, dataplane, service));
  }
  if (!errors.empty()) return errors.status();
  BERTH_RETURN_IF_ERROR(sizeTable(fields, service, warnings, notes));
  warnIfServingNothing(fields, service, warnings);
  return service;
}

// rss_key: random (the default), symmetric, or the key's bytes in hex, colons between them
// optional.
absl::Status parseRssKey(const Fields& fields, PortConfig& port) {
  if (!fields.has("rss_key")) return absl::OkStatus();
  BERTH_ASSIGN_OR_RETURN(const std::string text, fields.requiredString("rss_key"));
  if (text == "random" || text == "symmetric") {
    port.rss_key = text == "random" ? RssKeyKind::kRandom : RssKeyKind::kSymmetric;
    return absl::OkStatus();
  }
  port.rss_key_bytes = rssKeyFromHex(text);
  if (port.rss_key_bytes.empty()) {
    return fields.site("rss_key").error(
        "must be random, symmetric, or a key of 40 to 52 bytes in hex (colons optional)");
  }
  port.rss_key = RssKeyKind::kFixed;
  return absl::OkStatus();
}

// peer_rss: { key: symmetric | HEX, table: [QUEUE, ...] }, what the peer of a port without RSS
// of its own spreads with. The table defaults to the 128 entries that NICs fill round robin over
// the port's queues, which peer_rss needs given.
absl::Status parsePeerRss(absl::string_view source, const Fields& port_fields, PortConfig& port) {
  const YAML::Node* node = port_fields.find("peer_rss");
  if (node == nullptr) return absl::OkStatus();
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, port_fields.pathOf("peer_rss"),
                                                           *node, {"key", "table"}));
  if (port.queues == 0) {
    return port_fields.site("peer_rss")
        .error("needs queues: the number of queues the peer spreads flows over");
  }
  BERTH_ASSIGN_OR_RETURN(const std::string key, fields.requiredString("key"));
  if (key == "symmetric") {
    port.peer_rss.key = symmetricRssKey(40);
  } else {
    port.peer_rss.key = rssKeyFromHex(key);
    if (port.peer_rss.key.empty()) {
      return fields.site("key").error(
          "must be symmetric or a key of 40 to 52 bytes in hex (colons optional)");
    }
  }
  if (!fields.has("table")) {
    for (uint16_t entry = 0; entry < 128; ++entry) {
      port.peer_rss.table.push_back(static_cast<uint16_t>(entry % port.queues));
    }
    return absl::OkStatus();
  }
  BERTH_ASSIGN_OR_RETURN(const std::vector<std::string> entries, fields.stringList("table"));
  const size_t size = entries.size();
  if (size == 0 || size > 65536 || (size & (size - 1)) != 0) {
    return fields.site("table").error(
        absl::StrCat(size, " entries; a redirection table has a power of two of them, 1 to 65536"));
  }
  for (size_t i = 0; i < size; ++i) {
    uint32_t queue = 0;
    if (!absl::SimpleAtoi(entries[i], &queue) || queue >= port.queues) {
      return fields.site("table").error(absl::StrCat("[", i, "]: '", entries[i],
                                                     "' is not a queue of the port's ", port.queues,
                                                     " (0 to ", port.queues - 1, ")"));
    }
    port.peer_rss.table.push_back(static_cast<uint16_t>(queue));
  }
  return absl::OkStatus();
}

// snat_addresses: [ADDRESS, ...] and snat_ports: FIRST-LAST, the local addresses and ports of
// Full-NAT connections leaving through the port (docs/fullnat.md).
absl::Status parseSnat(const Fields& fields, PortConfig& port) {
  BERTH_ASSIGN_OR_RETURN(const std::vector<std::string> addresses,
                         fields.stringList("snat_addresses"));
  for (size_t i = 0; i < addresses.size(); ++i) {
    const ErrorSite site = fields.site("snat_addresses");
    absl::StatusOr<IpAddress> address = IpAddress::parse(addresses[i]);
    if (!address.ok()) {
      return site.error(absl::StrCat("[", i, "]: '", addresses[i], "' is not an IP address"));
    }
    if (absl::c_linear_search(port.snat_addresses, *address)) {
      return site.error(absl::StrCat(address->toString(), " is listed twice"));
    }
    if (*address == port.ipv4 || *address == port.ipv6) {
      return site.error(absl::StrCat(address->toString(),
                                     " is the port's own address, which the kernel interface and "
                                     "berth's own traffic use; give local addresses of their own"));
    }
    port.snat_addresses.push_back(*address);
  }
  if (!fields.has("snat_ports")) return absl::OkStatus();
  BERTH_ASSIGN_OR_RETURN(const std::string range, fields.requiredString("snat_ports"));
  const std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
  uint32_t first = 0;
  uint32_t last = 0;
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &first) || !absl::SimpleAtoi(ends[1], &last) ||
      first == 0 || last > 65535 || first > last) {
    return fields.site("snat_ports")
        .error(absl::StrCat("'", range, "' is not a port range FIRST-LAST within 1-65535"));
  }
  if (port.snat_addresses.empty()) {
    return fields.site("snat_ports").error("only applies with snat_addresses");
  }
  port.snat_first_port = static_cast<uint16_t>(first);
  port.snat_last_port = static_cast<uint16_t>(last);
  return absl::OkStatus();
}

// exception: { kind: tap | virtio-user, name: IFNAME, ipv4_prefix_length, ipv6_prefix_length,
//              per_second: { bgp, arp_nd, health, icmp, other } }
absl::StatusOr<ExceptionConfig> parseException(absl::string_view source, const std::string& path,
                                               const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, path, node,
                                                           {"kind", "name", "ipv4_prefix_length",
                                                            "ipv6_prefix_length", "per_second"}));
  ExceptionConfig exception;
  BERTH_ASSIGN_OR_RETURN(const std::string kind,
                         fields.choice("kind", {"tap", "virtio-user"}, "tap"));
  exception.kind = kind == "tap" ? ExceptionKind::kTap : ExceptionKind::kVirtioUser;
  BERTH_ASSIGN_OR_RETURN(exception.name, fields.requiredString("name"));
  // IFNAMSIZ less its terminating zero; '/' and whitespace are not allowed in interface names.
  if (exception.name.empty() || exception.name.size() > 15 || exception.name == "." ||
      exception.name == ".." ||
      absl::c_any_of(exception.name, [](char c) { return c == '/' || c == ':' || c <= ' '; })) {
    return fields.site("name").error(
        "must be a kernel interface name: 1 to 15 characters, without '/', ':' or spaces");
  }
  BERTH_ASSIGN_OR_RETURN(exception.ipv4_prefix_length,
                         fields.integer("ipv4_prefix_length", 1, 32, 24));
  BERTH_ASSIGN_OR_RETURN(exception.ipv6_prefix_length,
                         fields.integer("ipv6_prefix_length", 1, 128, 64));
  const YAML::Node* rates = fields.find("per_second");
  if (rates == nullptr || rates->IsNull()) return exception;
  BERTH_ASSIGN_OR_RETURN(const Fields rate_fields,
                         Fields::read(source, fields.pathOf("per_second"), *rates,
                                      {BERTH_EXCEPTION_CLASSES(BERTH_ENUMERATOR_NAME)}));
  for (size_t i = 0; i < kExceptionClassCount; ++i) {
    const absl::string_view name = toString(static_cast<ExceptionClass>(i));
    BERTH_ASSIGN_OR_RETURN(exception.per_second[i],
                           rate_fields.integer(name, 1, 10'000'000, exception.per_second[i]));
  }
  return exception;
}

// A port; `eal` is the config's EAL arguments, whose --vdev may create its device.
absl::StatusOr<PortConfig> parsePort(absl::string_view source, const std::string& path,
                                     const YAML::Node& node, const std::vector<std::string>& eal) {
  ErrorList errors;
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, path, node,
                                                           {"name",
                                                            "device",
                                                            "vlan",
                                                            "ipv4",
                                                            "ipv6",
                                                            "gateway",
                                                            "gateway_mac",
                                                            "mtu",
                                                            "queues",
                                                            "rx_descriptors",
                                                            "tx_descriptors",
                                                            "mbufs",
                                                            "checksum_offload",
                                                            "rss_key",
                                                            "learn_announcements",
                                                            "exception",
                                                            "egress",
                                                            "snat_addresses",
                                                            "snat_ports",
                                                            "peer_rss"},
                                                           errors));
  PortConfig port;
  port.line.number = fields.self().line();
  errors.assign(port.name, fields.requiredString("name"));
  if (errors.assign(port.device, fields.requiredString("device"))) {
    if (const std::string problem =
            deviceStringProblem(port.device, !ealVdevCreating(eal, port.device).empty());
        !problem.empty()) {
      errors.record(fields.site("device").error(problem));
    }
  }
  // 0 and 4095 are reserved by 802.1Q; a port without `vlan` takes untagged frames.
  errors.assign(port.vlan, fields.integer("vlan", 1, 4094, 0));
  if (fields.has("egress")) errors.assign(port.egress, fields.requiredString("egress"));
  const bool ipv4_parsed =
      errors.assign(port.ipv4, fields.optionalAddress("ipv4", IpFamily::kIpv4));
  const bool ipv6_parsed =
      errors.assign(port.ipv6, fields.optionalAddress("ipv6", IpFamily::kIpv6));
  const bool addresses_parsed = ipv4_parsed && ipv6_parsed;
  if (addresses_parsed && !port.ipv4 && !port.ipv6) {
    errors.record(fields.self().error("a port needs an ipv4 or an ipv6 address, or both"));
  }
  const bool next_hop_parsed =
      errors.assign(port.gateway, fields.optionalAddress("gateway", std::nullopt)) &&
      errors.assign(port.gateway_mac, fields.optionalMac("gateway_mac"));
  errors.assign(port.learn_announcements, fields.boolean("learn_announcements", false));
  if (next_hop_parsed && port.gateway && port.gateway_mac) {
    errors.record(fields.site("gateway_mac")
                      .error("give gateway (resolved by ARP/ND) or gateway_mac, not both"));
  }
  if (next_hop_parsed && addresses_parsed && port.gateway &&
      !(port.gateway->isV4() ? port.ipv4 : port.ipv6)) {
    errors.record(fields.site("gateway").error(
        absl::StrCat("the port has no IPv", port.gateway->isV4() ? 4 : 6, " address to reach ",
                     port.gateway->toString(), " from")));
  }
  // 68 is the least MTU IPv4 allows; 9600 covers the jumbo frames of common NICs.
  if (errors.assign(port.mtu, fields.integer("mtu", 68, 9600, 1500)) && port.ipv6 &&
      port.mtu < 1280) {
    errors.record(fields.site("mtu").error(
        absl::StrCat(port.mtu, " is below 1280, the least MTU IPv6 allows")));
  }
  // RTE_MAX_QUEUES_PER_PORT in DPDK's default build.
  errors.assign(port.queues, fields.integer("queues", 1, 1024, 0));
  // 64 is below what any PMD takes; 32768 is the most of any common NIC (ice, mlx5).
  errors.assign(port.rx_descriptors, fields.integer("rx_descriptors", 64, 32768, 1024));
  errors.assign(port.tx_descriptors, fields.integer("tx_descriptors", 64, 32768, 1024));
  // 2^24: 32 GiB of 2 KiB mbufs, beyond any one port's need.
  errors.assign(port.mbufs, fields.integer("mbufs", 64, 1u << 24, 0));
  errors.assign(port.checksum_offload, fields.boolean("checksum_offload", true));
  errors.record(parseRssKey(fields, port));
  errors.record(parsePeerRss(source, fields, port));
  errors.record(parseSnat(fields, port));
  if (const YAML::Node* exception = fields.find("exception");
      exception != nullptr && !exception->IsNull()) {
    errors.assign(port.exception, parseException(source, fields.pathOf("exception"), *exception));
  }
  if (!errors.empty()) return errors.status();
  return port;
}

// `port` shares its device with the earlier ports from `first` on: it must be on another VLAN
// than each, and give the device's settings as the first does.
absl::Status checkSharedDevice(const ErrorSite& site, const std::vector<PortConfig>& ports,
                               size_t first, const PortConfig& port) {
  auto vlanText = [](uint16_t vlan) {
    return vlan == 0 ? std::string("untagged") : absl::StrCat("VLAN ", vlan);
  };
  for (size_t other = first; other < ports.size(); ++other) {
    if (ports[other].device == port.device && ports[other].vlan == port.vlan) {
      return site.error(absl::StrCat("device '", port.device, "' ", vlanText(port.vlan),
                                     " is already port '", ports[other].name,
                                     "'; ports on one device need different `vlan`s"));
    }
  }
  const PortConfig& owner = ports[first];
  if (port.queues != owner.queues) {
    return site.error(absl::StrCat("queues: ", port.queues, " differs from port '", owner.name,
                                   "' (", owner.queues,
                                   ") on the same device; queues are the "
                                   "device's, give them alike"));
  }
  if (port.rx_descriptors != owner.rx_descriptors || port.tx_descriptors != owner.tx_descriptors) {
    return site.error(absl::StrCat("rx_descriptors and tx_descriptors differ from port '",
                                   owner.name,
                                   "' on the same device; they are the device's, "
                                   "give them alike"));
  }
  if (port.mbufs != owner.mbufs || port.checksum_offload != owner.checksum_offload) {
    return site.error(absl::StrCat("mbufs and checksum_offload differ from port '", owner.name,
                                   "' on the same device; they are the device's, give them alike"));
  }
  if (port.rss_key != owner.rss_key || port.rss_key_bytes != owner.rss_key_bytes ||
      port.peer_rss != owner.peer_rss) {
    return site.error(absl::StrCat("rss_key or peer_rss differs from port '", owner.name,
                                   "' on the same device; the key is the device's, give it alike"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConntrackConfig> parseConntrack(absl::string_view source, const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields,
                         Fields::read(source, "dataplane.conntrack", node,
                                      {"entries_per_core", "max_inserts_per_sec",
                                       "nat_sessions_per_core", "timeouts"}));
  ConntrackConfig conntrack;
  // 4 to 2^28 per core: 32 bytes each, so up to 8 GiB.
  BERTH_ASSIGN_OR_RETURN(conntrack.entries_per_core,
                         fields.integer("entries_per_core", 4, int64_t{1} << 28, 1 << 20));
  BERTH_ASSIGN_OR_RETURN(conntrack.max_inserts_per_sec,
                         fields.integer("max_inserts_per_sec", 0, 1'000'000'000, 0));
  // 64 to 2^26 per core: about 192 bytes each, so up to 12 GiB.
  BERTH_ASSIGN_OR_RETURN(conntrack.nat_sessions_per_core,
                         fields.integer("nat_sessions_per_core", 64, int64_t{1} << 26,
                                        conntrack.nat_sessions_per_core));
  const YAML::Node* timeouts = fields.find("timeouts");
  if (timeouts == nullptr || timeouts->IsNull()) return conntrack;
  BERTH_ASSIGN_OR_RETURN(const Fields timeout_fields,
                         Fields::read(source, "dataplane.conntrack.timeouts", *timeouts,
                                      {"tcp_established", "tcp_opening", "tcp_closing", "udp"}));
  // Seconds, 1 s to a day: the table keeps times in milliseconds that wrap after 49 days.
  constexpr int64_t kDay = 86'400;
  BERTH_ASSIGN_OR_RETURN(conntrack.tcp_established_s,
                         timeout_fields.integer("tcp_established", 1, kDay, 300));
  BERTH_ASSIGN_OR_RETURN(conntrack.tcp_opening_s,
                         timeout_fields.integer("tcp_opening", 1, kDay, 5));
  BERTH_ASSIGN_OR_RETURN(conntrack.tcp_closing_s,
                         timeout_fields.integer("tcp_closing", 1, kDay, 10));
  BERTH_ASSIGN_OR_RETURN(conntrack.udp_s, timeout_fields.integer("udp", 1, kDay, 30));
  return conntrack;
}

absl::StatusOr<IdleConfig> parseIdle(absl::string_view source, const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, "dataplane.idle", node,
                                                           {"after_empty_polls", "max_sleep_us"}));
  IdleConfig idle;
  BERTH_ASSIGN_OR_RETURN(idle.after_empty_polls,
                         fields.integer("after_empty_polls", 1, 100'000'000, 1000));
  // Up to 10 ms: a sleeping worker holds back what it has to send to the kernel, and the RCU
  // reclaim of replaced snapshots, no longer than that.
  BERTH_ASSIGN_OR_RETURN(idle.max_sleep_us, fields.integer("max_sleep_us", 1, 10'000, 100));
  return idle;
}

absl::StatusOr<IcmpConfig> parseIcmp(absl::string_view source, const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(
      const Fields fields,
      Fields::read(source, "dataplane.icmp", node, {"too_big_per_second", "too_big_burst"}));
  IcmpConfig icmp;
  BERTH_ASSIGN_OR_RETURN(icmp.too_big_per_second,
                         fields.integer("too_big_per_second", 1, 100'000'000, 1000));
  BERTH_ASSIGN_OR_RETURN(icmp.too_big_burst, fields.integer("too_big_burst", 1, 100'000'000, 100));
  return icmp;
}

absl::StatusOr<NeighborConfig> parseNeighbors(absl::string_view source, const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, "dataplane.neighbors", node,
                                                           {"lock_time", "refresh_interval",
                                                            "request_timeout", "refresh_retries"}));
  NeighborConfig neighbors;
  BERTH_ASSIGN_OR_RETURN(neighbors.lock_time_ms,
                         fields.milliseconds("lock_time", 0, 3600, neighbors.lock_time_ms));
  BERTH_ASSIGN_OR_RETURN(
      neighbors.request_timeout_ms,
      fields.milliseconds("request_timeout", 0.01, 60, neighbors.request_timeout_ms));
  BERTH_ASSIGN_OR_RETURN(
      neighbors.refresh_interval_ms,
      fields.milliseconds("refresh_interval", 0.1, 86400, neighbors.refresh_interval_ms));
  if (neighbors.refresh_interval_ms <= neighbors.request_timeout_ms) {
    return fields.site("refresh_interval")
        .error(absl::StrFormat("must be longer than request_timeout (%.3f s): a refresh waits "
                               "that long for its answer",
                               neighbors.request_timeout_ms / 1000.0));
  }
  BERTH_ASSIGN_OR_RETURN(neighbors.refresh_retries,
                         fields.integer("refresh_retries", 0, 100, neighbors.refresh_retries));
  return neighbors;
}

absl::StatusOr<DataplaneConfig> parseDataplane(absl::string_view source, const YAML::Node& node) {
  ErrorList errors;
  BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, "dataplane", node,
                                                           {"eal", "ports", "conntrack", "icmp",
                                                            "neighbors", "strict_numa", "idle"},
                                                           errors));
  DataplaneConfig dataplane;
  if (errors.assign(dataplane.eal, fields.stringList("eal"))) {
    for (const std::string& problem : ealArgumentProblems(dataplane.eal)) {
      errors.record(fields.site("eal").error(problem));
    }
  }
  errors.assign(dataplane.strict_numa, fields.boolean("strict_numa", false));
  if (const YAML::Node* conntrack = fields.find("conntrack");
      conntrack != nullptr && !conntrack->IsNull()) {
    errors.assign(dataplane.conntrack, parseConntrack(source, *conntrack));
  }
  if (const YAML::Node* idle = fields.find("idle"); idle != nullptr) {
    // `idle:` alone turns it on with the defaults.
    errors.assign(dataplane.idle, idle->IsNull() ? IdleConfig{} : parseIdle(source, *idle));
  }
  if (const YAML::Node* icmp = fields.find("icmp"); icmp != nullptr && !icmp->IsNull()) {
    errors.assign(dataplane.icmp, parseIcmp(source, *icmp));
  }
  if (const YAML::Node* neighbors = fields.find("neighbors");
      neighbors != nullptr && !neighbors->IsNull()) {
    errors.assign(dataplane.neighbors, parseNeighbors(source, *neighbors));
  }
  const YAML::Node* ports = fields.find("ports");
  if (ports == nullptr || ports->IsNull()) {
    if (!errors.empty()) return errors.status();
    return dataplane;
  }
  if (!ports->IsSequence()) {
    errors.record(fields.site("ports").error("expected a list of ports"));
    return errors.status();
  }
  absl::flat_hash_set<std::string> names;
  // The first port on each device, which the device's other ports (VLANs) must agree with.
  absl::flat_hash_map<std::string, size_t> first_on_device;
  absl::flat_hash_set<std::string> interfaces;
  absl::flat_hash_set<IpAddress> snat;
  // A Full-NAT session keeps the port its client came in on in a byte.
  if (ports->size() > 255) {
    errors.record(
        fields.site("ports").error(absl::StrCat(ports->size(), " ports; berth takes at most 255")));
    return errors.status();
  }
  for (size_t i = 0; i < ports->size(); ++i) {
    const std::string path = absl::StrCat("dataplane.ports[", i, "]");
    const YAML::Node port_node = (*ports)[i];
    absl::StatusOr<PortConfig> parsed = parsePort(source, path, port_node, dataplane.eal);
    if (!errors.record(parsed.status())) continue;
    PortConfig& port = *parsed;
    const ErrorSite site(source, path, port_node.Mark());
    if (!names.insert(port.name).second) {
      errors.record(site.error(absl::StrCat("duplicate port name '", port.name, "'")));
      continue;
    }
    if (auto first = first_on_device.find(port.device);
        first != first_on_device.end() &&
        !errors.record(checkSharedDevice(site, dataplane.ports, first->second, port))) {
      continue;
    }
    if (const auto taken =
            absl::c_find_if(port.snat_addresses,
                            [&](const IpAddress& address) { return !snat.insert(address).second; });
        taken != port.snat_addresses.end()) {
      errors.record(site.error(
          absl::StrCat("snat address ", taken->toString(), " is already another port's")));
      continue;
    }
    if (port.exception && !interfaces.insert(port.exception->name).second) {
      errors.record(site.error(absl::StrCat("exception interface '", port.exception->name,
                                            "' is already another port's")));
      continue;
    }
    first_on_device.try_emplace(port.device, dataplane.ports.size());
    dataplane.ports.push_back(std::move(port));
  }
  // An egress may name a port further down the list; a port that did not parse is no error
  // twice.
  if (!errors.empty()) return errors.status();
  for (size_t i = 0; i < dataplane.ports.size(); ++i) {
    const std::string& egress = dataplane.ports[i].egress;
    if (egress.empty() || names.contains(egress)) continue;
    errors.record(ErrorSite(source, absl::StrCat("dataplane.ports[", i, "].egress"),
                            (*ports)[i]["egress"].Mark())
                      .error(absl::StrCat("no port named '", egress, "'")));
  }
  if (!errors.empty()) return errors.status();
  return dataplane;
}

absl::StatusOr<MetricsConfig> parseMetrics(absl::string_view source, const YAML::Node& node,
                                           std::vector<std::string>& warnings) {
  MetricsConfig metrics;
  std::string listen = kDefaultMetricsListen;
  if (!node.IsNull()) {
    BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source, "metrics", node, {"listen"}));
    if (fields.has("listen")) {
      BERTH_ASSIGN_OR_RETURN(listen, fields.requiredString("listen"));
    }
    absl::StatusOr<Endpoint> endpoint = Endpoint::parse(listen);
    if (!endpoint.ok()) return fields.site("listen").error(endpoint.status().message());
    if (!endpoint->address.isLoopback()) {
      warnings.push_back(fields.site("listen").warning(
          "serves metrics beyond this host, unauthenticated; put a firewall in front of it"));
    }
    metrics.listen = *endpoint;
    return metrics;
  }
  metrics.listen = *Endpoint::parse(listen);
  return metrics;
}

absl::StatusOr<BgpConfig> parseBgp(absl::string_view source, const YAML::Node& node,
                                   const DataplaneConfig& dataplane) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields,
                         Fields::read(source, "bgp", node,
                                      {"asn", "router_id", "port", "neighbors", "hold_time",
                                       "forward_after_withdrawal"}));
  BgpConfig bgp;
  bgp.line.number = fields.self().line();
  BERTH_ASSIGN_OR_RETURN(bgp.asn, fields.integer("asn", 1, UINT32_MAX, std::nullopt));
  BERTH_ASSIGN_OR_RETURN(bgp.router_id, fields.address("router_id"));
  if (!bgp.router_id.isV4()) return fields.site("router_id").error("must be an IPv4 address");
  BERTH_ASSIGN_OR_RETURN(bgp.port, fields.requiredString("port"));
  if (std::none_of(dataplane.ports.begin(), dataplane.ports.end(),
                   [&](const PortConfig& port) { return port.name == bgp.port; })) {
    return fields.site("port").error(
        absl::StrCat("no port named '", bgp.port, "' in dataplane.ports"));
  }
  // BGP allows 0 (no keepalives at all) or 3 s and more; berth needs a hold time to be safe.
  BERTH_ASSIGN_OR_RETURN(bgp.hold_time_s, fields.integer("hold_time", 3, 65535, 9));
  BERTH_ASSIGN_OR_RETURN(
      bgp.forward_after_withdrawal_ms,
      fields.milliseconds("forward_after_withdrawal", 0, 60, bgp.forward_after_withdrawal_ms));
  const YAML::Node* neighbors = fields.find("neighbors");
  if (neighbors == nullptr || !neighbors->IsSequence() || neighbors->size() == 0) {
    return (neighbors == nullptr ? fields.self() : fields.site("neighbors"))
        .error("needs a list of neighbors, each { address, asn }");
  }
  for (size_t i = 0; i < neighbors->size(); ++i) {
    const std::string path = absl::StrCat(fields.pathOf("neighbors"), "[", i, "]");
    BERTH_ASSIGN_OR_RETURN(const Fields neighbor_fields,
                           Fields::read(source, path, (*neighbors)[i], {"address", "asn"}));
    BgpNeighbor neighbor;
    neighbor.line.number = neighbor_fields.self().line();
    BERTH_ASSIGN_OR_RETURN(neighbor.address, neighbor_fields.address("address"));
    BERTH_ASSIGN_OR_RETURN(neighbor.asn,
                           neighbor_fields.integer("asn", 1, UINT32_MAX, std::nullopt));
    bgp.neighbors.push_back(neighbor);
  }
  return bgp;
}

// A service announced over BGP needs the bgp section, and a next hop of its VIP's IP version.
absl::Status checkBgpAnnouncements(absl::string_view source, const Config& config,
                                   const YAML::Node& services) {
  for (size_t i = 0; i < config.services.size(); ++i) {
    const ServiceConfig& service = config.services[i];
    if (!service.announce_bgp) continue;
    const ErrorSite site(source, absl::StrCat("services[", i, "].announce"),
                         services[i]["announce"].Mark());
    if (!config.bgp) return site.error("announce: bgp needs a top-level bgp section");
    if (!config.bgp->nextHopFor(service.vip.family, config.dataplane)) {
      return site.error(absl::StrCat("bgp.port '", config.bgp->port, "' has no IPv",
                                     service.vip.isV4() ? 4 : 6, " address to be the next hop of ",
                                     service.vip.toString()));
    }
  }
  return absl::OkStatus();
}

// An encapsulated packet leaves from a port address of the backend's IP version, so some port
// must have one. Checked only when ports are configured (berthctl reads configs without them).
// A fullnat service needs local addresses of its IP version where its traffic leaves, a VIP
// that is no port's local address, and a gateway to send the replies to its clients through
// (docs/fullnat.md).
absl::Status checkFullNatService(const ErrorSite& site, const DataplaneConfig& dataplane,
                                 const ServiceConfig& service) {
  // The backends' IP versions (the VIP's when there is none yet): an IPv6 VIP's IPv4 backends
  // (NAT64) take IPv4 local addresses.
  std::vector<IpFamily> families;
  for (const BackendConfig& backend : service.backends) {
    if (!absl::c_linear_search(families, backend.address.family)) {
      families.push_back(backend.address.family);
    }
  }
  if (families.empty()) families.push_back(service.vip.family);
  bool has_gateway = false;
  for (const PortConfig& port : dataplane.ports) {
    if (absl::c_linear_search(port.snat_addresses, service.vip)) {
      return site.error(absl::StrCat("the VIP ", service.vip.toString(), " is port '", port.name,
                                     "''s snat address"));
    }
    if (port.gateway || port.gateway_mac) has_gateway = true;
  }
  for (const IpFamily family : families) {
    const bool has_local_address = absl::c_any_of(dataplane.ports, [&](const PortConfig& port) {
      return (service.egress.empty() || service.egress == port.name) &&
             !port.snatAddressesOf(family).empty();
    });
    if (!has_local_address) {
      return site.error(
          absl::StrCat("forwarding: fullnat needs snat_addresses of IPv",
                       family == IpFamily::kIpv4 ? 4 : 6, " on ",
                       service.egress.empty() ? std::string("the port its traffic leaves through")
                                              : absl::StrCat("port '", service.egress, "'"),
                       family != service.vip.family ? " for its IPv4 backends (NAT64)" : ""));
    }
  }
  if (!has_gateway) {
    return site.error(
        "forwarding: fullnat sends the backends' replies to the clients through the receiving "
        "port's gateway, and no port has a gateway or gateway_mac");
  }
  return absl::OkStatus();
}

// Where a fullnat service's probes come from (docs/fullnat.md): a local address, so that a
// backend that cannot route back to the pool fails its check as its connections would. They leave
// through the kernel interface of the port `via` names, or by default of the first port with
// local addresses of the backend's IP version (the service's egress, where it names one), from
// its first such address, on the ports just below its pool. Without a kernel interface to send
// them through, they come from the host and the loader says so.
absl::Status sourceFullNatProbes(absl::string_view source, Config& config,
                                 const YAML::Node& services) {
  const std::vector<PortConfig>& ports = config.dataplane.ports;
  for (size_t i = 0; i < config.services.size(); ++i) {
    ServiceConfig& service = config.services[i];
    if (service.forwarding != Forwarding::kFullNat) continue;
    const YAML::Node node = services[i];
    // Where `via` is set for the backend: its own health section, the service's, or neither.
    auto siteOf = [&](size_t b) {
      const YAML::Node own = node["backends"][b]["health"];
      if (own.IsDefined() && own.IsMap() && own["via"]) {
        return ErrorSite(source, absl::StrCat("services[", i, "].backends[", b, "].health.via"),
                         own["via"].Mark());
      }
      const YAML::Node shared = node["health"];
      if (shared.IsDefined() && shared.IsMap() && shared["via"]) {
        return ErrorSite(source, absl::StrCat("services[", i, "].health.via"),
                         shared["via"].Mark());
      }
      return ErrorSite(source, absl::StrCat("services[", i, "]"), node.Mark());
    };
    bool warned = false;
    for (size_t b = 0; b < service.backends.size(); ++b) {
      BackendConfig& backend = service.backends[b];
      const ErrorSite site = siteOf(b);
      HealthCheckConfig& check = backend.health;
      if (check.type == HealthCheckType::kNone) continue;
      check.proxy_header = service.proxy_protocol;
      const IpFamily family = backend.address.family;
      const int version = family == IpFamily::kIpv4 ? 4 : 6;
      auto port = ports.end();
      if (!check.interface.empty()) {
        port = absl::c_find_if(ports, [&](const PortConfig& candidate) {
          return candidate.exception && candidate.exception->name == check.interface;
        });
        if (port == ports.end() || port->snatAddressesOf(family).empty()) {
          return site.error(absl::StrCat("service '", service.name,
                                         "' is fullnat, so its probes come from a local address: ",
                                         "the port they go through needs snat_addresses of IPv",
                                         version, " (", backend.name, " is IPv", version, ")"));
        }
      } else {
        port = absl::c_find_if(ports, [&](const PortConfig& candidate) {
          return (service.egress.empty() || service.egress == candidate.name) &&
                 !candidate.snatAddressesOf(family).empty();
        });
        if (port == ports.end()) continue;  // checkFullNatService has refused this already
        if (!port->exception) {
          if (!warned) {
            config.warnings.push_back(site.warning(absl::StrCat(
                "service '", service.name, "' is fullnat, but port '", port->name,
                "' has no exception interface to send its health probes from a local address: ",
                "they leave from the host and cannot tell whether a backend routes back to the "
                "pool (docs/fullnat.md)")));
            warned = true;
          }
          continue;
        }
        check.interface = port->exception->name;
      }
      if (port->snat_first_port <= PortConfig::kProbeSourcePorts) {
        return site.error(absl::StrCat(
            "service '", service.name, "''s probes take the ", PortConfig::kProbeSourcePorts,
            " ports just below port '", port->name, "''s snat_ports, which start at ",
            port->snat_first_port, ": start them above ", PortConfig::kProbeSourcePorts));
      }
      check.source = port->snatAddressesOf(family).front();
      check.source_ports = PortConfig::kProbeSourcePorts;
      check.source_first_port =
          static_cast<uint16_t>(port->snat_first_port - PortConfig::kProbeSourcePorts);
    }
  }
  return absl::OkStatus();
}

absl::Status checkServicesReachable(absl::string_view source, const Config& config,
                                    const YAML::Node& services) {
  if (config.dataplane.ports.empty()) return absl::OkStatus();
  bool has_v4 = false;
  bool has_v6 = false;
  for (const PortConfig& port : config.dataplane.ports) {
    has_v4 |= port.ipv4.has_value();
    has_v6 |= port.ipv6.has_value();
  }
  for (size_t i = 0; i < config.services.size(); ++i) {
    const ServiceConfig& service = config.services[i];
    for (size_t j = 0; j < service.backends.size(); ++j) {
      const BackendConfig& backend = service.backends[j];
      if (backend.address.isV4() ? has_v4 : has_v6) continue;
      return ErrorSite(source, absl::StrCat("services[", i, "].backends[", j, "]"),
                       services[i]["backends"][j].Mark())
          .error(absl::StrCat("no port has an IPv", backend.address.isV4() ? 4 : 6,
                              " address to send to ", backend.address.toString(), " from"));
    }
    if (service.forwarding == Forwarding::kFullNat) {
      BERTH_RETURN_IF_ERROR(checkFullNatService(
          ErrorSite(source, absl::StrCat("services[", i, "]"), services[i].Mark()),
          config.dataplane, service));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> loadYaml(absl::string_view yaml_text, absl::string_view source_name,
                                    absl::string_view expected) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return ErrorSite(source_name, "yaml", e.mark).error(e.msg);
  }
  if (root.IsNull()) {
    return ErrorSite(source_name, "config", root.Mark())
        .error(absl::StrCat("is empty; expected a map with ", expected));
  }
  return root;
}

// An etcd client URL: http:// or https://, a host and a port.
absl::Status checkEndpoint(const ErrorSite& site, const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    return site.error(absl::StrCat("'", url, "' is not an http:// or https:// URL"));
  }
  const size_t colon = rest.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port == 0 || port > 65535 ||
      rest.find('/') != absl::string_view::npos) {
    return site.error(absl::StrCat("'", url, "' needs a host and a port, as http://HOST:2379"));
  }
  return absl::OkStatus();
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "berth";
  return name;
}

absl::StatusOr<FleetConfig> parseFleet(absl::string_view source, const YAML::Node& node) {
  BERTH_ASSIGN_OR_RETURN(const Fields fields,
                         Fields::read(source, "fleet", node,
                                      {"endpoints", "prefix", "name", "ca", "cert", "key",
                                       "keep_versions", "cache", "lease_ttl_s", "health_quorum"}));
  FleetConfig fleet;
  fleet.line.number = fields.self().line();
  BERTH_ASSIGN_OR_RETURN(fleet.endpoints, fields.stringList("endpoints"));
  if (fleet.endpoints.empty()) {
    return (fields.has("endpoints") ? fields.site("endpoints") : fields.self())
        .error("needs at least one etcd endpoint, as endpoints: [\"http://127.0.0.1:2379\"]");
  }
  const bool tls = absl::StartsWith(fleet.endpoints[0], "https://");
  for (size_t i = 0; i < fleet.endpoints.size(); ++i) {
    const ErrorSite site(source, absl::StrCat("fleet.endpoints[", i, "]"),
                         (*fields.find("endpoints"))[i].Mark());
    BERTH_RETURN_IF_ERROR(checkEndpoint(site, fleet.endpoints[i]));
    if (absl::StartsWith(fleet.endpoints[i], "https://") != tls) {
      return site.error("mixes http:// and https://; every endpoint of one etcd speaks the same");
    }
  }
  if (fields.has("prefix")) {
    BERTH_ASSIGN_OR_RETURN(fleet.prefix, fields.requiredString("prefix"));
    if (fleet.prefix[0] != '/' || fleet.prefix.size() < 2 || fleet.prefix.back() == '/' ||
        absl::c_any_of(fleet.prefix, [](char c) { return c <= ' ' || c > '~'; })) {
      return fields.site("prefix").error(
          "must start with '/', not end with one, and hold printable characters without spaces");
    }
  }
  if (fields.has("name")) {
    BERTH_ASSIGN_OR_RETURN(fleet.name, fields.requiredString("name"));
  } else {
    fleet.name = hostName();
  }
  if (fleet.name.size() > 64 || absl::c_any_of(fleet.name, [](char c) {
        return !absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
               c != '.';
      })) {
    return (fields.has("name") ? fields.site("name") : fields.self())
        .error(absl::StrCat("instance name '", fleet.name,
                            "' must be 1 to 64 letters, digits, '-', '_' or '.'"));
  }
  for (auto [key, value] :
       {std::pair{"ca", &fleet.ca}, std::pair{"cert", &fleet.cert}, std::pair{"key", &fleet.key}}) {
    if (!fields.has(key)) continue;
    BERTH_ASSIGN_OR_RETURN(*value, fields.requiredString(key));
    if (!tls) return fields.site(key).error("applies only with https:// endpoints");
  }
  if (fleet.cert.empty() != fleet.key.empty()) {
    return fields.site(fleet.cert.empty() ? "key" : "cert").error("cert and key go together");
  }
  BERTH_ASSIGN_OR_RETURN(fleet.keep_versions, fields.integer("keep_versions", 1, 1000, 10));
  if (fields.has("cache")) {
    BERTH_ASSIGN_OR_RETURN(fleet.cache, fields.requiredString("cache"));
  }
  BERTH_ASSIGN_OR_RETURN(fleet.lease_ttl_s, fields.integer("lease_ttl_s", 2, 300, 10));
  BERTH_ASSIGN_OR_RETURN(fleet.health_quorum, fields.integer("health_quorum", 0, 1000, 0));
  return fleet;
}

absl::StatusOr<SyncConfig> parseSync(absl::string_view source, const YAML::Node& node,
                                     bool in_fleet) {
  BERTH_ASSIGN_OR_RETURN(
      const Fields fields,
      Fields::read(source, "sync", node,
                   {"listen", "peers", "keys", "max_records", "max_changes_per_second"}));
  SyncConfig sync;
  sync.line.number = fields.self().line();
  BERTH_ASSIGN_OR_RETURN(const std::string listen, fields.requiredString("listen"));
  absl::StatusOr<Endpoint> endpoint = Endpoint::parse(listen);
  if (!endpoint.ok()) return fields.site("listen").error(endpoint.status().message());
  if (endpoint->port == 0) return fields.site("listen").error("needs a port other than 0");
  sync.listen = *endpoint;
  BERTH_ASSIGN_OR_RETURN(const std::vector<std::string> peers, fields.stringList("peers"));
  for (size_t i = 0; i < peers.size(); ++i) {
    const ErrorSite site(source, absl::StrCat("sync.peers[", i, "]"),
                         (*fields.find("peers"))[i].Mark());
    absl::StatusOr<Endpoint> peer = Endpoint::parse(peers[i]);
    if (!peer.ok()) return site.error(peer.status().message());
    if (peer->port == 0) return site.error("needs a port other than 0");
    if (peer->address.family != sync.listen.address.family) {
      return site.error("is of another IP version than sync.listen, which sends to it");
    }
    if (*peer == sync.listen) return site.error("is this instance's own sync.listen");
    sync.peers.push_back(*peer);
  }
  if (sync.peers.empty() && !in_fleet) {
    return (fields.has("peers") ? fields.site("peers") : fields.self())
        .error(
            "needs peers: a list of the other instances' sync endpoints, as ADDRESS:PORT, or a "
            "fleet section, whose instances are the peers");
  }
  const YAML::Node* keys = fields.find("keys");
  if (keys == nullptr || !keys->IsSequence() || keys->size() == 0 || keys->size() > 2) {
    return (keys == nullptr ? fields.self() : fields.site("keys"))
        .error("needs one or two keys, each { id, file }: the first signs, either is accepted");
  }
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string path = absl::StrCat(fields.pathOf("keys"), "[", i, "]");
    BERTH_ASSIGN_OR_RETURN(const Fields key_fields,
                           Fields::read(source, path, (*keys)[i], {"id", "file"}));
    SyncKeyConfig key;
    key.line.number = key_fields.self().line();
    BERTH_ASSIGN_OR_RETURN(key.id, key_fields.integer("id", 1, 255, std::nullopt));
    BERTH_ASSIGN_OR_RETURN(key.file, key_fields.requiredString("file"));
    if (!sync.keys.empty() && sync.keys[0].id == key.id) {
      return key_fields.site("id").error("is the other key's id too: a rotation needs two ids");
    }
    sync.keys.push_back(std::move(key));
  }
  BERTH_ASSIGN_OR_RETURN(sync.max_records,
                         fields.integer("max_records", 1, 16 << 20, sync.max_records));
  BERTH_ASSIGN_OR_RETURN(
      sync.max_changes_per_second,
      fields.integer("max_changes_per_second", 0, 10'000'000, sync.max_changes_per_second));
  return sync;
}

// The per-instance sections of `fields` into `config`: dataplane, metrics, bgp, fleet and sync.
// Each section's errors are recorded and the next section read all the same; bgp, which checks
// its addresses against the ports, only once the dataplane parsed.
absl::Status parseLocalSections(absl::string_view source_name, const Fields& fields,
                                Config& config) {
  ErrorList errors;
  bool dataplane_parsed = true;
  if (const YAML::Node* dataplane = fields.find("dataplane"); dataplane != nullptr) {
    dataplane_parsed = errors.assign(config.dataplane, parseDataplane(source_name, *dataplane));
  }
  if (const YAML::Node* metrics = fields.find("metrics"); metrics != nullptr) {
    errors.assign(config.metrics, parseMetrics(source_name, *metrics, config.warnings));
  }
  if (const YAML::Node* bgp = fields.find("bgp"); bgp != nullptr && dataplane_parsed) {
    if (errors.assign(config.bgp, parseBgp(source_name, *bgp, config.dataplane))) {
      for (const BgpNeighbor& neighbor : config.bgp->neighbors) {
        config.dataplane.bgp_peers.push_back(neighbor.address);
      }
    }
  }
  if (const YAML::Node* fleet = fields.find("fleet"); fleet != nullptr) {
    errors.assign(config.fleet, parseFleet(source_name, *fleet));
  }
  if (const YAML::Node* sync = fields.find("sync"); sync != nullptr) {
    if (errors.assign(config.sync, parseSync(source_name, *sync, config.fleet.has_value()))) {
      config.dataplane.sync_port = config.sync->listen.port;
      for (const Endpoint& peer : config.sync->peers) {
        config.dataplane.sync_peers.push_back(peer.address);
      }
    }
  }
  return errors.status();
}

// `services` (a list, or null for none) into config.services: names and listeners, and with
// `local_known`, against config's dataplane and bgp sections (ports, reachability and
// announcements).
absl::Status parseServices(absl::string_view source_name, const Fields& fields, bool local_known,
                           Config& config) {
  const YAML::Node* services = fields.find("services");
  if (services == nullptr) return fields.self().error("missing required key 'services'");
  if (!services->IsSequence() && !services->IsNull()) {
    return fields.site("services").error("expected a list of services");
  }
  ErrorList errors;
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_map<std::tuple<IpAddress, uint16_t, Protocol>, std::string> listeners;
  for (size_t i = 0; i < services->size(); ++i) {
    const std::string path = absl::StrCat("services[", i, "]");
    const YAML::Node node = (*services)[i];
    absl::StatusOr<ServiceConfig> parsed =
        parseService(source_name, path, node, local_known ? &config.dataplane : nullptr,
                     config.warnings, config.notes);
    if (!errors.record(parsed.status())) continue;
    ServiceConfig& service = *parsed;
    const ErrorSite site(source_name, path, node.Mark());
    if (!names.insert(service.name).second) {
      errors.record(site.error(absl::StrCat("duplicate service name '", service.name, "'")));
      continue;
    }
    auto [it, inserted] =
        listeners.emplace(std::tuple(service.vip, service.port, service.protocol), service.name);
    if (!inserted) {
      errors.record(site.error(absl::StrCat(toString(service.protocol), " ", service.vip.toString(),
                                            ":", service.port, " is already served by service '",
                                            it->second, "'")));
      continue;
    }
    config.services.push_back(std::move(service));
  }
  // What follows matches services to their list entries by position.
  if (!errors.empty()) return errors.status();
  if (!local_known) return absl::OkStatus();
  BERTH_RETURN_IF_ERROR(checkServicesReachable(source_name, config, *services));
  if (!config.dataplane.ports.empty()) {
    BERTH_RETURN_IF_ERROR(sourceFullNatProbes(source_name, config, *services));
  }
  return checkBgpAnnouncements(source_name, config, *services);
}

constexpr std::initializer_list<absl::string_view> kTopLevelKeys = {
    "dataplane", "services", "metrics", "bgp", "fleet", "sync"};

absl::StatusOr<Config> parseFleetServices(const Config& local, bool local_known,
                                          absl::string_view fleet_text,
                                          absl::string_view source_name) {
  BERTH_ASSIGN_OR_RETURN(const YAML::Node root,
                         loadYaml(fleet_text, source_name, "'services' alone"));
  Config config = local;
  config.services.clear();
  config.source_crc32c = crc32cPortable(local.source_crc32c, fleet_text.data(), fleet_text.size());
  try {
    if (root.IsMap()) {
      for (auto it = root.begin(); it != root.end(); ++it) {
        const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
        if (key == "services" || absl::c_find(kTopLevelKeys, key) == kTopLevelKeys.end()) continue;
        return ErrorSite(source_name, key, it->first.Mark())
            .error(
                "is per instance, set in each instance's own file: a fleet version carries "
                "services alone");
      }
    }
    BERTH_ASSIGN_OR_RETURN(const Fields fields, Fields::read(source_name, "", root, {"services"}));
    BERTH_RETURN_IF_ERROR(parseServices(source_name, fields, local_known, config));
  } catch (const YAML::Exception& e) {
    return ErrorSite(source_name, "yaml", e.mark).error(e.msg);
  }
  return config;
}

}  // namespace

absl::StatusOr<Config> parseConfig(absl::string_view yaml_text, absl::string_view source_name) {
  BERTH_ASSIGN_OR_RETURN(const YAML::Node root, loadYaml(yaml_text, source_name, "'services'"));
  Config config;
  config.source_crc32c = crc32cPortable(0, yaml_text.data(), yaml_text.size());
  try {
    ErrorList errors;
    BERTH_ASSIGN_OR_RETURN(const Fields fields,
                           Fields::read(source_name, "", root, kTopLevelKeys, errors));
    // The services are checked against the per-instance sections where those parsed, and on
    // their own otherwise, so that one pass finds the errors of both.
    const bool local_parsed = errors.record(parseLocalSections(source_name, fields, config));
    if (config.fleet) {
      // One source of truth for what decides the tables: the fleet's versions.
      if (fields.has("services")) {
        errors.record(fields.site("services")
                          .error("comes from the fleet when the config has a fleet section: push "
                                 "services with `berthctl fleet push FILE`, and keep dataplane, "
                                 "metrics, bgp, fleet and sync here"));
      }
    } else {
      errors.record(parseServices(source_name, fields, local_parsed, config));
    }
    if (!errors.empty()) return errors.status();
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed trees while they are walked; report, never escape.
    return ErrorSite(source_name, "yaml", e.mark).error(e.msg);
  }
  return config;
}

absl::StatusOr<Config> parseFleetVersion(absl::string_view yaml_text,
                                         absl::string_view source_name) {
  return parseFleetServices(Config{}, false, yaml_text, source_name);
}

absl::StatusOr<Config> composeFleetConfig(const Config& local, absl::string_view fleet_text,
                                          absl::string_view source_name) {
  if (!local.fleet) {
    return absl::FailedPreconditionError("a fleet version applies only with a fleet section");
  }
  return parseFleetServices(local, true, fleet_text, source_name);
}

absl::StatusOr<Config> loadConfigFile(const std::string& path) {
  const absl::StatusOr<std::string> text = readFileWhole(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  return parseConfig(*text, path);
}

}  // namespace berth
