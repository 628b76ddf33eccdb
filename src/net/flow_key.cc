#include "berth/net/flow_key.h"

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

std::string endpoint(IpFamily family, const std::array<uint8_t, 16>& bytes, uint16_t port) {
  IpAddress address;
  address.family = family;
  address.bytes = bytes;
  if (family == IpFamily::kIpv4) return absl::StrCat(address.toString(), ":", ntohs(port));
  return absl::StrCat("[", address.toString(), "]:", ntohs(port));
}

std::string protocolName(uint8_t protocol) {
  switch (protocol) {
    case kProtocolTcp:
      return "tcp";
    case kProtocolUdp:
      return "udp";
    case kProtocolIcmp:
      return "icmp";
    case kProtocolIcmpv6:
      return "icmpv6";
    default:
      return absl::StrCat("proto-", protocol);
  }
}

}  // namespace

FlowKey FlowKey::make(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
                      uint16_t destination_port, uint8_t protocol) {
  FlowKey key;
  key.family = source.family;
  key.source = source.bytes;
  key.destination = destination.bytes;
  key.source_port = htons(source_port);
  key.destination_port = htons(destination_port);
  key.protocol = protocol;
  return key;
}

std::string FlowKey::toString() const {
  return absl::StrCat(protocolName(protocol), " ", endpoint(family, source, source_port), " -> ",
                      endpoint(family, destination, destination_port));
}

}  // namespace berth
