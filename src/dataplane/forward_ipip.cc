// ipip: the client's packet inside a bare outer IP header (IPv4-in-IPv4 or IPv6-in-IPv6), which
// the backend's ipip/ip6tnl device takes off, as with Katran's defaults.

#include <netinet/in.h>

#include "berth/dataplane/forwarding.h"
#include "dataplane/encapsulation.h"

namespace berth {

ForwardResult forwardIpip(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                          uint32_t flow_hash) {
  const uint8_t protocol = packet.flow.family == IpFamily::kIpv4 ? IPPROTO_IPIP : IPPROTO_IPV6;
  uint8_t* no_mode_header;
  size_t inner_length;
  return encapsulate(frame, packet, target, 0, protocol, flow_hash, no_mode_header, inner_length);
}

}  // namespace berth
