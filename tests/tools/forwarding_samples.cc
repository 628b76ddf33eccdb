// Writes one frame per forwarding mode and exception reply to a pcap file, for
// tests/tools/forwarding_scapy_test.py to decode with scapy, an independent decoder: the outer
// headers and every checksum are checked by code that shares nothing with berth's.
//
// Usage: forwarding_samples OUTPUT.pcap

#include <cstdio>
#include <cstring>
#include <vector>

#include "berth/dataplane/forwarding.h"
#include "berth/dataplane/icmp_reply.h"
#include "berth/dataplane/nat64.h"
#include "berth/dataplane/nat_rewrite.h"
#include "berth/dataplane/neighbor_reply.h"
#include "support/checksums.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

constexpr size_t kHeadroom = 128;
constexpr uint32_t kFlowHash = 0x9e3779b9;

class PcapWriter {
 public:
  explicit PcapWriter(const char* path) : file_(std::fopen(path, "wb")) {
    const uint32_t header[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};  // v2.4, Ethernet
    if (file_ != nullptr) std::fwrite(header, sizeof(header), 1, file_);
  }
  ~PcapWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  void write(const Frame& frame) {
    const uint32_t record[4] = {0, 0, static_cast<uint32_t>(frame.length),
                                static_cast<uint32_t>(frame.length)};
    std::fwrite(record, sizeof(record), 1, file_);
    std::fwrite(frame.data, 1, frame.length, file_);
  }

 private:
  std::FILE* file_;
};

Bytes tcp4() {
  return concat({ethernet(kEtherTypeIpv4, {42}), ipv4(kClient, kVip, kProtocolTcp, 20 + 100),
                 tcp(40000, 80), payload(100)});
}
Bytes tcp6() {
  return concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 20 + 100),
                 tcp(40000, 443), payload(100)});
}

NatEndpoints endpoints(const IpAddress& source, uint16_t source_port, const IpAddress& destination,
                       uint16_t destination_port) {
  NatEndpoints to;
  to.source = source.bytes;
  to.destination = destination.bytes;
  to.source_port = static_cast<uint16_t>(source_port >> 8 | source_port << 8);
  to.destination_port = static_cast<uint16_t>(destination_port >> 8 | destination_port << 8);
  return to;
}

// The Full-NAT samples, after the others: a client's TCP segment and a UDP datagram from the
// local address to the backend, a backend's IPv6 reply from the VIP to the client, and ICMP
// errors translated for the backend (IPv4 fragmentation needed, ICMPv6 packet too big).
int writeFullNatSamples(PcapWriter& pcap) {
  const IpAddress local4 = IpAddress::v4(198, 18, 1, 20);
  const IpAddress local6 = *IpAddress::parse("2001:db8:1::20");
  const IpAddress backend4 = IpAddress::v4(198, 18, 1, 2);
  const IpAddress backend6 = *IpAddress::parse("2001:db8:1::2");
  const IpAddress router = IpAddress::v4(198, 18, 0, 254);
  const IpAddress router6 = *IpAddress::parse("2001:db8::fe");
  struct Sample {
    Bytes frame;
    NatEndpoints to;
    IpAddress next_hop;
  };
  Bytes udp_frame = concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8 + 40),
                            udp(5353, 53, 40), payload(40)});
  const Bytes reply6 =
      concat({ethernet(kEtherTypeIpv6), ipv6(backend6, local6, kProtocolTcp, 20 + 100),
              tcp(8080, 20001), payload(100)});
  Sample samples[] = {
      {withChecksums(tcp4(), 18), endpoints(local4, 20001, backend4, 8080), backend4},
      {withChecksums(udp_frame, 14), endpoints(local4, 20002, backend4, 53), backend4},
      {withChecksums(reply6, 14), endpoints(kVip6, 443, kClient6, 40000), kClient6},
  };
  for (Sample& sample : samples) {
    ReceivedFrame received(sample.frame);
    if (forwardFullNat(received.frame, received.packet, testTarget(sample.next_hop), sample.to) !=
        ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  // An error from the clients' side about the VIP's answer (whole: the embedded TCP checksum
  // too), for the backend about its own packet to the local address.
  for (bool v6 : {false, true}) {
    const Bytes answer = withChecksums(
        v6 ? concat({ethernet(kEtherTypeIpv6), ipv6(kVip6, kClient6, kProtocolTcp, 20 + 40),
                     tcp(443, 40000), payload(40)})
           : concat({ethernet(kEtherTypeIpv4), ipv4(kVip, kClient, kProtocolTcp, 60),
                     tcp(80, 40000), payload(40)}),
        14);
    const Bytes embedded(answer.begin() + 14, answer.end());
    const Bytes message = concat(
        {v6 ? Bytes{2, 0, 0, 0, 0, 0, 0x05, 0x00} : Bytes{3, 4, 0, 0, 0, 0, 0x05, 0x00}, embedded});
    const Bytes error =
        withChecksums(concat({ethernet(v6 ? kEtherTypeIpv6 : kEtherTypeIpv4),
                              v6 ? ipv6(router6, kVip6, kProtocolIcmpv6, message.size())
                                 : ipv4(router, kVip, kProtocolIcmp, message.size()),
                              message}),
                      14);
    ReceivedFrame received(error);
    const IpAddress& backend = v6 ? backend6 : backend4;
    const NatEndpoints embedded_to = endpoints(backend, v6 ? 443 : 80, v6 ? local6 : local4, 20001);
    if (!rewriteIcmpError(received.frame, received.packet, backend.bytes, embedded_to) ||
        forwardL2Dsr(received.frame, received.packet, testTarget(backend), 0) !=
            ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  return 0;
}

// NAT64 (RFC 7915), after Full-NAT's: an IPv6 client's TCP segment (traffic class 0x28, hop
// limit 61, on VLAN 42) to an IPv4 backend; an IPv4 backend's UDP datagram sent without a
// checksum (TOS 0x10, TTL 60) to the IPv6 client; a router's ICMPv6 packet too big (MTU 1280)
// about a translated reply, for the IPv4 backend; and a router's ICMPv4 fragmentation needed
// (MTU 1200) about a translated client's segment, for the IPv6 client.
int writeNat64Samples(PcapWriter& pcap) {
  const IpAddress local4 = IpAddress::v4(198, 18, 1, 20);
  const IpAddress backend4 = IpAddress::v4(198, 18, 1, 2);
  const IpAddress router4 = IpAddress::v4(198, 18, 1, 254);
  const IpAddress router6 = *IpAddress::parse("2001:db8::fe");
  {
    Bytes frame =
        concat({ethernet(kEtherTypeIpv6, {42}), ipv6(kClient6, kVip6, kProtocolTcp, 20 + 100, 61),
                tcp(40000, 443), payload(100)});
    frame[18] = 0x62;  // traffic class 0x28: its high nibble in the version's byte
    frame[19] = 0x80;
    ReceivedFrame received(withChecksums(frame, 18));
    translateToIpv4(received.frame, received.packet, endpoints(local4, 20001, backend4, 8080),
                    0x1234);
    if (forwardL2Dsr(received.frame, received.packet, testTarget(backend4), 0) !=
        ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  {
    Ipv4Options options;
    options.ttl = 60;
    Bytes frame =
        concat({ethernet(kEtherTypeIpv4), ipv4(backend4, local4, kProtocolUdp, 8 + 40, options),
                udp(53, 20002, 40), payload(40)});
    frame[15] = 0x10;
    frame = withChecksums(frame, 14);
    frame[14 + 20 + 6] = 0;  // sent without a UDP checksum
    frame[14 + 20 + 7] = 0;
    ReceivedFrame received(frame);
    if (!translateToIpv6(received.frame, received.packet, endpoints(kVip6, 53, kClient6, 5353)) ||
        forwardL2Dsr(received.frame, received.packet, testTarget(kClient6), 0) !=
            ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  {
    // The reply as it reached the client (VIP6 -> client), quoted whole by the router.
    const Bytes answer = withChecksums(
        concat({ethernet(kEtherTypeIpv6), ipv6(kVip6, kClient6, kProtocolTcp, 20 + 40, 63),
                tcp(443, 40000), payload(40)}),
        14);
    const Bytes message =
        concat({Bytes{2, 0, 0, 0, 0, 0, 0x05, 0x00}, Bytes(answer.begin() + 14, answer.end())});
    ReceivedFrame received(
        withChecksums(concat({ethernet(kEtherTypeIpv6),
                              ipv6(router6, kVip6, kProtocolIcmpv6, message.size()), message}),
                      14));
    if (!translateIcmpErrorToIpv4(received.frame, received.packet, local4.bytes, backend4.bytes,
                                  endpoints(backend4, 8080, local4, 20001)) ||
        forwardL2Dsr(received.frame, received.packet, testTarget(backend4), 0) !=
            ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  {
    // The client's segment as it reached the backends' side (local -> backend), its first 8
    // bytes quoted, as RFC 792 asks at the least.
    const Bytes segment = withChecksums(
        concat({ethernet(kEtherTypeIpv4), ipv4(local4, backend4, kProtocolTcp, 20 + 1400),
                tcp(20001, 8080), payload(1400)}),
        14);
    const Bytes message = concat({Bytes{3, 4, 0, 0, 0, 0, 0x04, 0xB0},
                                  Bytes(segment.begin() + 14, segment.begin() + 14 + 28)});
    ReceivedFrame received(
        withChecksums(concat({ethernet(kEtherTypeIpv4),
                              ipv4(router4, local4, kProtocolIcmp, message.size()), message}),
                      14));
    if (!translateIcmpErrorToIpv6(received.frame, received.packet, kVip6.bytes, kClient6.bytes,
                                  endpoints(kClient6, 40000, kVip6, 443)) ||
        forwardL2Dsr(received.frame, received.packet, testTarget(kClient6), 0) !=
            ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  using namespace berth;
  if (argc != 2) {
    std::fprintf(stderr, "usage: forwarding_samples OUTPUT.pcap\n");
    return 2;
  }
  PcapWriter pcap(argv[1]);
  if (!pcap.ok()) {
    std::perror(argv[1]);
    return 1;
  }
  const IpAddress backend4 = IpAddress::v4(198, 18, 1, 2);
  const IpAddress backend6 = *IpAddress::parse("2001:db8:1::2");
  // The order is the decoder's contract: see forwarding_scapy_test.py.
  const struct {
    ForwardFunction forward;
    bool v6;
  } samples[] = {{forwardIpip, false}, {forwardIpip, true}, {forwardGre, false},
                 {forwardGre, true},   {forwardGue, false}, {forwardGue, true},
                 {forwardL2Dsr, false}};
  for (const auto& sample : samples) {
    ReceivedFrame received(sample.v6 ? tcp6() : tcp4());
    // l2dsr leaves on the VLAN it came in on; the encapsulating modes towards an untagged
    // gateway.
    const ForwardingTarget target =
        testTarget(sample.v6 ? backend6 : backend4, sample.forward == forwardL2Dsr ? 42 : 0);
    if (sample.forward(received.frame, received.packet, target, kFlowHash) !=
        ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  for (bool v6 : {false, true}) {
    ReceivedFrame received(
        v6 ? concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 1440),
                     tcp(40000, 443), payload(1420)})
           : concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 1500),
                     tcp(40000, 80), payload(1480)}));
    if (!buildTooBigReply(received.frame, received.packet, v6 ? 1440 : 1480,
                          *MacAddress::parse("02:00:00:00:00:10"))) {
      return 1;
    }
    pcap.write(received.frame);
  }
  {
    Bytes solicitation(32, 0);
    solicitation[0] = 135;
    std::memcpy(solicitation.data() + 8, kVip6.bytes.data(), 16);
    const uint8_t option[8] = {1, 1, 0x02, 0, 0, 0, 0, 0x02};
    std::memcpy(solicitation.data() + 24, option, 8);
    ReceivedFrame received(concat(
        {ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolIcmpv6, 32, 255), solicitation}));
    if (!buildNeighborReply(received.frame, received.packet, kVip6,
                            *MacAddress::parse("02:00:00:00:00:10"))) {
      return 1;
    }
    pcap.write(received.frame);
  }
  {
    // GUE over IPv6 towards a gateway on VLAN 7: the outer headers after an 802.1Q tag.
    ReceivedFrame received(tcp6());
    const ForwardingTarget target = testTarget(backend6, 7);
    if (forwardGue(received.frame, received.packet, target, kFlowHash) != ForwardResult::kSend) {
      return 1;
    }
    pcap.write(received.frame);
  }
  if (writeFullNatSamples(pcap) != 0) return 1;
  return writeNat64Samples(pcap);
}
