#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/dataplane/reply_steering.h"
#include "berth/net/mac_address.h"
#include "berth/net/toeplitz.h"
#include "berth/runtime/port_readings.h"

namespace berth {

// A started DPDK port, set up as berthd needs it (queues, descriptors and RSS): one RX and one TX
// queue per worker, RSS with the config's Toeplitz key (rssKeyFor) where the PMD has RSS, one queue
// pair otherwise unless the config gives `queues` (a peer that spreads flows itself, as over
// memif), the configured MTU, and a mempool on the port's NUMA socket whose mbufs hold a whole
// frame with room in front for the largest encapsulation.
struct OpenedPort {
  std::string name;
  std::string driver;
  uint16_t port_id = 0;
  uint16_t queues = 0;  // RX/TX queue pairs; queue q is served by worker q
  bool rss = false;
  // How the device spreads what it receives, as read back from it once started: its key, its
  // redirection table and which flows it hashes with their ports (rss_hf). Without RSS, what
  // the config's peer_rss declares the peer spreads with, or empty: everything to queue 0.
  // Full-NAT chooses local ports by it (dataplane/reply_steering.h).
  RssSpread spread;
  // The port's PMD may be polled only while its link is up (WorkerQueue says how workers obey).
  // True for net_memif: DPDK 22.11's eth_memif_rx and eth_memif_tx compute their ring's address,
  // regions[region]->addr + ring_offset, before they check the port's CONNECTED flag. A memif
  // server is sent the peer's region in one control message (regions[0] set, addr still null)
  // and maps it only at the CONNECT message, which then sets CONNECTED and the link up, all on
  // the EAL interrupt thread. A worker that read the address in between and lost its CPU until
  // after CONNECTED dereferences null + ring_offset: the PMD's null check catches ring 0's offset
  // of 0, not ring 1's. berthd died so now and then in the two-queue memif test, always in its
  // second worker at `testb $0x1,0x4(%r9)` (ring->flags), r9 = 0x20080: null plus ring 1's
  // offset with 8192 slots. A memif client has the same window with rings' offsets not yet set.
  // memif_connect stores the mapping, then CONNECTED, then the link state, so a loop that reads
  // the link up (an opaque call, and x86-64 keeps stores in order) also reads the mapping; a
  // disconnect during that loop cannot unmap it before the loop's quiescent state
  // (runtime/unmap_guard.h), nor start the next connect before the unmap.
  bool poll_only_while_link_up = false;
  MacAddress mac;
  rte_mempool* pool = nullptr;
  unsigned pool_mbufs = 0;  // the mbufs the pool was made with
  // Descriptors per RX and per TX queue in use: the config's, as the driver adjusted them, and
  // as it reports them once the queues are set up where it does (descriptors_reported).
  uint16_t rx_descriptors = 0;
  uint16_t tx_descriptors = 0;
  bool descriptors_reported = false;
  int socket = -1;  // the device's NUMA socket; -1 where the device does not say (vdevs)
  // The outer checksums the NIC fills in (kChecksumOffload*): those it offers, unless the config
  // says checksum_offload: false.
  uint8_t checksum_offloads = 0;
  // False for a VLAN port on a device an earlier port opened: it shares that port's queues, pool
  // and MAC, and closePort() leaves the device to its owner.
  bool owns_device = true;
};

// Finds the port by its device name, attaching it first if EAL has not (a vdev string such as
// "net_pcap0,rx_pcap=in.pcap" or a PCI address), then configures and starts it with up to
// `workers` queue pairs (exactly `config.queues` when set: more than `workers` or than the device
// offers is an error). Advice an operator should see (no RSS, an MTU the PMD would not take)
// is appended to `warnings`. Errors name the port and the DPDK call that failed.
absl::StatusOr<OpenedPort> openPort(const PortConfig& config, uint16_t workers,
                                    std::vector<std::string>& warnings);

// The device's statistics, extended statistics and link now, without waiting for the link
// (rte_eth_link_get_nowait); the queue counts of the port's queues where the PMD fills any.
// For the port-statistics thread (metrics/port_stats.h): it allocates, and a PMD may take a
// system call to answer.
PortStats readPortStats(const OpenedPort& port);

// Stops and closes the port, detaches its device and frees its mempool, if it owns the device.
// Call after every worker has stopped.
void closePort(OpenedPort& port);

// The RSS key of `length` bytes (the device's) that `config.rss_key` asks for: drawn from
// getrandom(2) for kRandom, so no sender can compute flows that all land on one worker, the
// symmetric key, or the config's bytes, which must be `length` long.
absl::StatusOr<std::vector<uint8_t>> rssKeyFor(const PortConfig& config, size_t length);

}  // namespace berth
