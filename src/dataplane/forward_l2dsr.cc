// l2dsr: the frame goes to the backend's MAC on the same L2 segment with the IP packet unchanged;
// the backend holds the VIP on its loopback and replies to the client directly.

#include <cstring>

#include "berth/dataplane/forwarding.h"

namespace berth {
namespace {

constexpr size_t kMacsLength = 12;
constexpr size_t kTagLength = 4;
constexpr uint16_t kVlanIdMask = 0x0FFF;

// Puts the frame on the target's VLAN: the outer tag's ID rewritten (its priority kept), a tag
// added after the MACs, or the outer tag taken out. Only a two-arm egress on another VLAN than
// the frame came in on needs this (docs/two-arm.md).
ForwardResult retag(Frame& frame, const ParsedPacket& packet, uint16_t vlan) {
  if (packet.vlan_tags > 0 && vlan != 0) {
    uint8_t* tci = frame.data + kMacsLength + 2;
    tci[0] = static_cast<uint8_t>((tci[0] & ~(kVlanIdMask >> 8)) | (vlan >> 8));
    tci[1] = static_cast<uint8_t>(vlan);
  } else if (packet.vlan_tags == 0) {
    if (frame.headroom < kTagLength) return ForwardResult::kNoHeadroom;
    std::memmove(frame.data - kTagLength, frame.data, kMacsLength);
    frame.data -= kTagLength;
    frame.length += kTagLength;
    frame.headroom -= kTagLength;
    const uint8_t tag[kTagLength] = {0x81, 0x00, static_cast<uint8_t>(vlan >> 8),
                                     static_cast<uint8_t>(vlan)};
    std::memcpy(frame.data + kMacsLength, tag, kTagLength);
  } else {
    std::memmove(frame.data + kTagLength, frame.data, kMacsLength);
    frame.data += kTagLength;
    frame.length -= kTagLength;
    frame.headroom += kTagLength;
  }
  return ForwardResult::kSend;
}

}  // namespace

ForwardResult forwardL2Dsr(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                           uint32_t /*flow_hash*/) {
  // The IP packet does not grow, so the MTU that let it in lets it out. The frame keeps its tags
  // when it leaves on the VLAN it came in on, as it does unless a two-arm egress is elsewhere.
  const uint16_t received_vlan = packet.vlan_tags > 0 ? packet.vlan_ids[0] : uint16_t{0};
  if (received_vlan != target.vlan) {
    if (const ForwardResult result = retag(frame, packet, target.vlan);
        result != ForwardResult::kSend) {
      return result;
    }
  }
  std::memcpy(frame.data, target.destination_mac.bytes.data(), 6);
  std::memcpy(frame.data + 6, target.source_mac.bytes.data(), 6);
  return ForwardResult::kSend;
}

}  // namespace berth
