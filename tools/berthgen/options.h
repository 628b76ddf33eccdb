#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/gen/traffic.h"
#include "berth/net/mac_address.h"

namespace berth {

// berthgen's options, testpmd-style: `berthgen [EAL options] -- [options]`.
struct GenOptions {
  std::vector<VipTarget> vips;     // --vip, repeatable, at least one
  uint32_t flows = 1024;           // --flows
  SourceNet source_v4;             // --src-net (IPv4), default 198.18.0.0/15
  SourceNet source_v6;             // --src-net (IPv6), default 2001:db8:1::/64
  bool ipv6 = false;               // --ipv6: every VIP must be IPv6
  size_t packet_size = 64;         // --pkt-size BYTES, without FCS
  bool packet_size_given = false;  // unset: 64, or a flow's smallest frame if larger
  bool imix = false;               // --pkt-size imix
  uint64_t rate = 0;               // --rate PPS, 0: as fast as the port takes them
  double duration_s = 10;          // --duration S
  uint64_t count = 0;              // --count N: stop after N packets (instead of duration)
  uint16_t burst = 32;             // --burst N
  uint32_t window = 0;             // --window N: packets in flight per queue pair, 0: no bound
  uint16_t tx_queues = 1;          // --txq N: sending lcores, one TX queue (and RX queue) each
  QueueSpread spread;              // --rss-key, --rss-table: how flows go to TX queues
  bool reflect = false;            // --reflect: answer Full-NAT's frames as the backends
  double malformed_ratio = 0;      // --malformed-ratio R
  uint64_t flood = 0;              // --flood PPS: new-connection attempts a second
  std::string pcap_out;            // --pcap-out FILE
  std::string tx_device;           // --tx-dev DEVICE (a vdev string or PCI address)
  std::string rx_device;           // --rx-dev DEVICE, default the TX device
  std::optional<MacAddress> destination_mac;  // --dst-mac: berthd's port
  std::string config_path;                    // --config FILE: check backends against berth's table
  uint16_t gue_port = 0;                      // --gue-port, default from --config
  std::string json_path;                      // --json FILE
  std::string flow_backends_path;  // --flow-backends FILE: each flow's backend, a line each
  double drain_s = 0.5;            // --drain S: how long to wait for stragglers
  bool quiet = false;              // --quiet: no progress line
};

// Parses the options after "--". Errors name the option and what was wrong.
absl::StatusOr<GenOptions> parseGenOptions(int argc, char** argv);

extern const char kGenUsage[];

}  // namespace berth
