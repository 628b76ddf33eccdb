#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace berth {

// One device's statistics as its NIC reports them (docs/nics.md), as the runtime reads them
// (runtime/port.h readPortStats) for the control plane to show (metrics/port_stats.h). Pure data.

// rte_eth_stats' totals, by DPDK's names, which are what operators search for.
enum PortTotal : uint8_t {
  kPortIpackets,
  kPortOpackets,
  kPortIbytes,
  kPortObytes,
  kPortImissed,  // dropped by the NIC because no RX descriptor was free: a worker fell behind
  kPortIerrors,
  kPortOerrors,
  kPortRxNombuf,  // RX descriptors not refilled because the mbuf pool was empty
  kPortTotalCount,
};
inline constexpr std::array<const char*, kPortTotalCount> kPortTotalNames = {
    "ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors", "rx_nombuf"};

struct PortLink {
  bool up = false;
  uint32_t speed_mbps = 0;  // 0 where the PMD does not know it
  bool full_duplex = false;
  bool autoneg = false;
};

// One queue's counts from rte_eth_stats (q_ipackets or q_opackets, and the bytes; errors are
// the RX queue's drops, q_errors).
struct PortQueueCounts {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
};

// One device's reading. VLAN ports of a device share its counters: the reading is the device's,
// named by its first port.
struct PortStats {
  std::string port;
  std::string driver;
  std::string error;  // why rte_eth_stats_get failed; the totals are then zero
  // False where the driver never counts drops (DriverTraits::reports_drops): imissed is then
  // shown as not reported rather than as 0.
  bool drops_reported = true;
  PortLink link;
  std::array<uint64_t, kPortTotalCount> totals{};
  // Per queue in use (at most the 16 rte_eth_stats has room for); empty where the PMD fills no
  // per-queue count.
  std::vector<PortQueueCounts> rx_queues;
  std::vector<PortQueueCounts> tx_queues;
  std::vector<std::pair<std::string, uint64_t>> xstats;  // the PMD's, in its order
};

}  // namespace berth
