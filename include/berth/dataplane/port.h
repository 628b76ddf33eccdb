#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/net/mac_address.h"

namespace berth {

// A started DPDK port, set up as berthd needs it (issue 3, queues and RSS): one RX and one TX
// queue per worker, RSS with a symmetric Toeplitz key where the PMD has RSS, one queue pair
// otherwise unless the config gives `queues` (a peer that spreads flows itself, as over memif), the
// configured MTU, and a mempool on the port's NUMA socket whose mbufs hold a whole frame with room
// in front for the largest encapsulation.
struct OpenedPort {
  std::string name;
  std::string driver;
  uint16_t port_id = 0;
  uint16_t queues = 0;  // RX/TX queue pairs; queue q is served by worker q
  bool rss = false;
  MacAddress mac;
  rte_mempool* pool = nullptr;
};

// Descriptors per RX and per TX queue.
inline constexpr uint16_t kRxDescriptors = 1024;
inline constexpr uint16_t kTxDescriptors = 1024;

// Finds the port by its device name, attaching it first if EAL has not (a vdev string such as
// "net_pcap0,rx_pcap=in.pcap" or a PCI address), then configures and starts it with up to
// `workers` queue pairs (exactly `config.queues` when set: more than `workers` or than the device
// offers is an error). Advice an operator should see (no RSS, an MTU the PMD would not take)
// is appended to `warnings`. Errors name the port and the DPDK call that failed.
absl::StatusOr<OpenedPort> openPort(const PortConfig& config, uint16_t workers,
                                    std::vector<std::string>& warnings);

// Stops and closes the port, detaches its device and frees its mempool. Call after every worker
// has stopped.
void closePort(OpenedPort& port);

// The symmetric RSS key: 0x6d5a repeated, which makes Toeplitz give a flow and its reverse the
// same hash (Woo and Park, 2012), for `length` bytes.
std::vector<uint8_t> symmetricRssKey(size_t length);

}  // namespace berth
