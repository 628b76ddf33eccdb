#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/net/flow_key.h"
#include "berth/net/ip_address.h"
#include "berth/net/mac_address.h"

namespace berth {

// berthgen's traffic (docs/architecture.md, tools): flows from a source network to the VIPs under
// test, and the frames that carry them. Every frame says which flow it belongs to (its 5-tuple,
// from which the flow's number follows), its place in the flow (a sequence number) and when it
// left (a TSC timestamp), and the rest of its bytes follow from those, so the sink can rebuild
// the frame it expects and compare the packet that comes back byte for byte. Pure: frames are
// written into caller buffers, with the checksums DPDK's header-only helpers compute.

// A VIP to send to: "198.18.100.1:80/tcp", "[2001:db8::1]:53/udp".
struct VipTarget {
  IpAddress address;
  uint16_t port = 0;
  uint8_t protocol = kProtocolTcp;

  static absl::StatusOr<VipTarget> parse(absl::string_view text);
  std::string toString() const;
};

// A source network, "198.18.0.0/15" or "2001:db8:1::/64": flows take their client addresses
// from it.
struct SourceNet {
  IpAddress base;  // the network address, host bits clear
  int prefix_length = 0;

  static absl::StatusOr<SourceNet> parse(absl::string_view text);
  std::string toString() const;
  // Addresses in the network, capped at 2^32.
  uint64_t size() const;
  // The network's `index`-th address (index < size()).
  IpAddress at(uint64_t index) const;
};

// Flows spread over as many client addresses as the network has, up to kMaxSourceAddresses (A),
// so that services hashing on addresses alone see many clients: flow i comes from address
// i % A, port kFirstSourcePort + i / A, and goes to VIP i % (number of VIPs).
inline constexpr uint16_t kFirstSourcePort = 1024;
inline constexpr uint32_t kSourcePortsPerAddress = 60000;
inline constexpr uint64_t kMaxSourceAddresses = 65536;

struct GenFlow {
  FlowKey key;
  uint32_t vip = 0;  // index into the VIP list
};

// A flood flow (berthgen --flood): a TCP connection attempt to `vip` from a random address of
// `source` and a random port below kFirstSourcePort, so it is never one of the generated flows
// and the sink tells its packets apart. `random` picks both.
GenFlow floodFlow(const VipTarget& vip, const SourceNet& source, uint64_t random);

// The RSS hash a NIC configured with the standard 40-byte Toeplitz key (Microsoft's, the 82599
// datasheet's verification key) gives the flow: over source and destination addresses and, for
// TCP and UDP, ports, in that order. Through DPDK's rte_softrss.
uint32_t rssHashOf(const FlowKey& key);

// How berthgen spreads flows over its TX queues, as a NIC's RSS would spread them on receipt: a
// flow goes to queue table[toeplitz(key, its tuple) & (table.size() - 1)], the tuple holding
// TCP's and UDP's ports. berthd's peer_rss declares the same of a memif port (docs/fullnat.md).
struct QueueSpread {
  std::vector<uint8_t> key;     // 40 to 52 bytes
  std::vector<uint16_t> table;  // the queue of each entry, a power of two of entries

  // The standard key (rssHashOf's) and 128 entries round robin over `queues`, as NICs fill
  // their tables: a flow goes to queue rssHashOf(flow) % queues where `queues` is a power of two.
  static QueueSpread standard(uint16_t queues);
  // berthgen's --rss-key (empty: the standard key; "symmetric": 0x6d5a repeated; or 40 to 52
  // bytes in hex, colons optional) and --rss-table (empty: 128 entries round robin; or the
  // entries' queues, comma-separated, each below `queues`). Errors name the option.
  static absl::StatusOr<QueueSpread> parse(absl::string_view key, absl::string_view table,
                                           uint16_t queues);
  uint32_t hashOf(const FlowKey& flow) const;
  uint16_t queueOf(const FlowKey& flow) const { return table[hashOf(flow) & (table.size() - 1)]; }
};

// The flows' indices per TX queue: flow f goes to queue spread.queueOf(f), so that berthgen's
// queues (and its lcores) each carry their own share of the flows. `queues` lists, each in flow
// order.
std::vector<std::vector<uint32_t>> spreadOverQueues(const std::vector<GenFlow>& flows,
                                                    const QueueSpread& spread, uint16_t queues);

// `count` flows over `vips`, each VIP's flows from the source network of its IP version: IPv4
// VIPs from `source_v4`, IPv6 VIPs from `source_v6`. InvalidArgument when a network has too few
// addresses for the flows or is of the wrong version.
absl::StatusOr<std::vector<GenFlow>> makeFlows(const std::vector<VipTarget>& vips,
                                               const SourceNet& source_v4,
                                               const SourceNet& source_v6, uint32_t count);

// The flow number a received packet's 5-tuple says it belongs to, checked against `flows`; or
// -1 when it is none of them.
int64_t flowIndexOf(const FlowKey& key, const SourceNet& source, const std::vector<GenFlow>& flows);

// What a frame carries besides its flow: the TCP sequence number, or the first 4 UDP payload
// bytes, hold `sequence`; the next 8 bytes hold the TSC when it was built. A flow's first packet
// (sequence 0) is a SYN, the rest ACKs, so berthd's connection tracking sees real openings.
inline constexpr size_t kStampBytes = 8;

// The smallest frame (no FCS) that carries a flow's headers and the stamp.
size_t minimumFrameSize(const GenFlow& flow);

// Writes the frame of `flow`'s packet `sequence` stamped `tsc` into `out` (`size` bytes, at
// least minimumFrameSize and at most 9000): Ethernet from `source_mac` to `destination_mac`, IP
// with its checksum, TCP or UDP with its checksum, the stamp, then bytes that follow from the
// flow and the sequence. Returns the frame's length.
size_t buildFrame(const GenFlow& flow, uint32_t flow_index, uint32_t sequence, uint64_t tsc,
                  size_t size, const MacAddress& source_mac, const MacAddress& destination_mac,
                  uint8_t* out);

// The simple IMIX, 7:4:1 frames of 64, 570 and 1518 bytes (with FCS; 60, 566, 1514 without), as
// a repeating pattern of 12 sizes without FCS.
inline constexpr size_t kImixPattern[12] = {60, 566, 60, 60, 566, 60, 1514, 60, 566, 60, 60, 566};

// A malformed frame for the storm tests, `kind` cycling through the kinds berthd must count and
// drop: a truncated IPv4 header, a total length past the frame, a bad IP version, a truncated
// TCP header, and random bytes. Returns its length.
size_t buildMalformedFrame(uint64_t kind, uint64_t random, const MacAddress& source_mac,
                           const MacAddress& destination_mac, uint8_t* out);

}  // namespace berth
