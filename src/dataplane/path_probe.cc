#include "berth/dataplane/path_probe.h"

#include <rte_ip.h>

#include <cstring>

#include "berth/net/checksum.h"
#include "berth/net/flow_hash.h"
#include "berth/net/flow_key.h"
#include "dataplane/ip_headers.h"

namespace berth {
namespace {

constexpr size_t kEthernetLength = 14;
constexpr size_t kIpv4Length = 20;
constexpr size_t kIpv6Length = 40;
constexpr size_t kTcpLength = 20;
constexpr size_t kMssOptionLength = 4;
constexpr uint8_t kHopLimit = 64;
constexpr uint16_t kWindow = 65535;

void writeTcpHeader(uint8_t* tcp, const TcpEndpoints& endpoints, const TcpSegment& segment,
                    size_t header_length, uint16_t maximum_segment_size) {
  storeBigEndian16(tcp, endpoints.local_port);
  storeBigEndian16(tcp + 2, endpoints.remote_port);
  storeBigEndian32(tcp + 4, segment.sequence);
  storeBigEndian32(tcp + 8, segment.acknowledgement);
  tcp[12] = static_cast<uint8_t>((header_length / 4) << 4);
  tcp[13] = segment.flags;
  storeBigEndian16(tcp + 14, (segment.flags & kTcpRst) != 0 ? 0 : kWindow);
  tcp[16] = 0;  // checksum, below
  tcp[17] = 0;
  tcp[18] = 0;  // urgent pointer
  tcp[19] = 0;
  if (header_length > kTcpLength) {
    tcp[20] = 2;  // MSS (RFC 9293, 3.2)
    tcp[21] = kMssOptionLength;
    storeBigEndian16(tcp + 22, maximum_segment_size);
  }
  if (!segment.payload.empty()) {
    std::memcpy(tcp + header_length, segment.payload.data(), segment.payload.size());
  }
}

}  // namespace

ForwardResult buildPathProbeFrame(Frame& frame, ForwardFunction forward,
                                  const ForwardingTarget& target, const TcpEndpoints& endpoints,
                                  const TcpSegment& segment, uint16_t maximum_segment_size) {
  const bool v4 = endpoints.local.isV4();
  const size_t ip_length = v4 ? kIpv4Length : kIpv6Length;
  const size_t tcp_length = kTcpLength + ((segment.flags & kTcpSyn) != 0 ? kMssOptionLength : 0);
  const size_t transport_length = tcp_length + segment.payload.size();
  const size_t length = kEthernetLength + ip_length + transport_length;
  if (length > frame.length + frame.tailroom) return ForwardResult::kNoHeadroom;
  frame.tailroom = frame.length + frame.tailroom - length;
  frame.length = length;

  uint8_t* ethernet = frame.data;
  std::memcpy(ethernet, target.destination_mac.bytes.data(), 6);
  std::memcpy(ethernet + 6, target.source_mac.bytes.data(), 6);
  storeBigEndian16(ethernet + 12, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  uint8_t* ip = ethernet + kEthernetLength;
  uint8_t* tcp = ip + ip_length;
  writeTcpHeader(tcp, endpoints, segment, tcp_length, maximum_segment_size);
  uint16_t checksum = 0;
  if (v4) {
    writeIpv4Header(ip, 0, ip_length + transport_length, 0, true, kHopLimit, kProtocolTcp,
                    endpoints.local.bytes.data(), endpoints.remote.bytes.data());
    checksum = rte_ipv4_udptcp_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip), tcp);
  } else {
    writeIpv6Header(ip, 0, transport_length, kProtocolTcp, kHopLimit, endpoints.local.bytes.data(),
                    endpoints.remote.bytes.data());
    checksum = rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(ip), tcp);
  }
  std::memcpy(tcp + 16, &checksum, 2);

  ParsedPacket packet;
  if (parsePacket(frame.data, frame.length, packet) != ParseError::kNone) {
    return ForwardResult::kNoHeadroom;  // unreachable: the frame was just written whole
  }
  return forward(frame, packet, target,
                 flowHash(packet.flow, HashFields::kFiveTuple, kDefaultFlowHashSeed));
}

std::optional<ReceivedSegment> readTcpSegment(const uint8_t* frame, size_t length,
                                              const ParsedPacket& packet) {
  if (packet.type != FrameType::kIp || packet.flow.protocol != kProtocolTcp || packet.fragment ||
      packet.icmp_error || packet.l4_offset == 0) {
    return std::nullopt;
  }
  const size_t ip_end = size_t{packet.l3_offset} + packet.ip_length;
  if (ip_end > length || packet.l4_offset + kTcpLength > ip_end) return std::nullopt;
  const uint8_t* tcp = frame + packet.l4_offset;
  const size_t header_length = size_t{tcp[12]} >> 4 << 2;
  if (header_length < kTcpLength || packet.l4_offset + header_length > ip_end) {
    return std::nullopt;
  }
  const uint8_t* ip = frame + packet.l3_offset;
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  // DPDK's IPv6 sum takes the whole payload for the segment: extension headers are not summed
  // right, and no backend's answer to berth carries one.
  if (!v4 && packet.l4_offset != packet.l3_offset + kIpv6Length) return std::nullopt;
  // Summed with the checksum it carries, a segment that holds sums to 0xffff, whose complement
  // the helpers return: the check DPDK's experimental *_cksum_verify make. They sum the IP
  // header's length field's worth of transport, checked above to lie in the frame.
  const uint16_t sum = v4 ? rte_ipv4_udptcp_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip), tcp)
                          : rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(ip), tcp);
  if (sum != 0) return std::nullopt;

  ReceivedSegment received;
  const size_t address_length = v4 ? 4 : 16;
  received.endpoints.local.family = packet.flow.family;
  received.endpoints.remote.family = packet.flow.family;
  std::memcpy(received.endpoints.local.bytes.data(), packet.flow.destination.data(),
              address_length);
  std::memcpy(received.endpoints.remote.bytes.data(), packet.flow.source.data(), address_length);
  received.endpoints.local_port = loadBigEndian16(tcp + 2);
  received.endpoints.remote_port = loadBigEndian16(tcp);
  received.segment.sequence = loadBigEndian32(tcp + 4);
  received.segment.acknowledgement = loadBigEndian32(tcp + 8);
  received.segment.flags = tcp[13];
  received.segment.payload = absl::string_view(reinterpret_cast<const char*>(tcp + header_length),
                                               ip_end - packet.l4_offset - header_length);
  return received;
}

}  // namespace berth
