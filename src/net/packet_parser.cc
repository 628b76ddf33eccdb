#include "berth/net/packet_parser.h"

#include <cstddef>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace berth {
namespace {

constexpr size_t kEthernetHeaderLength = 14;
constexpr size_t kVlanTagLength = 4;
constexpr size_t kMaxVlanTags = 2;
constexpr size_t kIpv4MinHeaderLength = 20;
constexpr size_t kIpv6HeaderLength = 40;
constexpr size_t kTcpMinHeaderLength = 20;
constexpr size_t kUdpHeaderLength = 8;
// RFC 8200 allows each extension header once (destination options twice); a longer chain is an
// attack on parsers, not traffic.
constexpr int kMaxIpv6ExtensionHeaders = 8;

constexpr uint8_t kIpv6HopByHop = 0;
constexpr uint8_t kIpv6Routing = 43;
constexpr uint8_t kIpv6Fragment = 44;
constexpr uint8_t kIpv6DestinationOptions = 60;

constexpr uint8_t kIcmpDestinationUnreachable = 3;
constexpr uint8_t kIcmpTimeExceeded = 11;
constexpr uint8_t kIcmpv6DestinationUnreachable = 1;
constexpr uint8_t kIcmpv6PacketTooBig = 2;
constexpr uint8_t kIcmpv6TimeExceeded = 3;

uint16_t loadBigEndian16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Each address and the port pair are written with one store of their full width: the flow hash
// and the service lookup read them back at once as 4-, 8- and 16-byte words, and a load that
// spans several narrower stores cannot be forwarded from them and waits for them to reach the
// cache (some 10-15 cycles per packet on the development VM's EPYC).
void copyAddress(const uint8_t* from, size_t length, std::array<uint8_t, 16>& to) {
  if (length == 16) {
    std::memcpy(to.data(), from, 16);
    return;
  }
  uint32_t address;
  std::memcpy(&address, from, 4);
#if defined(__SSE2__)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to.data()),
                   _mm_cvtsi32_si128(static_cast<int>(address)));
#else
  const uint64_t words[2] = {address, 0};
  std::memcpy(to.data(), words, 16);
#endif
}

// Ports in network byte order, exactly as on the wire: source then destination, both at once.
static_assert(offsetof(FlowKey, destination_port) == offsetof(FlowKey, source_port) + 2,
              "the ports are copied as one 4-byte word");
void copyPorts(const uint8_t* l4, FlowKey& flow) {
  uint32_t ports;
  std::memcpy(&ports, l4, 4);
  std::memcpy(&flow.source_port, &ports, 4);
}

// A parse starts from this copy in read-only data: building a fresh ParsedPacket{} on the stack
// and copying it made the copy's wide loads wait on the temporary's narrow stores, 3x the cost of
// parsing.
constexpr ParsedPacket kEmptyPacket{};

bool isExtensionHeader(uint8_t next_header) {
  return next_header == kIpv6HopByHop || next_header == kIpv6Routing ||
         next_header == kIpv6Fragment || next_header == kIpv6DestinationOptions;
}

// The result of walking an IPv6 extension chain within [start, end) of `ip`.
struct Ipv6Payload {
  uint8_t protocol = 0;
  size_t offset = 0;  // of the upper-layer header, from the IPv6 header
  bool fragment = false;
  bool later_fragment = false;
};

ParseError walkIpv6Extensions(const uint8_t* ip, size_t end, Ipv6Payload& payload) {
  uint8_t next_header = ip[6];
  size_t offset = kIpv6HeaderLength;
  for (int count = 0; isExtensionHeader(next_header); ++count) {
    if (count == kMaxIpv6ExtensionHeaders) return ParseError::kIpv6ExtensionChainTooLong;
    if (offset + 8 > end) return ParseError::kIpv6ExtensionChainTruncated;
    size_t header_length = 8;
    if (next_header == kIpv6Fragment) {
      const uint16_t offset_and_flags = loadBigEndian16(ip + offset + 2);
      payload.fragment = true;
      payload.later_fragment = (offset_and_flags >> 3) != 0;
    } else {
      header_length = (size_t{ip[offset + 1]} + 1) * 8;
      if (offset + header_length > end) return ParseError::kIpv6ExtensionChainTruncated;
    }
    next_header = ip[offset];
    offset += header_length;
  }
  payload.protocol = next_header;
  payload.offset = offset;
  return ParseError::kNone;
}

bool isIcmpError(IpFamily family, uint8_t type) {
  if (family == IpFamily::kIpv4) {
    return type == kIcmpDestinationUnreachable || type == kIcmpTimeExceeded;
  }
  return type == kIcmpv6DestinationUnreachable || type == kIcmpv6PacketTooBig ||
         type == kIcmpv6TimeExceeded;
}

// The packet embedded in an ICMP error: what a backend sent from the VIP to the client, cut
// short. Only its IP header and the first 8 bytes after it are needed, and guaranteed present.
ParseError parseIcmpErrorInner(IpFamily family, const uint8_t* inner, size_t length,
                               ParsedPacket& packet) {
  FlowKey embedded;
  embedded.family = family;
  size_t l4_offset = 0;
  bool later_fragment = false;
  if (family == IpFamily::kIpv4) {
    if (length < kIpv4MinHeaderLength || (inner[0] >> 4) != 4) {
      return ParseError::kIcmpInnerTruncated;
    }
    l4_offset = static_cast<size_t>(inner[0] & 0x0F) * 4;
    if (l4_offset < kIpv4MinHeaderLength || l4_offset > length) {
      return ParseError::kIcmpInnerTruncated;
    }
    embedded.protocol = inner[9];
    later_fragment = (loadBigEndian16(inner + 6) & 0x1FFF) != 0;
    copyAddress(inner + 12, 4, embedded.source);
    copyAddress(inner + 16, 4, embedded.destination);
  } else {
    if (length < kIpv6HeaderLength || (inner[0] >> 4) != 6) {
      return ParseError::kIcmpInnerTruncated;
    }
    Ipv6Payload payload;
    if (walkIpv6Extensions(inner, length, payload) != ParseError::kNone) {
      return ParseError::kIcmpInnerTruncated;
    }
    embedded.protocol = payload.protocol;
    later_fragment = payload.later_fragment;
    l4_offset = payload.offset;
    copyAddress(inner + 8, 16, embedded.source);
    copyAddress(inner + 24, 16, embedded.destination);
  }
  const bool has_ports = embedded.protocol == kProtocolTcp || embedded.protocol == kProtocolUdp;
  if (has_ports && !later_fragment) {
    if (l4_offset + 4 > length) return ParseError::kIcmpInnerTruncated;
    copyPorts(inner + l4_offset, embedded);
  }

  // Reverse it: the error belongs to the client-to-VIP flow whose reply it reports on.
  FlowKey& flow = packet.flow;
  flow.family = family;
  flow.protocol = embedded.protocol;
  flow.source = embedded.destination;
  flow.destination = embedded.source;
  flow.source_port = embedded.destination_port;
  flow.destination_port = embedded.source_port;
  packet.icmp_error = true;
  return ParseError::kNone;
}

// The transport header at `l4`, `length` bytes up to the end of the IP packet.
ParseError parseTransport(const uint8_t* l4, size_t length, ParsedPacket& packet) {
  switch (packet.flow.protocol) {
    case kProtocolTcp: {
      if (length < kTcpMinHeaderLength) return ParseError::kTruncatedTcp;
      const size_t header_length = static_cast<size_t>(l4[12] >> 4) * 4;
      if (header_length < kTcpMinHeaderLength || header_length > length) {
        return ParseError::kTruncatedTcp;
      }
      copyPorts(l4, packet.flow);
      packet.tcp_flags = l4[13];
      return ParseError::kNone;
    }
    case kProtocolUdp: {
      if (length < kUdpHeaderLength) return ParseError::kTruncatedUdp;
      const uint16_t udp_length = loadBigEndian16(l4 + 4);
      // A first fragment's UDP length covers the whole datagram, more than this fragment holds.
      const bool beyond_packet = udp_length > length && !packet.fragment;
      if (udp_length < kUdpHeaderLength || beyond_packet) return ParseError::kTruncatedUdp;
      copyPorts(l4, packet.flow);
      return ParseError::kNone;
    }
    case kProtocolIcmp:
    case kProtocolIcmpv6: {
      const IpFamily family = packet.flow.family;
      const uint8_t expected = family == IpFamily::kIpv4 ? kProtocolIcmp : kProtocolIcmpv6;
      if (packet.flow.protocol != expected) return ParseError::kNone;  // ICMP of the other family
      if (length < kIcmpHeaderLength) return ParseError::kTruncatedIcmp;
      if (!isIcmpError(family, l4[0])) return ParseError::kNone;
      return parseIcmpErrorInner(family, l4 + kIcmpHeaderLength, length - kIcmpHeaderLength,
                                 packet);
    }
    default:
      return ParseError::kNone;  // no ports: the service lookup decides
  }
}

ParseError parseIpv4(const uint8_t* ip, size_t available, ParsedPacket& packet) {
  if (available < kIpv4MinHeaderLength) return ParseError::kTruncatedIpv4;
  if ((ip[0] >> 4) != 4) return ParseError::kIpv4BadVersion;
  const size_t header_length = static_cast<size_t>(ip[0] & 0x0F) * 4;
  if (header_length < kIpv4MinHeaderLength) return ParseError::kIpv4HeaderTooShort;
  if (header_length > available) return ParseError::kIpv4HeaderBeyondFrame;
  const uint16_t total_length = loadBigEndian16(ip + 2);
  if (total_length > available) return ParseError::kIpv4TotalLengthBeyondFrame;
  if (total_length < header_length) return ParseError::kIpv4TotalLengthBelowHeader;

  const uint16_t flags_and_offset = loadBigEndian16(ip + 6);
  packet.ip_length = total_length;
  packet.hop_limit = ip[8];
  packet.dont_fragment = (flags_and_offset & 0x4000) != 0;
  packet.fragment = (flags_and_offset & 0x3FFF) != 0;  // more-fragments flag or an offset
  packet.later_fragment = (flags_and_offset & 0x1FFF) != 0;
  FlowKey& flow = packet.flow;
  flow.family = IpFamily::kIpv4;
  flow.protocol = ip[9];
  copyAddress(ip + 12, 4, flow.source);
  copyAddress(ip + 16, 4, flow.destination);
  if (packet.later_fragment) return ParseError::kNone;  // no transport header to read
  packet.l4_offset = static_cast<uint16_t>(packet.l3_offset + header_length);
  return parseTransport(ip + header_length, total_length - header_length, packet);
}

ParseError parseIpv6(const uint8_t* ip, size_t available, ParsedPacket& packet) {
  if (available < kIpv6HeaderLength) return ParseError::kTruncatedIpv6;
  if ((ip[0] >> 4) != 6) return ParseError::kIpv6BadVersion;
  const size_t end = kIpv6HeaderLength + loadBigEndian16(ip + 4);
  if (end > available) return ParseError::kIpv6PayloadLengthBeyondFrame;

  packet.ip_length = static_cast<uint16_t>(end);
  packet.hop_limit = ip[7];
  FlowKey& flow = packet.flow;
  flow.family = IpFamily::kIpv6;
  copyAddress(ip + 8, 16, flow.source);
  copyAddress(ip + 24, 16, flow.destination);
  Ipv6Payload payload;
  if (const ParseError error = walkIpv6Extensions(ip, end, payload); error != ParseError::kNone) {
    return error;
  }
  flow.protocol = payload.protocol;
  packet.fragment = payload.fragment;
  packet.later_fragment = payload.later_fragment;
  if (packet.later_fragment) return ParseError::kNone;
  packet.l4_offset = static_cast<uint16_t>(packet.l3_offset + payload.offset);
  return parseTransport(ip + payload.offset, end - payload.offset, packet);
}

// Most frames berth sees are untagged IPv4 TCP or UDP with a 20-byte header and no
// fragmentation. They are parsed here with one test of the EtherType, version and IHL together and
// the length checks that case needs, about a third of the instructions of the general walk below,
// which takes every other frame, and this one too wherever a check fails, so that each frame gets
// exactly the result, and the error, of the general walk.
bool parseUntaggedIpv4(const uint8_t* frame, size_t length, ParsedPacket& packet) {
  constexpr size_t kIpStart = kEthernetHeaderLength;
  constexpr size_t kL4Start = kIpStart + kIpv4MinHeaderLength;
  if (length < kL4Start + kUdpHeaderLength) return false;
  // EtherType 0x0800 and version 4, IHL 5: bytes 12 to 14.
  uint32_t type_and_version;
  std::memcpy(&type_and_version, frame + 12, 4);
  if ((type_and_version & 0x00FFFFFF) != 0x00450008) return false;
  const uint8_t* ip = frame + kIpStart;
  const size_t total_length = loadBigEndian16(ip + 2);
  const uint16_t flags_and_offset = loadBigEndian16(ip + 6);
  // Not a fragment, and the IP packet within the frame with room for a UDP header at least.
  if ((flags_and_offset & 0x3FFF) != 0 || total_length > length - kIpStart ||
      total_length < kIpv4MinHeaderLength + kUdpHeaderLength) {
    return false;
  }
  const uint8_t* l4 = ip + kIpv4MinHeaderLength;
  const uint8_t protocol = ip[9];
  uint8_t tcp_flags = 0;
  if (protocol == kProtocolTcp) {
    if (total_length < kIpv4MinHeaderLength + kTcpMinHeaderLength) return false;
    const size_t header_length = static_cast<size_t>(l4[12] >> 4) * 4;
    if (header_length < kTcpMinHeaderLength ||
        header_length > total_length - kIpv4MinHeaderLength) {
      return false;
    }
    tcp_flags = l4[13];
  } else if (protocol == kProtocolUdp) {
    const size_t udp_length = loadBigEndian16(l4 + 4);
    if (udp_length < kUdpHeaderLength || udp_length > total_length - kIpv4MinHeaderLength) {
      return false;
    }
  } else {
    return false;
  }
  packet = kEmptyPacket;
  packet.type = FrameType::kIp;
  FlowKey& flow = packet.flow;
  flow.protocol = protocol;
  copyAddress(ip + 12, 4, flow.source);
  copyAddress(ip + 16, 4, flow.destination);
  copyPorts(l4, flow);
  packet.l3_offset = kIpStart;
  packet.l4_offset = kL4Start;
  packet.ip_length = static_cast<uint16_t>(total_length);
  packet.hop_limit = ip[8];
  packet.dont_fragment = (flags_and_offset & 0x4000) != 0;
  packet.tcp_flags = tcp_flags;
  return true;
}

}  // namespace

absl::string_view toString(ParseError error) {
  static constexpr absl::string_view kNames[] = {"none", BERTH_PARSE_ERRORS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, error);
}

ParseError parsePacket(const uint8_t* frame, size_t length, ParsedPacket& packet) {
  if (parseUntaggedIpv4(frame, length, packet)) return ParseError::kNone;
  packet = kEmptyPacket;
  if (length < kEthernetHeaderLength) return ParseError::kShortFrame;
  uint16_t ether_type = loadBigEndian16(frame + 12);
  size_t offset = kEthernetHeaderLength;
  while (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) {
    if (packet.vlan_tags == kMaxVlanTags) return ParseError::kTooManyVlanTags;
    if (offset + kVlanTagLength > length) return ParseError::kTruncatedVlan;
    packet.vlan_ids[packet.vlan_tags++] = loadBigEndian16(frame + offset) & 0x0FFF;
    ether_type = loadBigEndian16(frame + offset + 2);
    offset += kVlanTagLength;
  }
  packet.l3_offset = static_cast<uint16_t>(offset);

  switch (ether_type) {
    case kEtherTypeIpv4:
      packet.type = FrameType::kIp;
      return parseIpv4(frame + offset, length - offset, packet);
    case kEtherTypeIpv6:
      packet.type = FrameType::kIp;
      return parseIpv6(frame + offset, length - offset, packet);
    case kEtherTypeArp:
      packet.type = FrameType::kArp;
      return ParseError::kNone;
    default:
      packet.type = FrameType::kOther;
      return ParseError::kNone;
  }
}

}  // namespace berth
