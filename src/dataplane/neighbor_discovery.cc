#include "berth/dataplane/neighbor_discovery.h"

#include <netinet/in.h>
#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include <cstring>

#include "dataplane/neighbor_wire.h"

namespace berth {
namespace {

constexpr size_t kMinimumEthernetFrame = 60;  // without the frame check sequence

bool isUnspecified(const uint8_t* address, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (address[i] != 0) return false;
  }
  return true;
}

std::optional<NeighborObservation> observeArp(const Frame& frame, const ParsedPacket& packet) {
  if (frame.length < packet.l3_offset + kArpLength) return std::nullopt;
  const auto* arp = reinterpret_cast<const rte_arp_hdr*>(frame.data + packet.l3_offset);
  if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
      arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
      arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4) {
    return std::nullopt;
  }
  NeighborObservation seen;
  if (arp->arp_data.arp_sip == arp->arp_data.arp_tip) {
    seen.claim = NeighborClaim::kAnnouncement;  // RFC 5227's announcement, request or reply
  } else if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY)) {
    seen.claim = NeighborClaim::kReply;
  } else if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REQUEST)) {
    seen.claim = NeighborClaim::kRequest;
  } else {
    return std::nullopt;
  }
  seen.address.family = IpFamily::kIpv4;
  std::memcpy(seen.address.bytes.data(), &arp->arp_data.arp_sip, 4);
  std::memcpy(seen.mac.bytes.data(), &arp->arp_data.arp_sha, RTE_ETHER_ADDR_LEN);
  if (isUnspecified(seen.address.bytes.data(), 4) || seen.mac.isMulticast()) return std::nullopt;
  seen.from_claimed_mac =
      std::memcmp(frame.data + RTE_ETHER_ADDR_LEN, seen.mac.bytes.data(), RTE_ETHER_ADDR_LEN) == 0;
  return seen;
}

std::optional<NeighborObservation> observeNeighborDiscovery(const Frame& frame,
                                                            const ParsedPacket& packet) {
  if (packet.flow.family != IpFamily::kIpv6 || packet.flow.protocol != kProtocolIcmpv6 ||
      packet.l4_offset == 0 || packet.hop_limit != kNeighborDiscoveryHopLimit) {
    return std::nullopt;
  }
  const size_t end = size_t{packet.l3_offset} + packet.ip_length;
  if (end > frame.length || end < packet.l4_offset + kNeighborMessageLength) return std::nullopt;
  const uint8_t* message = frame.data + packet.l4_offset;
  if (message[1] != 0) return std::nullopt;
  uint8_t wanted_option;
  const uint8_t* address;
  NeighborClaim claim;
  if (message[0] == kNeighborSolicitation) {
    wanted_option = kSourceLinkLayerOption;
    // The parser swaps nothing for ND messages: flow.source is the IPv6 source address.
    address = frame.data + packet.l3_offset + 8;
    claim = NeighborClaim::kRequest;
  } else if (message[0] == kNeighborAdvertisement) {
    wanted_option = kTargetLinkLayerOption;
    address = message + 8;
    claim =
        (message[4] & kSolicitedFlag) != 0 ? NeighborClaim::kReply : NeighborClaim::kAnnouncement;
  } else {
    return std::nullopt;
  }
  if (isUnspecified(address, 16) || address[0] == 0xFF) return std::nullopt;
  // Options follow the fixed part in units of 8 bytes; a zero length is invalid (RFC 4861, 4.6).
  for (size_t at = packet.l4_offset + kNeighborMessageLength; at + 2 <= end;) {
    const uint8_t type = frame.data[at];
    const size_t length = size_t{frame.data[at + 1]} * 8;
    if (length == 0 || at + length > end) return std::nullopt;
    if (type == wanted_option && length >= 8) {
      NeighborObservation seen;
      seen.address.family = IpFamily::kIpv6;
      std::memcpy(seen.address.bytes.data(), address, 16);
      std::memcpy(seen.mac.bytes.data(), frame.data + at + 2, RTE_ETHER_ADDR_LEN);
      if (seen.mac.isMulticast()) return std::nullopt;
      seen.claim = claim;
      seen.from_claimed_mac = std::memcmp(frame.data + RTE_ETHER_ADDR_LEN, seen.mac.bytes.data(),
                                          RTE_ETHER_ADDR_LEN) == 0;
      return seen;
    }
    at += length;
  }
  return std::nullopt;
}

}  // namespace

std::optional<NeighborObservation> observeNeighbor(const Frame& frame, const ParsedPacket& packet) {
  if (packet.type == FrameType::kArp) return observeArp(frame, packet);
  if (packet.type == FrameType::kIp) return observeNeighborDiscovery(frame, packet);
  return std::nullopt;
}

size_t buildNeighborRequest(uint8_t* out, size_t capacity, const MacAddress& source_mac,
                            const IpAddress& source, const IpAddress& target) {
  if (source.family != target.family) return 0;
  auto* ethernet = reinterpret_cast<rte_ether_hdr*>(out);
  if (target.isV4()) {
    if (capacity < kMinimumEthernetFrame) return 0;
    std::memset(out, 0, kMinimumEthernetFrame);
    std::memset(&ethernet->dst_addr, 0xFF, RTE_ETHER_ADDR_LEN);
    std::memcpy(&ethernet->src_addr, source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
    ethernet->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
    auto* arp = reinterpret_cast<rte_arp_hdr*>(ethernet + 1);
    arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    arp->arp_hlen = RTE_ETHER_ADDR_LEN;
    arp->arp_plen = 4;
    arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
    std::memcpy(&arp->arp_data.arp_sha, source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
    std::memcpy(&arp->arp_data.arp_sip, source.bytes.data(), 4);
    std::memcpy(&arp->arp_data.arp_tip, target.bytes.data(), 4);
    return kMinimumEthernetFrame;
  }

  const size_t length =
      sizeof(rte_ether_hdr) + kIpv6Length + kNeighborMessageLength + kLinkLayerOptionLength;
  if (capacity < length) return 0;
  std::memset(out, 0, length);
  // The solicited-node group ff02::1:ffXX:XXXX and its MAC 33:33:ff:XX:XX:XX (RFC 4291, 2.7.1).
  uint8_t group[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xFF};
  std::memcpy(group + 13, target.bytes.data() + 13, 3);
  const uint8_t group_mac[6] = {
      0x33, 0x33, 0xFF, target.bytes[13], target.bytes[14], target.bytes[15]};
  std::memcpy(&ethernet->dst_addr, group_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(&ethernet->src_addr, source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  ethernet->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(ethernet + 1);
  ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
  ip->payload_len = rte_cpu_to_be_16(kNeighborMessageLength + kLinkLayerOptionLength);
  ip->proto = IPPROTO_ICMPV6;
  ip->hop_limits = kNeighborDiscoveryHopLimit;
  std::memcpy(ip->src_addr, source.bytes.data(), 16);
  std::memcpy(ip->dst_addr, group, 16);
  uint8_t* message = reinterpret_cast<uint8_t*>(ip + 1);
  message[0] = kNeighborSolicitation;
  std::memcpy(message + 8, target.bytes.data(), 16);
  uint8_t* option = message + kNeighborMessageLength;
  option[0] = kSourceLinkLayerOption;
  option[1] = 1;
  std::memcpy(option + 2, source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t checksum = rte_ipv6_udptcp_cksum(ip, message);
  std::memcpy(message + 2, &checksum, 2);
  return length;
}

bool NeighborTable::learn(uint16_t port, const IpAddress& address, const MacAddress& mac) {
  ResolvingNextHop& hop = hops_[NeighborKey(port, address)];
  if (hop.mac == mac) return false;
  hop.mac = mac;
  return true;
}

void NeighborTable::forget(uint16_t port, const IpAddress& address) {
  if (auto it = hops_.find(NeighborKey(port, address)); it != hops_.end()) it->second.mac.reset();
}

void NeighborTable::attach(uint16_t port, const IpAddress& address,
                           std::shared_ptr<NeighborSlot> slot) {
  hops_[NeighborKey(port, address)].slot = std::move(slot);
}

void NeighborTable::erase(uint16_t port, const IpAddress& address) {
  hops_.erase(NeighborKey(port, address));
}

std::optional<MacAddress> NeighborTable::find(uint16_t port, const IpAddress& address) const {
  auto it = hops_.find(NeighborKey(port, address));
  if (it == hops_.end()) return std::nullopt;
  return it->second.mac;
}

ResolvingNextHop NeighborTable::resolving(uint16_t port, const IpAddress& address) const {
  auto it = hops_.find(NeighborKey(port, address));
  if (it == hops_.end()) return {};
  return it->second;
}

}  // namespace berth
