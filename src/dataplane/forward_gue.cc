// gue: the client's packet as the payload of an outer UDP datagram to the configured port, with
// no GUE header (GUE variant 1, RFC 8086's direct IP encapsulation, as Katran sends it): the
// backend's fou/gue receiver reads the IP version from the payload's first nibble.

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "berth/dataplane/forwarding.h"
#include "dataplane/encapsulation.h"

namespace berth {

ForwardResult forwardGue(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                         uint32_t flow_hash) {
  uint8_t* l4;
  size_t inner_length;
  const ForwardResult result =
      encapsulate(frame, packet, target, kUdpLength, IPPROTO_UDP, flow_hash, l4, inner_length);
  if (result != ForwardResult::kSend) return result;
  auto* udp = reinterpret_cast<rte_udp_hdr*>(l4);
  // A source port in the ephemeral range chosen by the flow hash: the backend's NIC spreads
  // flows over its queues by RSS on the outer ports.
  udp->src_port = rte_cpu_to_be_16(static_cast<uint16_t>(0xC000 | (flow_hash & 0x3FFF)));
  udp->dst_port = rte_cpu_to_be_16(target.gue_port);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(kUdpLength + inner_length));
  udp->dgram_cksum = 0;
  if (!target.backend.isV4()) {
    // Zero is allowed over IPv4 and is what tunnels send; over IPv6 receivers reject it unless
    // configured otherwise (RFC 6935), so compute it, or have the NIC sum the payload from the
    // pseudo-header's sum.
    const auto* outer =
        reinterpret_cast<const rte_ipv6_hdr*>(frame.data + outerEthernetLength(target));
    if (target.checksum_offload & kChecksumOffloadUdp) {
      udp->dgram_cksum = rte_ipv6_phdr_cksum(outer, 0);
      frame.tx_checksums = kChecksumOffloadUdp;
      frame.l2_length = static_cast<uint8_t>(outerEthernetLength(target));
      frame.l3_length = kOuterIpv6Length;
    } else {
      udp->dgram_cksum = rte_ipv6_udptcp_cksum(outer, udp);
    }
  }
  return ForwardResult::kSend;
}

}  // namespace berth
