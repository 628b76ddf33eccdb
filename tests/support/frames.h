#pragma once

#include <cstring>
#include <vector>

#include "berth/dataplane/forwarding.h"
#include "berth/net/packet_parser.h"
#include "support/packet_builder.h"

namespace berth {

// A received frame in a buffer with room in front and behind, as an mbuf holds it, and its
// parse. `original` keeps the bytes as they arrived, to compare with what a rewrite leaves.
struct ReceivedFrame {
  std::vector<uint8_t> buffer;
  Frame frame;
  ParsedPacket packet;
  ParseError parse_error;
  Bytes original;

  explicit ReceivedFrame(const Bytes& bytes, size_t headroom = 128, size_t tailroom = 128)
      : buffer(headroom + bytes.size() + tailroom), original(bytes) {
    std::memcpy(buffer.data() + headroom, bytes.data(), bytes.size());
    frame = {buffer.data() + headroom, bytes.size(), headroom, tailroom};
    parse_error = parsePacket(frame.data, frame.length, packet);
  }

  // The IP packet as it arrived, without L2 header or padding.
  Bytes originalIpPacket() const {
    return Bytes(original.begin() + packet.l3_offset,
                 original.begin() + packet.l3_offset + packet.ip_length);
  }
  Bytes sent() const { return Bytes(frame.data, frame.data + frame.length); }
};

// The port and gateway the forwarding tests send through: the port at 198.18.0.10 /
// 2001:db8::10 with MAC 02:00:00:00:00:10, the gateway at 02:00:00:00:00:fe, GUE port 6080 and
// MTU 1500, on `vlan` (0: untagged).
inline ForwardingTarget testTarget(const IpAddress& backend, uint16_t vlan = 0) {
  ForwardingTarget target;
  target.backend = backend;
  target.outer_source =
      backend.isV4() ? IpAddress::v4(198, 18, 0, 10) : *IpAddress::parse("2001:db8::10");
  target.source_mac = *MacAddress::parse("02:00:00:00:00:10");
  target.destination_mac = *MacAddress::parse("02:00:00:00:00:fe");
  target.gue_port = 6080;
  target.mtu = 1500;
  target.vlan = vlan;
  prepareOuterHeaders(target);
  return target;
}

}  // namespace berth
