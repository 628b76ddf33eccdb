// libFuzzer target for the packet parser: any bytes, any length. Besides the sanitizers'
// checks, the offsets the parser reports for a frame it accepts must lie inside the frame. A
// frame it accepts then goes through Full-NAT's rewrites as the datapath would put it (a TCP or
// UDP packet's endpoints, an ICMP error's translation), which must stay inside it too, and a TCP
// segment through a PROXY protocol session's stream both ways (the header inserted into its
// tailroom, or only shifted), which must stay inside the frame and its tailroom, and through
// NAT64's translations (nat64.h), which must stay inside the frame and its headroom. A TCP
// segment is also read as a path probe's answer (path_probe.h), whose payload must lie inside
// the frame, and given to an HTTP probe's conversation waiting for exactly that segment.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "berth/dataplane/nat64.h"
#include "berth/dataplane/nat_rewrite.h"
#include "berth/dataplane/path_probe.h"
#include "berth/dataplane/proxy_stream.h"
#include "berth/health/path_conversation.h"
#include "berth/net/flow_key.h"
#include "berth/net/packet_parser.h"

namespace {

// The rewrites on a copy exactly the frame's size, so that the sanitizer sees any byte past it.
void rewriteAsFullNat(const uint8_t* data, size_t size, const berth::ParsedPacket& packet) {
  const uint8_t protocol = packet.flow.protocol;
  if (packet.later_fragment) return;
  std::vector<uint8_t> copy(data, data + size);
  berth::Frame frame{copy.data(), size, 0, 0};
  berth::NatEndpoints to;
  std::memset(to.source.data(), 0x5a, to.source.size());
  std::memset(to.destination.data(), 0xa5, to.destination.size());
  to.source_port = 0x1234;
  to.destination_port = 0x4321;
  if (packet.icmp_error) {
    berth::rewriteIcmpError(frame, packet, to.destination, to);
  } else if (protocol == berth::kProtocolTcp || protocol == berth::kProtocolUdp) {
    berth::rewriteEndpoints(frame, packet, to);
  }
}

// A TCP segment of a session whose stream starts at its own sequence number (so that the header
// goes in front of it), from the client's side into a buffer with just the header's room
// behind it, then as a backend's segment; and an ICMP error's embedded sequence number.
void streamAsProxySession(const uint8_t* data, size_t size, const berth::ParsedPacket& packet) {
  if (packet.later_fragment || packet.l4_offset == 0) return;
  berth::NatSession session{};
  session.client_family = packet.flow.family;
  session.proxy_header = berth::ProxyHeaderState::kPending;
  if (packet.icmp_error) {
    std::vector<uint8_t> copy(data, data + size);
    berth::Frame frame{copy.data(), size, 0, 0};
    berth::unshiftEmbeddedSequence(frame, packet, session);
    return;
  }
  if (packet.flow.protocol != berth::kProtocolTcp) return;
  const size_t room = berth::kProxyHeaderMaxLength;
  std::vector<uint8_t> copy(size + room);
  std::memcpy(copy.data(), data, size);
  berth::Frame frame{copy.data(), size, 0, room};
  const uint8_t* sequence = data + packet.l4_offset + 4;
  session.client_stream_start = uint32_t{sequence[0]} << 24 | uint32_t{sequence[1]} << 16 |
                                uint32_t{sequence[2]} << 8 | sequence[3];
  berth::ParsedPacket resized = packet;
  berth::ProxyEndpoints header;
  header.family = packet.flow.family;
  berth::proxyFromClient(frame, resized, session, header, 1500);
  if (frame.length + frame.tailroom != size + room) __builtin_trap();
  berth::proxyFromBackend(frame, resized, session);
}

// The packet translated to the other IP version as NAT64 would (an ICMP error's too), in a
// buffer with just the headroom the growth takes in front of it.
void translateAsNat64(const uint8_t* data, size_t size, const berth::ParsedPacket& packet) {
  const uint8_t protocol = packet.flow.protocol;
  if (packet.later_fragment || packet.l4_offset == 0) return;
  if (!packet.icmp_error && protocol != berth::kProtocolTcp && protocol != berth::kProtocolUdp) {
    return;
  }
  constexpr size_t kHeadroom = 40;
  std::vector<uint8_t> copy(kHeadroom + size);
  std::memcpy(copy.data() + kHeadroom, data, size);
  berth::Frame frame{copy.data() + kHeadroom, size, kHeadroom, 0};
  berth::ParsedPacket translated = packet;
  berth::NatEndpoints to;
  std::memset(to.source.data(), 0x5a, to.source.size());
  std::memset(to.destination.data(), 0xa5, to.destination.size());
  const bool v4 = packet.flow.family == berth::IpFamily::kIpv4;
  if (packet.icmp_error) {
    if (v4) {
      berth::translateIcmpErrorToIpv6(frame, translated, to.source, to.destination, to);
    } else {
      berth::translateIcmpErrorToIpv4(frame, translated, to.source, to.destination, to);
    }
  } else if (v4) {
    berth::translateToIpv6(frame, translated, to);
  } else {
    berth::translateToIpv4(frame, translated, to, 0x1234);
  }
  if (frame.data < copy.data() || frame.data + frame.length > copy.data() + copy.size()) {
    __builtin_trap();
  }
  if (size_t{translated.l3_offset} + translated.ip_length > frame.length) __builtin_trap();
}

// The segment read from a copy exactly the frame's size, as the prober reads an answer, then
// given to a conversation whose SYN it acknowledges and whose next expected byte it carries.
void readAsPathProbeAnswer(const uint8_t* data, size_t size, const berth::ParsedPacket& packet) {
  std::vector<uint8_t> copy(data, data + size);
  const std::optional<berth::ReceivedSegment> received =
      berth::readTcpSegment(copy.data(), size, packet);
  if (!received) return;
  const auto* payload = reinterpret_cast<const uint8_t*>(received->segment.payload.data());
  if (payload < copy.data() || payload + received->segment.payload.size() > copy.data() + size) {
    __builtin_trap();
  }
  const berth::TcpSegment& segment = received->segment;
  berth::PathConversation conversation(segment.acknowledgement - 1, "GET / HTTP/1.0\r\n\r\n");
  conversation.receive(berth::TcpSegment{
      berth::kTcpSyn | berth::kTcpAck, segment.sequence - 1, segment.acknowledgement, {}});
  conversation.receive(segment);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::ParsedPacket packet;
  const berth::ParseError error = berth::parsePacket(data, size, packet);
  if (static_cast<size_t>(error) >= berth::kParseErrorCount) __builtin_trap();
  if (error == berth::ParseError::kNone && packet.type == berth::FrameType::kIp) {
    if (size_t{packet.l3_offset} + packet.ip_length > size) __builtin_trap();
    if (packet.l4_offset > size) __builtin_trap();
    if (packet.l4_offset != 0 && packet.l4_offset < packet.l3_offset) __builtin_trap();
    rewriteAsFullNat(data, size, packet);
    streamAsProxySession(data, size, packet);
    translateAsNat64(data, size, packet);
    readAsPathProbeAnswer(data, size, packet);
  }
  return 0;
}
