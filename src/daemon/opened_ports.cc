#include "berth/daemon/opened_ports.h"

#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <algorithm>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/config/drivers.h"
#include "berth/control/numa_check.h"
#include "berth/dataplane/frame.h"
#include "berth/dataplane/snapshot.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// How often every device's statistics are read, off the loop.
constexpr absl::Duration kPortStatsInterval = absl::Seconds(1);

const char* rssKeyText(RssKeyKind key) {
  switch (key) {
    case RssKeyKind::kRandom:
      return "on (random Toeplitz key)";
    case RssKeyKind::kSymmetric:
      return "on (symmetric Toeplitz key)";
    case RssKeyKind::kFixed:
      return "on (the config's Toeplitz key)";
  }
  return "on";
}

// Which outer checksums the NIC fills in and which berth writes (docs/nics.md).
std::string checksumOffloadText(uint8_t offloads, bool wanted) {
  if (!wanted) return "in software (checksum_offload: false)";
  if (offloads == 0) return "in software (the PMD offers no IPv4 or UDP checksum offload)";
  return absl::StrCat(
      "by the NIC: ",
      (offloads & kChecksumOffloadIpv4Header) ? "IPv4 header" : "IPv4 header in software",
      (offloads & kChecksumOffloadUdp) ? ", UDP (GUE over IPv6)" : ", UDP in software");
}

// Whether the descriptor counts are the driver's own or only what berth asked for.
std::string descriptorsText(const OpenedPort& port) {
  if (port.descriptors_reported) return "";
  const DriverTraits traits = driverTraits(port.driver);
  return absl::StrCat(" asked (", port.driver, " does not report the descriptors in use",
                      traits.ring_note.empty() ? "" : "; ", traits.ring_note, ")");
}

std::string vlanText(uint16_t vlan) {
  return vlan == 0 ? std::string("untagged") : absl::StrCat("VLAN ", vlan);
}

}  // namespace

absl::Status OpenedPorts::open(const std::vector<unsigned>& worker_lcores) {
  std::vector<std::string> warnings;
  const std::vector<PortConfig>& configs = config_.dataplane.ports;
  for (size_t p = 0; p < configs.size(); ++p) {
    const PortConfig& port_config = configs[p];
    // A VLAN port on a device an earlier port opened shares that port's device (docs/vlans.md).
    if (const uint32_t first = deviceOf(static_cast<uint32_t>(p)); first < p) {
      OpenedPort shared = ports_[first];
      shared.name = port_config.name;
      shared.owns_device = false;
      log_(absl::StrFormat("port '%s': %s on the device of port '%s', MTU %u", port_config.name,
                           vlanText(port_config.vlan), configs[first].name, port_config.mtu));
      macs_.push_back(shared.mac);
      checksum_offloads_.push_back(shared.checksum_offloads);
      ports_.push_back(std::move(shared));
      continue;
    }
    // The device takes the largest MTU of its ports; each port's own bounds its traffic.
    PortConfig device_config = port_config;
    for (const PortConfig& other : configs) {
      if (other.device == port_config.device) {
        device_config.mtu = std::max(device_config.mtu, other.mtu);
      }
    }
    absl::StatusOr<OpenedPort> port =
        openPort(device_config, static_cast<uint16_t>(worker_lcores.size()), warnings);
    if (!port.ok()) return port.status();
    log_(absl::StrFormat(
        "port '%s': %s, DPDK port %u, MAC %s, %u queue pair(s) of %u RX and %u TX descriptors%s, "
        "%u mbufs, RSS %s, MTU %u, NUMA socket %s, outer checksums %s%s",
        port->name, port->driver, port->port_id, port->mac.toString(), port->queues,
        port->rx_descriptors, port->tx_descriptors, descriptorsText(*port), port->pool_mbufs,
        port->rss ? rssKeyText(port_config.rss_key) : "off", device_config.mtu,
        port->socket >= 0 ? absl::StrCat(port->socket) : "unknown",
        checksumOffloadText(port->checksum_offloads, port_config.checksum_offload),
        port_config.vlan != 0 ? absl::StrCat(", ", vlanText(port_config.vlan)) : ""));
    macs_.push_back(port->mac);
    checksum_offloads_.push_back(port->checksum_offloads);
    ports_.push_back(*std::move(port));
  }
  for (const std::string& warning : warnings) log_(absl::StrCat("warning: ", warning));
  BERTH_RETURN_IF_ERROR(steerReplies());
  std::vector<OpenedPort> devices;
  for (const OpenedPort& port : ports_) {
    if (port.owns_device) devices.push_back(port);
  }
  stats_ = std::make_unique<PortStatsSampler>(
      [devices = std::move(devices)] {
        PortStatsReading reading;
        for (const OpenedPort& device : devices) reading.ports.push_back(readPortStats(device));
        return reading;
      },
      kPortStatsInterval);
  BERTH_RETURN_IF_ERROR(checkNumaPlacement(worker_lcores));
  return checkEgressQueues(config_);
}

absl::Status OpenedPorts::checkNumaPlacement(const std::vector<unsigned>& worker_lcores) {
  std::vector<PortOnSocket> ports;
  for (const OpenedPort& port : ports_) {
    if (port.owns_device) ports.push_back({port.name, port.socket, port.queues});
  }
  std::vector<WorkerOnSocket> workers;
  for (unsigned lcore : worker_lcores) {
    workers.push_back({lcore, static_cast<int>(rte_lcore_to_socket_id(lcore))});
  }
  const std::vector<std::string> lines = crossSocketPolling(ports, workers);
  if (lines.empty()) return absl::OkStatus();
  if (config_.dataplane.strict_numa) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataplane.strict_numa: ", absl::StrJoin(lines, "; ")));
  }
  for (const std::string& line : lines) log_(absl::StrCat("warning: ", line));
  return absl::OkStatus();
}

absl::Status OpenedPorts::checkEgressQueues(const Config& config) const {
  const std::vector<PortConfig>& ports = config.dataplane.ports;
  auto indexOf = [&](const std::string& name) {
    return static_cast<uint32_t>(
        absl::c_find_if(ports, [&](const PortConfig& port) { return port.name == name; }) -
        ports.begin());
  };
  // Worker w sends what it received on queue w, so the egress device needs as many queues.
  auto check = [&](uint32_t ingress, uint32_t egress, absl::string_view whose) -> absl::Status {
    const uint16_t receiving = ports_[deviceOf(ingress)].queues;
    const uint16_t sending = ports_[deviceOf(egress)].queues;
    if (sending >= receiving) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "port '%s', the egress of %s, has %u queue pair(s), fewer than the %u workers that "
        "receive on port '%s' and send through it; give it as many `queues`",
        ports[egress].name, whose, sending, receiving, ports[ingress].name));
  };
  for (uint32_t p = 0; p < ports.size(); ++p) {
    if (ports[p].egress.empty()) continue;
    BERTH_RETURN_IF_ERROR(
        check(p, indexOf(ports[p].egress), absl::StrCat("port '", ports[p].name, "'")));
  }
  for (const ServiceConfig& service : config.services) {
    if (service.egress.empty()) continue;
    for (uint32_t p = 0; p < ports.size(); ++p) {
      BERTH_RETURN_IF_ERROR(
          check(p, indexOf(service.egress), absl::StrCat("service '", service.name, "'")));
    }
  }
  return absl::OkStatus();
}

uint32_t OpenedPorts::deviceOf(uint32_t port) const {
  const std::vector<PortConfig>& configs = config_.dataplane.ports;
  for (uint32_t first = 0; first < port; ++first) {
    if (configs[first].device == configs[port].device) return first;
  }
  return port;
}

absl::Status OpenedPorts::steerReplies() {
  std::vector<RssSpread> spreads;
  for (const OpenedPort& port : ports_) spreads.push_back(port.spread);
  BERTH_ASSIGN_OR_RETURN(reply_steering_, portReplySteering(config_.dataplane, spreads));
  for (size_t p = 0; p < ports_.size(); ++p) {
    const PortConfig& config = config_.dataplane.ports[p];
    if (config.snat_addresses.empty()) continue;
    const RssSpread& spread = ports_[p].spread;
    std::string how = "no RSS: one queue takes every reply";
    if (!spread.key.empty()) {
      how = absl::StrCat("replies steered by ", config.peer_rss.key.empty() ? "" : "the peer's ",
                         "RSS over a ", spread.reta.size(), "-entry redirection table");
      if (!spread.udp4_ports || !spread.udp6_ports) {
        log_(absl::StrCat(
            "warning: port '", config.name,
            "': the device hashes UDP without its ports, so a UDP service's replies from one "
            "backend to one local address all come to one queue; each worker takes only the "
            "local addresses whose replies come to it (docs/fullnat.md)"));
      }
    }
    log_(absl::StrFormat("port '%s': Full-NAT: %u local address(es), ports %u-%u, %s", config.name,
                         config.snat_addresses.size(), config.snat_first_port,
                         config.snat_last_port, how));
  }
  return absl::OkStatus();
}

std::vector<std::string> OpenedPorts::describeSpreads() const {
  std::vector<std::string> lines;
  for (size_t p = 0; p < ports_.size(); ++p) {
    const RssSpread& spread = ports_[p].spread;
    const PortConfig& config = config_.dataplane.ports[p];
    std::string line = absl::StrCat("port '", ports_[p].name, "': ");
    if (spread.key.empty()) {
      absl::StrAppend(&line, "no RSS, queue 0 takes everything");
    } else {
      std::vector<std::string> hashed;
      if (spread.tcp4_ports) hashed.push_back("tcp4");
      if (spread.udp4_ports) hashed.push_back("udp4");
      if (spread.tcp6_ports) hashed.push_back("tcp6");
      if (spread.udp6_ports) hashed.push_back("udp6");
      const uint16_t queues =
          spread.reta.empty() ? 0 : *std::max_element(spread.reta.begin(), spread.reta.end()) + 1;
      absl::StrAppend(
          &line, config.peer_rss.key.empty() ? "" : "peer_rss: the peer spreads by ", "RSS key ",
          absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(spread.key.data()),
                                                   spread.key.size())),
          ", ", spread.reta.size(), "-entry redirection table over ", queues,
          " queue(s), ports hashed for ", hashed.empty() ? "none" : absl::StrJoin(hashed, " "));
    }
    if (!config.snat_addresses.empty()) {
      absl::StrAppend(&line, "; Full-NAT: ", config.snat_addresses.size(),
                      " local address(es), ports ", config.snat_first_port, "-",
                      config.snat_last_port);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

void OpenedPorts::close() {
  // Waits for a reading under way, which must not meet a closed device.
  stats_.reset();
  for (OpenedPort& port : ports_) closePort(port);
  ports_.clear();
  macs_.clear();
  checksum_offloads_.clear();
  reply_steering_.clear();
}

void OpenedPorts::watchLinks() {
  link_up_.resize(ports_.size(), -1);
  for (size_t p = 0; p < ports_.size(); ++p) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(ports_[p].port_id, &link) != 0) continue;
    const int up = link.link_status == RTE_ETH_LINK_UP ? 1 : 0;
    if (up == link_up_[p]) continue;
    link_up_[p] = up;
    char text[RTE_ETH_LINK_MAX_STR_LEN];
    rte_eth_link_to_str(text, sizeof(text), &link);
    log_(absl::StrFormat("port '%s': %s", ports_[p].name, text));
  }
}

std::vector<std::string> OpenedPorts::down() const {
  std::vector<std::string> down;
  for (size_t p = 0; p < ports_.size() && p < link_up_.size(); ++p) {
    if (link_up_[p] == 0) down.push_back(ports_[p].name);
  }
  return down;
}

}  // namespace berth
