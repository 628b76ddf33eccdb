#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/metrics/port_stats.h"
#include "berth/net/mac_address.h"
#include "berth/runtime/port.h"

namespace berth {

// The datapath's ports from their start-up step to its stop: every configured port opened, a
// VLAN port on the device an earlier port opened (docs/vlans.md), each with its MAC and the
// outer checksums its NIC fills in; the devices' statistics, read off the loop; and each link
// as last seen. Management thread only.
class OpenedPorts {
 public:
  using Log = std::function<void(const std::string&)>;
  // `config` is the config in force, which a reload replaces in place; it must outlive this.
  OpenedPorts(const Config& config, Log log) : config_(config), log_(std::move(log)) {}
  ~OpenedPorts() { close(); }
  OpenedPorts(const OpenedPorts&) = delete;
  OpenedPorts& operator=(const OpenedPorts&) = delete;

  // Opens every configured port with a queue pair for each of `worker_lcores`, and checks where
  // the workers poll from (control/numa_check.h) and that two-arm egress has its queues.
  absl::Status open(const std::vector<unsigned>& worker_lcores);
  // Closes every port; nothing when none is open.
  void close();

  const std::vector<OpenedPort>& ports() const { return ports_; }
  const std::vector<MacAddress>& macs() const { return macs_; }
  const std::vector<uint8_t>& checksumOffloads() const { return checksum_offloads_; }
  // For each port with snat_addresses, the steering of its Full-NAT replies under the spread
  // its device reported (dataplane/reply_steering.h); null for the others.
  const std::vector<std::shared_ptr<const ReplySteering>>& replySteering() const {
    return reply_steering_;
  }
  // Per port: "port 'p0': RSS key 6d5a...(40 bytes), 128-entry table over 2 queue(s), ports
  // hashed for tcp4 udp4 tcp6 udp6; Full-NAT ..." (status shows them).
  std::vector<std::string> describeSpreads() const;
  // The first port on port `port`'s device: the one whose queues the workers poll.
  uint32_t deviceOf(uint32_t port) const;
  // That every worker that receives on a port has a queue on the device its traffic leaves
  // through (two-arm, docs/two-arm.md): FailedPrecondition naming the ports otherwise.
  absl::Status checkEgressQueues(const Config& config) const;

  // The statistics reader's turn, and what it read last (none before open()).
  void turnStats(absl::Time now) {
    if (stats_) stats_->turn(now);
  }
  std::shared_ptr<const PortStatsReading> stats() const {
    return stats_ != nullptr ? stats_->latest() : nullptr;
  }
  PortRates rates() const { return stats_ != nullptr ? stats_->rates() : PortRates(); }
  bool readingStats() const { return stats_ != nullptr; }
  uint64_t statsReadingsLate() const { return stats_ != nullptr ? stats_->late() : 0; }
  // Logs each link that went up or down since the last look.
  void watchLinks();
  // The ports whose link was last seen down.
  std::vector<std::string> down() const;

 private:
  // Warns of each worker lcore that polls a port on another NUMA socket, or with
  // dataplane.strict_numa refuses to start naming them (control/numa_check.h).
  absl::Status checkNumaPlacement(const std::vector<unsigned>& worker_lcores);
  // Builds replySteering() from the devices' spreads, and logs each port's Full-NAT pool.
  absl::Status steerReplies();

  const Config& config_;
  Log log_;
  std::vector<OpenedPort> ports_;
  std::vector<MacAddress> macs_;
  std::vector<uint8_t> checksum_offloads_;                            // by port, as macs_
  std::vector<std::shared_ptr<const ReplySteering>> reply_steering_;  // by port, as macs_
  // Reads every device's statistics once a second, off the loop; none before open().
  std::unique_ptr<PortStatsSampler> stats_;
  std::vector<int> link_up_;  // per port: 1 up, 0 down, -1 not yet looked at
};

}  // namespace berth
