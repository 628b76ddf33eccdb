// gre: the client's packet behind an outer IP header and a 4-byte GRE header with no options,
// the encapsulation Maglev sends.

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_ether.h>

#include <cstring>

#include "berth/dataplane/forwarding.h"
#include "dataplane/encapsulation.h"

namespace berth {

ForwardResult forwardGre(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                         uint32_t flow_hash) {
  uint8_t* gre;
  size_t inner_length;
  const ForwardResult result =
      encapsulate(frame, packet, target, kGreLength, IPPROTO_GRE, flow_hash, gre, inner_length);
  if (result != ForwardResult::kSend) return result;
  const uint16_t flags_and_version = 0;
  const uint16_t protocol = rte_cpu_to_be_16(
      packet.flow.family == IpFamily::kIpv4 ? RTE_ETHER_TYPE_IPV4 : RTE_ETHER_TYPE_IPV6);
  std::memcpy(gre, &flags_and_version, 2);
  std::memcpy(gre + 2, &protocol, 2);
  return ForwardResult::kSend;
}

}  // namespace berth
