#include "berth/runtime/port.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/config/drivers.h"
#include "berth/runtime/worker.h"
#include "berth/util/random_bytes.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// Per worker and queue: what the RX ring holds, what may sit in the TX ring and TX buffer, and
// the mempool's per-lcore cache.
constexpr unsigned kMempoolCache = 256;
constexpr uint16_t kLongestVlanHeader = 8;  // two tags

absl::Status portError(const PortConfig& config, absl::string_view call, int error) {
  return absl::InternalError(absl::StrCat("port '", config.name, "' (", config.device, "): ", call,
                                          " failed: ", rte_strerror(error < 0 ? -error : error)));
}

std::string deviceName(const std::string& device) { return device.substr(0, device.find(',')); }

absl::StatusOr<uint16_t> findOrAttach(const PortConfig& config) {
  const std::string name = deviceName(config.device);
  uint16_t port_id;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) return port_id;
  if (const int result = rte_dev_probe(config.device.c_str()); result < 0) {
    absl::Status status = portError(config, "attaching the device (rte_dev_probe)", result);
    if (!vdevDriver(config.device).empty()) return status;
    // A PCI device: what the host says of its binding, the commonest cause.
    const std::string address = sysfsPciAddress(config.device);
    const std::string sysfs = absl::StrCat("/sys/bus/pci/devices/", address);
    PciBinding binding;
    std::error_code error;
    binding.present = std::filesystem::exists(sysfs, error);
    const std::filesystem::path driver = std::filesystem::read_symlink(sysfs + "/driver", error);
    if (!error) binding.driver = driver.filename().string();
    const std::string advice = pciBindingAdvice(address, binding);
    if (advice.empty()) return status;
    return absl::Status(status.code(), absl::StrCat(status.message(), "; ", advice));
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    return absl::NotFoundError(absl::StrCat("port '", config.name, "': device '", name,
                                            "' attached but is not an Ethernet port"));
  }
  return port_id;
}

// Some PMDs ignore the key given to rte_eth_dev_configure and keep their own default, which
// anyone can look up; the key is set again through the RSS API and read back, and an operator
// is told when the device holds another.
void confirmRssKey(const PortConfig& config, const OpenedPort& port, rte_eth_rss_conf wanted,
                   std::vector<std::string>& warnings) {
  const int updated = rte_eth_dev_rss_hash_update(port.port_id, &wanted);
  std::vector<uint8_t> held(wanted.rss_key_len);
  rte_eth_rss_conf read{};
  read.rss_key = held.data();
  read.rss_key_len = wanted.rss_key_len;
  const int got = rte_eth_dev_rss_hash_conf_get(port.port_id, &read);
  if (got == 0 && std::memcmp(held.data(), wanted.rss_key, held.size()) == 0) return;
  warnings.push_back(absl::StrCat(
      "port '", config.name, "' (", port.driver, "): the device ",
      got == 0 ? "holds another RSS key than berth set" : "does not report its RSS key",
      updated == 0 ? ""
                   : absl::StrCat(" (rte_eth_dev_rss_hash_update: ", rte_strerror(-updated), ")"),
      "; if it is the PMD's default, a sender can compute flows that all land on one worker"));
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> rssKeyFor(const PortConfig& config, size_t length) {
  switch (config.rss_key) {
    case RssKeyKind::kSymmetric:
      return symmetricRssKey(length);
    case RssKeyKind::kFixed:
      if (config.rss_key_bytes.size() != length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "port '", config.name, "' (line ", config.line.number, "): rss_key has ",
            config.rss_key_bytes.size(), " bytes, but the device takes a key of ", length));
      }
      return config.rss_key_bytes;
    case RssKeyKind::kRandom:
      break;
  }
  // From the kernel's CSPRNG: a key a sender could predict would let it aim flows at one worker.
  std::vector<uint8_t> key(length);
  if (absl::Status status = fillRandom(key.data(), key.size()); !status.ok()) {
    return absl::InternalError(
        absl::StrCat("port '", config.name, "': no random RSS key (", status.message(), ")"));
  }
  return key;
}

namespace {

// How many queue pairs the port gets and whether RSS spreads flows over them: the config's
// count, or one per worker where the device has RSS.
absl::Status chooseQueues(const PortConfig& config, uint16_t workers, const rte_eth_dev_info& info,
                          OpenedPort& port, std::vector<std::string>& warnings) {
  const uint16_t queue_limit = std::min(info.max_rx_queues, info.max_tx_queues);
  const bool has_rss = info.flow_type_rss_offloads != 0 && queue_limit > 1;
  if (config.queues != 0) {
    if (config.queues > queue_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "port '", config.name, "' (line ", config.line.number, "): queues ", config.queues,
          ", but ", port.driver, " offers at most ", queue_limit, " queue pair(s)"));
    }
    if (config.queues > workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "port '", config.name, "' (line ", config.line.number, "): queues ", config.queues,
          ", but ", workers, " worker(s): every queue needs a worker to poll it (add lcores)"));
    }
    port.queues = config.queues;
    port.rss = has_rss && port.queues > 1;
    if (!port.rss && port.queues > 1) {
      // DPDK 22.11's memif server serves a queue its client did not open from the client's
      // first ring, which two workers would then share: the counts must match.
      warnings.push_back(absl::StrCat(
          "port '", config.name, "' (", port.driver, "): ", port.queues,
          " queue pairs without RSS: whatever sends to it must keep each flow on one queue "
          "(berthgen --txq does), and a memif peer must open exactly ",
          port.queues, " queues",
          config.snat_addresses.empty() || !config.peer_rss.key.empty()
              ? ""
              : "; Full-NAT's replies need peer_rss, how the peer spreads them (docs/fullnat.md)"));
    }
  } else {
    port.rss = has_rss;
    port.queues = port.rss ? std::min<uint16_t>(workers, queue_limit) : 1;
  }
  if (config.queues == 0 && !port.rss && workers > 1) {
    warnings.push_back(absl::StrCat("port '", config.name, "' (", port.driver,
                                    "): no RSS, so one queue pair served by one worker; the other ",
                                    workers - 1, " worker(s) do not poll it"));
  } else if (port.queues < workers) {
    warnings.push_back(absl::StrCat("port '", config.name, "': ", port.queues,
                                    " queue pair(s) for ", workers, " workers; ",
                                    workers - port.queues, " worker(s) do not poll it"));
  }
  return absl::OkStatus();
}

// The device's configuration: RSS with its key (which `key` holds while `conf` points at it),
// fast mbuf free and the checksum offloads the device has.
absl::Status deviceConf(const PortConfig& config, const rte_eth_dev_info& info, OpenedPort& port,
                        rte_eth_conf& conf, std::vector<uint8_t>& key) {
  std::memset(&conf, 0, sizeof(conf));
  if (port.rss) {
    absl::StatusOr<std::vector<uint8_t>> chosen =
        rssKeyFor(config, info.hash_key_size > 0 ? info.hash_key_size : 40);
    if (!chosen.ok()) return chosen.status();
    key = *std::move(chosen);
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = key.data();
    conf.rx_adv_conf.rss_conf.rss_key_len = static_cast<uint8_t>(key.size());
    conf.rx_adv_conf.rss_conf.rss_hf =
        (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
  }
  if (config.checksum_offload && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    port.checksum_offloads |= kChecksumOffloadIpv4Header;
  }
  if (config.checksum_offload && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    port.checksum_offloads |= kChecksumOffloadUdp;
  }
  return absl::OkStatus();
}

// The descriptors asked for, as the driver's limits and alignment allow.
absl::Status setDescriptors(const PortConfig& config, OpenedPort& port,
                            std::vector<std::string>& warnings) {
  uint16_t rx_descriptors = config.rx_descriptors;
  uint16_t tx_descriptors = config.tx_descriptors;
  if (const int result =
          rte_eth_dev_adjust_nb_rx_tx_desc(port.port_id, &rx_descriptors, &tx_descriptors);
      result != 0) {
    return portError(config, "rte_eth_dev_adjust_nb_rx_tx_desc", result);
  }
  if (rx_descriptors != config.rx_descriptors || tx_descriptors != config.tx_descriptors) {
    warnings.push_back(absl::StrCat(
        "port '", config.name, "' (line ", config.line.number, ", ", port.driver,
        "): ", config.rx_descriptors, " RX and ", config.tx_descriptors, " TX descriptors asked, ",
        rx_descriptors, " and ", tx_descriptors, " in use (the driver's limits and alignment)"));
  }
  port.rx_descriptors = rx_descriptors;
  port.tx_descriptors = tx_descriptors;
  return absl::OkStatus();
}

// The descriptors the driver holds in use, where it reports them (rte_eth_rx_queue_info_get),
// which may differ from what it accepted at queue set-up.
void readBackDescriptors(const PortConfig& config, OpenedPort& port,
                         std::vector<std::string>& warnings) {
  rte_eth_rxq_info rx{};
  rte_eth_txq_info tx{};
  if (rte_eth_rx_queue_info_get(port.port_id, 0, &rx) != 0 ||
      rte_eth_tx_queue_info_get(port.port_id, 0, &tx) != 0 || rx.nb_desc == 0 || tx.nb_desc == 0) {
    port.descriptors_reported = false;
    return;
  }
  port.descriptors_reported = true;
  if (rx.nb_desc == port.rx_descriptors && tx.nb_desc == port.tx_descriptors) return;
  warnings.push_back(absl::StrCat("port '", config.name, "' (line ", config.line.number, ", ",
                                  port.driver, "): ", port.rx_descriptors, " RX and ",
                                  port.tx_descriptors, " TX descriptors set up, ", rx.nb_desc,
                                  " and ", tx.nb_desc, " in use as the driver reports them"));
  port.rx_descriptors = rx.nb_desc;
  port.tx_descriptors = tx.nb_desc;
}

// The port's mbuf pool on its socket, sized for its queues, the workers' caches and the exception
// path.
absl::Status createPool(const PortConfig& config, uint16_t workers, OpenedPort& port,
                        std::vector<std::string>& warnings) {
  port.socket = rte_eth_dev_socket_id(port.port_id);
  const int socket = port.socket >= 0 ? port.socket : static_cast<int>(rte_socket_id());
  // Each frame in one mbuf: the MTU plus Ethernet and two VLAN tags, and the default headroom in
  // front, which holds the largest encapsulation (48 bytes) with room to spare.
  const uint32_t frame_room =
      uint32_t{config.mtu} + RTE_ETHER_HDR_LEN + kLongestVlanHeader + RTE_ETHER_CRC_LEN;
  const auto data_room = static_cast<uint16_t>(
      std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, frame_room) + RTE_PKTMBUF_HEADROOM);
  // With a kernel interface, also what the exception path's queues may hold: each worker's, per
  // class, towards the kernel, and the kernel's frames on their way out.
  const unsigned exception_frames =
      config.exception ? (workers * unsigned{kExceptionClassCount} + 1u) * kKernelQueueSize : 0u;
  const unsigned needed = mbufsNeeded({.driver = port.driver,
                                       .queues = port.queues,
                                       .rx_descriptors = port.rx_descriptors,
                                       .tx_descriptors = port.tx_descriptors,
                                       .workers = workers,
                                       .cache_per_lcore = kMempoolCache,
                                       .exception_frames = exception_frames});
  const unsigned mbufs = config.mbufs != 0 ? config.mbufs : needed;
  if (mbufs < needed) {
    warnings.push_back(absl::StrCat(
        "port '", config.name, "' (line ", config.line.number, "): mbufs ", mbufs, ", below the ",
        needed, " its queues, ", port.driver, ", workers and exception path may hold; expect ",
        driverTraits(port.driver).rx_mbufs_besides_ring > 0 ? "the queue set-up to fail or " : "",
        "rx_nombuf under load"));
  }
  const std::string pool_name = absl::StrCat("berth_pool_", port.port_id);
  port.pool_mbufs = mbufs;
  // A pool set smaller than berth's sizing would strand its mbufs in the per-lcore caches.
  const unsigned cache =
      mbufs < needed ? std::min(kMempoolCache, mbufs / (2 * (workers + 1u))) : kMempoolCache;
  port.pool = rte_pktmbuf_pool_create(pool_name.c_str(), mbufs, cache, 0, data_room, socket);
  if (port.pool == nullptr) return portError(config, "rte_pktmbuf_pool_create", rte_errno);
  return absl::OkStatus();
}

// Every queue set up, the MAC read and the device started; closed again on a failure.
absl::Status startDevice(const PortConfig& config, const rte_eth_dev_info& info,
                         const rte_eth_conf& conf, OpenedPort& port) {
  const int socket = port.socket >= 0 ? port.socket : static_cast<int>(rte_socket_id());
  for (uint16_t queue = 0; queue < port.queues; ++queue) {
    rte_eth_rxconf rx_conf = info.default_rxconf;
    if (const int result =
            rte_eth_rx_queue_setup(port.port_id, queue, port.rx_descriptors,
                                   static_cast<unsigned>(socket), &rx_conf, port.pool);
        result != 0) {
      closePort(port);
      return portError(config, absl::StrCat("rte_eth_rx_queue_setup(", queue, ")"), result);
    }
    rte_eth_txconf tx_conf = info.default_txconf;
    tx_conf.offloads = conf.txmode.offloads;
    if (const int result = rte_eth_tx_queue_setup(port.port_id, queue, port.tx_descriptors,
                                                  static_cast<unsigned>(socket), &tx_conf);
        result != 0) {
      closePort(port);
      return portError(config, absl::StrCat("rte_eth_tx_queue_setup(", queue, ")"), result);
    }
  }
  rte_ether_addr mac;
  if (const int result = rte_eth_macaddr_get(port.port_id, &mac); result != 0) {
    closePort(port);
    return portError(config, "rte_eth_macaddr_get", result);
  }
  std::memcpy(port.mac.bytes.data(), mac.addr_bytes, 6);
  // Neighbour solicitations go to solicited-node multicast groups.
  rte_eth_allmulticast_enable(port.port_id);
  if (const int result = rte_eth_dev_start(port.port_id); result != 0) {
    closePort(port);
    absl::Status status = portError(config, "rte_eth_dev_start", result);
    if (port.driver != "net_memif") return status;
    // memif's client connects at start and answers a missing server with EPERM.
    return absl::Status(
        status.code(),
        absl::StrCat(status.message(),
                     "; a memif client connects to its server's socket when it starts: is the "
                     "server running, with the same socket= and socket-abstract= (default "
                     "/run/memif.sock, abstract)? A --vdev the EAL could not create (its message "
                     "is above) leaves berthd a memif with the defaults"));
  }
  return absl::OkStatus();
}

// The device's RSS as it holds it: the key, the redirection table and the hashed fields. A PMD
// that will not say one of them leaves the spread empty, with a warning: Full-NAT then treats
// the port as one without RSS, which is right only where one queue takes everything.
void readBackSpread(const PortConfig& config, const rte_eth_dev_info& info, OpenedPort& port,
                    std::vector<std::string>& warnings) {
  std::vector<uint8_t> key(info.hash_key_size > 0 ? info.hash_key_size : 40);
  rte_eth_rss_conf rss{};
  rss.rss_key = key.data();
  rss.rss_key_len = static_cast<uint8_t>(key.size());
  const int got_key = rte_eth_dev_rss_hash_conf_get(port.port_id, &rss);
  std::vector<uint16_t> reta(info.reta_size);
  int got_reta = info.reta_size == 0 ? -ENOTSUP : 0;
  if (got_reta == 0) {
    std::vector<rte_eth_rss_reta_entry64> groups((info.reta_size + RTE_ETH_RETA_GROUP_SIZE - 1) /
                                                 RTE_ETH_RETA_GROUP_SIZE);
    for (rte_eth_rss_reta_entry64& group : groups) group.mask = UINT64_MAX;
    got_reta = rte_eth_dev_rss_reta_query(port.port_id, groups.data(), info.reta_size);
    for (size_t i = 0; got_reta == 0 && i < reta.size(); ++i) {
      reta[i] = groups[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
    }
  }
  if (got_key != 0 || got_reta != 0) {
    warnings.push_back(
        absl::StrCat("port '", config.name, "' (", port.driver, "): does not report its RSS ",
                     got_key != 0 ? "key" : "redirection table", " (",
                     rte_strerror(-(got_key != 0 ? got_key : got_reta)),
                     "); Full-NAT local ports are chosen as if queue 0 took every reply"));
    return;
  }
  key.resize(rss.rss_key_len);
  port.spread.key = std::move(key);
  port.spread.reta = std::move(reta);
  port.spread.tcp4_ports = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP) != 0;
  port.spread.udp4_ports = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0;
  port.spread.tcp6_ports = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV6_TCP) != 0;
  port.spread.udp6_ports = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV6_UDP) != 0;
}

}  // namespace

absl::StatusOr<OpenedPort> openPort(const PortConfig& config, uint16_t workers,
                                    std::vector<std::string>& warnings) {
  OpenedPort port;
  port.name = config.name;
  absl::StatusOr<uint16_t> port_id = findOrAttach(config);
  if (!port_id.ok()) return port_id.status();
  port.port_id = *port_id;

  rte_eth_dev_info info;
  if (const int result = rte_eth_dev_info_get(port.port_id, &info); result != 0) {
    return portError(config, "rte_eth_dev_info_get", result);
  }
  port.driver = info.driver_name;
  port.poll_only_while_link_up = port.driver == "net_memif";
  BERTH_RETURN_IF_ERROR(chooseQueues(config, workers, info, port, warnings));
  if (port.rss && !config.peer_rss.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("port '", config.name, "' (line ", config.line.number,
                     "): peer_rss is for a port "
                     "without RSS of its own, such as memif, but ",
                     port.driver, " spreads flows by its own key (rss_key sets it)"));
  }
  rte_eth_conf conf;
  std::vector<uint8_t> key;
  BERTH_RETURN_IF_ERROR(deviceConf(config, info, port, conf, key));
  if (const int result = rte_eth_dev_configure(port.port_id, port.queues, port.queues, &conf);
      result != 0) {
    return portError(config, "rte_eth_dev_configure", result);
  }
  if (const int result = rte_eth_dev_set_mtu(port.port_id, config.mtu); result != 0) {
    warnings.push_back(absl::StrCat("port '", config.name, "' (", port.driver, "): MTU ",
                                    config.mtu, " not set on the device (", rte_strerror(-result),
                                    "); berth still applies it to what it sends"));
  }

  BERTH_RETURN_IF_ERROR(setDescriptors(config, port, warnings));
  BERTH_RETURN_IF_ERROR(createPool(config, workers, port, warnings));
  BERTH_RETURN_IF_ERROR(startDevice(config, info, conf, port));
  readBackDescriptors(config, port, warnings);
  if (port.rss) {
    confirmRssKey(config, port, conf.rx_adv_conf.rss_conf, warnings);
    readBackSpread(config, info, port, warnings);
  } else if (!config.peer_rss.key.empty()) {
    // What the peer spreads with stands in for the RSS the device does not have.
    port.spread.key = config.peer_rss.key;
    port.spread.reta = config.peer_rss.table;
  }
  return port;
}

PortStats readPortStats(const OpenedPort& port) {
  PortStats stats;
  stats.port = port.name;
  stats.driver = port.driver;
  stats.drops_reported = driverTraits(port.driver).reports_drops;
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port.port_id, &link) == 0) {
    stats.link.up = link.link_status == RTE_ETH_LINK_UP;
    stats.link.speed_mbps =
        link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0u : uint32_t{link.link_speed};
    stats.link.full_duplex = link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
    stats.link.autoneg = link.link_autoneg == RTE_ETH_LINK_AUTONEG;
  }
  rte_eth_stats basic{};
  if (const int result = rte_eth_stats_get(port.port_id, &basic); result != 0) {
    stats.error = absl::StrCat("rte_eth_stats_get: ", rte_strerror(-result));
  } else {
    stats.totals = {basic.ipackets, basic.opackets, basic.ibytes,  basic.obytes,
                    basic.imissed,  basic.ierrors,  basic.oerrors, basic.rx_nombuf};
    const size_t queues = std::min<size_t>(port.queues, RTE_ETHDEV_QUEUE_STAT_CNTRS);
    bool filled = false;
    for (size_t q = 0; q < queues; ++q) {
      filled = filled || basic.q_ipackets[q] != 0 || basic.q_opackets[q] != 0;
    }
    for (size_t q = 0; filled && q < queues; ++q) {
      stats.rx_queues.push_back({basic.q_ipackets[q], basic.q_ibytes[q], basic.q_errors[q]});
      stats.tx_queues.push_back({basic.q_opackets[q], basic.q_obytes[q], 0});
    }
  }
  // The count can grow between the two calls (a PMD that adds queue statistics): ask again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int count = rte_eth_xstats_get_names(port.port_id, nullptr, 0);
    if (count <= 0) break;
    std::vector<rte_eth_xstat_name> names(static_cast<size_t>(count));
    std::vector<rte_eth_xstat> values(static_cast<size_t>(count));
    const int named = rte_eth_xstats_get_names(port.port_id, names.data(), count);
    const int got = rte_eth_xstats_get(port.port_id, values.data(), count);
    if (named != count || got != count) continue;
    for (const rte_eth_xstat& value : values) {
      if (value.id < names.size()) stats.xstats.emplace_back(names[value.id].name, value.value);
    }
    break;
  }
  return stats;
}

void closePort(OpenedPort& port) {
  if (!port.owns_device) {
    port.pool = nullptr;
    return;
  }
  if (rte_eth_dev_is_valid_port(port.port_id)) {
    rte_eth_dev_stop(port.port_id);
    rte_eth_dev_info info;
    const bool have_info = rte_eth_dev_info_get(port.port_id, &info) == 0;
    rte_eth_dev_close(port.port_id);
    if (have_info && info.device != nullptr) rte_dev_remove(info.device);
  }
  if (port.pool != nullptr) {
    rte_mempool_free(port.pool);
    port.pool = nullptr;
  }
}

}  // namespace berth
