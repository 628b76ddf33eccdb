// l2dsr: the frame goes to the backend's MAC on the same L2 segment with the IP packet unchanged;
// the backend holds the VIP on its loopback and replies to the client directly.

#include <cstring>

#include "berth/dataplane/forwarding.h"

namespace berth {

ForwardResult forwardL2Dsr(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                           uint32_t /*flow_hash*/) {
  // The frame does not grow, so the MTU that let it in lets it out; VLAN tags stay, since the
  // backend is on the segment the packet came in on.
  (void)packet;
  std::memcpy(frame.data, target.destination_mac.bytes.data(), 6);
  std::memcpy(frame.data + 6, target.source_mac.bytes.data(), 6);
  return ForwardResult::kSend;
}

}  // namespace berth
