// The pipeline's exception path (docs/exception-path.md): on a port with a kernel interface,
// frames that are not berth's go to the kernel unchanged, each in its policing class, and
// nothing else changes: VIP traffic is forwarded, ARP and ND questions for the port's addresses
// are answered by berth, unicast frames for other MACs are dropped. Without an interface the
// same frames are dropped under their counters, as before.

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "berth/config/loader.h"
#include "berth/dataplane/pipeline.h"
#include "berth/maglev/analysis.h"
#include "support/built_snapshot.h"
#include "support/counters.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_names.h"
#include "support/test_worker.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's
const IpAddress kPort4 = IpAddress::v4(198, 18, 0, 10);
const IpAddress kPort6 = *IpAddress::parse("2001:db8::10");
const IpAddress kBgpPeer = IpAddress::v4(198, 18, 0, 1);  // packet_builder's kClient
const IpAddress kStranger = IpAddress::v4(198, 18, 0, 77);
const IpAddress kLinkLocal = *IpAddress::parse("fe80::ff:fe00:1");
const IpAddress kOtherHost = IpAddress::v4(198, 18, 0, 99);
const IpAddress kProbed = IpAddress::v4(198, 18, 1, 2);  // the health-checked backend
const IpAddress kSyncPeer = IpAddress::v4(198, 18, 0, 11);

constexpr char kPortWith[] = R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, ipv6: "2001:db8::10",
        gateway_mac: "02:00:00:00:00:fe", exception: { name: berth0 } }
bgp:
  asn: 65001
  router_id: 198.18.0.10
  port: p0
  neighbors: [ { address: 198.18.0.1, asn: 65000 } ]
sync:
  listen: "198.18.0.10:7410"
  peers: ["198.18.0.11:7410"]
  keys: [ { id: 1, file: /nonexistent } ]
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, health: { type: tcp },
      backends: [ { name: a, address: 198.18.1.2 } ] }
)";

std::string withoutException(std::string yaml) {
  const std::string field = ", exception: { name: berth0 }";
  yaml.erase(yaml.find(field), field.size());
  return yaml;
}

std::unique_ptr<BuiltSnapshot> buildFrom(const std::string& yaml) {
  return buildSnapshotFrom(yaml, kPortMac);
}

Bytes toMac(Bytes frame, const std::string& mac) {
  const MacAddress parsed = *MacAddress::parse(mac);
  std::copy(parsed.bytes.begin(), parsed.bytes.end(), frame.begin());
  return frame;
}

Bytes tcp4(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
           uint16_t destination_port) {
  return concat({ethernet(kEtherTypeIpv4), ipv4(source, destination, kProtocolTcp, 20),
                 tcp(source_port, destination_port)});
}

Bytes udp4(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
           uint16_t destination_port) {
  return concat({ethernet(kEtherTypeIpv4), ipv4(source, destination, kProtocolUdp, 8 + 32),
                 udp(source_port, destination_port, 32), payload(32)});
}

Bytes echo4(const IpAddress& destination) {
  return concat(
      {ethernet(kEtherTypeIpv4), ipv4(kClient, destination, kProtocolIcmp, 8), icmp(8, 0)});
}

Bytes echo6(const IpAddress& destination) {
  return concat(
      {ethernet(kEtherTypeIpv6), ipv6(kClient6, destination, kProtocolIcmpv6, 8), icmp(128, 0)});
}

Bytes arp(uint16_t operation, const IpAddress& sender, const IpAddress& target,
          const std::string& destination_mac) {
  Bytes body(28, 0);
  const uint8_t fixed[8] = {0, 1, 0x08, 0, 6, 4, 0, static_cast<uint8_t>(operation)};
  std::copy(fixed, fixed + 8, body.begin());
  const uint8_t sender_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::copy(sender_mac, sender_mac + 6, body.begin() + 8);
  std::copy(sender.bytes.begin(), sender.bytes.begin() + 4, body.begin() + 14);
  std::copy(target.bytes.begin(), target.bytes.begin() + 4, body.begin() + 24);
  return concat({toMac(ethernet(kEtherTypeArp), destination_mac), body});
}

Bytes solicitation(const IpAddress& target) {
  Bytes message(32, 0);
  message[0] = 135;
  std::copy(target.bytes.begin(), target.bytes.end(), message.begin() + 8);
  const uint8_t option[8] = {1, 1, 0x02, 0, 0, 0, 0, 0x02};
  std::copy(option, option + 8, message.begin() + 24);
  return concat({toMac(ethernet(kEtherTypeIpv6), "33:33:ff:00:00:10"),
                 ipv6(kClient6, target, kProtocolIcmpv6, message.size(), 255), message});
}

// Every counter but the connection table's.
uint64_t countedTotal(const WorkerCounters& counters) {
  const WorkerCounters* workers[] = {&counters};
  uint64_t sum = 0;
  for (const auto& [name, value] : sumCounters(workers)) {
    if (name.rfind("conntrack_", 0) != 0) sum += value;
  }
  return sum;
}

struct Case {
  std::string description;
  std::function<Bytes()> input;
  Verdict with_interface;
  Verdict without_interface;
  std::string drop_counter;  // what the port without an interface counts, if it drops
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"BGP from a configured neighbour to the port",
       [] { return tcp4(kBgpPeer, kPort4, 40001, 179); }, toKernel(ExceptionClass::kBgp),
       Verdict::kDrop, "drop_no_service"},
      {"BGP's replies from the neighbour's port 179",
       [] { return tcp4(kBgpPeer, kPort4, 179, 40001); }, toKernel(ExceptionClass::kBgp),
       Verdict::kDrop, "drop_no_service"},
      {"TCP 179 from anyone else is not BGP's class",
       [] { return tcp4(kStranger, kPort4, 40001, 179); }, toKernel(ExceptionClass::kOther),
       Verdict::kDrop, "drop_no_service"},
      {"a health check's answer from the backend it probes",
       [] { return tcp4(kProbed, kPort4, 80, 40001); }, toKernel(ExceptionClass::kHealth),
       Verdict::kDrop, "drop_no_service"},
      {"flow sync from a sync peer to the sync port",
       [] { return udp4(kSyncPeer, kPort4, 7410, 7410); }, toKernel(ExceptionClass::kSync),
       Verdict::kDrop, "drop_no_service"},
      {"UDP to the sync port from anyone else is not sync's class",
       [] { return udp4(kStranger, kPort4, 7410, 7410); }, toKernel(ExceptionClass::kOther),
       Verdict::kDrop, "drop_no_service"},
      {"UDP from a sync peer to another port is not sync's class",
       [] { return udp4(kSyncPeer, kPort4, 7410, 53); }, toKernel(ExceptionClass::kOther),
       Verdict::kDrop, "drop_no_service"},
      {"SSH to the port", [] { return tcp4(kStranger, kPort4, 40001, 22); },
       toKernel(ExceptionClass::kOther), Verdict::kDrop, "drop_no_service"},
      {"ping of the port", [] { return echo4(kPort4); }, toKernel(ExceptionClass::kIcmp),
       Verdict::kDrop, "drop_no_service"},
      {"ping of the port's IPv6 address", [] { return echo6(kPort6); },
       toKernel(ExceptionClass::kIcmp), Verdict::kDrop, "drop_no_service"},
      {"ping of the kernel interface's link-local address", [] { return echo6(kLinkLocal); },
       toKernel(ExceptionClass::kIcmp), Verdict::kDrop, "drop_no_service"},
      {"an ARP request for the port's address is berth's to answer",
       [] { return arp(1, kBgpPeer, kPort4, "ff:ff:ff:ff:ff:ff"); }, Verdict::kTransmit,
       Verdict::kTransmit, ""},
      {"an ARP request for another address, broadcast",
       [] { return arp(1, kBgpPeer, kOtherHost, "ff:ff:ff:ff:ff:ff"); },
       toKernel(ExceptionClass::kNeighbor), Verdict::kDrop, "drop_arp_nd_not_answered"},
      {"an ARP reply to the port's MAC (the kernel's question)",
       [] { return arp(2, kBgpPeer, kPort4, "02:00:00:00:00:01"); },
       toKernel(ExceptionClass::kNeighbor), Verdict::kDrop, "drop_arp_nd_not_answered"},
      {"an ARP reply to another MAC", [] { return arp(2, kBgpPeer, kPort4, "02:00:00:00:00:99"); },
       Verdict::kDrop, Verdict::kDrop, "drop_arp_nd_not_answered"},
      {"a neighbour solicitation for the port's address is berth's to answer",
       [] { return solicitation(kPort6); }, Verdict::kTransmit, Verdict::kTransmit, ""},
      {"a neighbour solicitation for the link-local address",
       [] { return solicitation(kLinkLocal); }, toKernel(ExceptionClass::kNeighbor), Verdict::kDrop,
       "drop_arp_nd_not_answered"},
      {"IPv4 multicast",
       [] { return toMac(echo4(IpAddress::v4(224, 0, 0, 1)), "01:00:5e:00:00:01"); },
       toKernel(ExceptionClass::kIcmp), Verdict::kDrop, "drop_not_for_us"},
      {"LLDP to its multicast group",
       [] {
         return concat({toMac(ethernet(0x88cc), "01:80:c2:00:00:0e"), payload(46)});
       },
       toKernel(ExceptionClass::kOther), Verdict::kDrop, "drop_other_ethertype"},
      {"another ethertype to another host's MAC",
       [] {
         return concat({toMac(ethernet(0x88cc), "02:00:00:00:00:99"), payload(46)});
       },
       Verdict::kDrop, Verdict::kDrop, "drop_other_ethertype"},
      {"unicast for another host's MAC",
       [] { return toMac(tcp4(kStranger, kPort4, 40001, 22), "02:00:00:00:00:99"); },
       Verdict::kDrop, Verdict::kDrop, "drop_not_for_us"},
      {"a VIP's port with no service is not the kernel's",
       [] { return tcp4(kStranger, kVip, 40001, 22); }, Verdict::kDrop, Verdict::kDrop,
       "drop_no_service"},
      {"a VIP's service is forwarded", [] { return tcp4(kStranger, kVip, 40001, 80); },
       Verdict::kTransmit, Verdict::kTransmit, ""},
  };
  return kCases;
}

class PipelineExceptionTest : public ::testing::TestWithParam<size_t> {};

TEST_P(PipelineExceptionTest, HandsTheKernelWhatIsNotBerthsAndOnlyThat) {
  const Case& test = cases()[GetParam()];
  SCOPED_TRACE(test.description);
  static const std::unique_ptr<BuiltSnapshot> with = buildFrom(kPortWith);
  static const std::unique_ptr<BuiltSnapshot> without = buildFrom(withoutException(kPortWith));
  const Bytes input = test.input();
  {
    TestWorker worker;
    ReceivedFrame received(input);
    EXPECT_EQ(processFrame(*with->snapshot, 0, received.frame, worker.state), test.with_interface);
    if (goesToKernel(test.with_interface)) {
      EXPECT_EQ(received.sent(), input) << "the kernel gets the frame as it arrived";
      EXPECT_EQ(countedTotal(worker.counters), 0u) << "the worker counts it when it queues it";
    }
  }
  {
    TestWorker worker;
    ReceivedFrame received(input);
    EXPECT_EQ(processFrame(*without->snapshot, 0, received.frame, worker.state),
              test.without_interface);
    if (!test.drop_counter.empty() && test.without_interface == Verdict::kDrop) {
      EXPECT_EQ(counterNamed(worker.counters, test.drop_counter), 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PipelineExceptionTest, ::testing::Range(size_t{0}, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return testNameOf(cases()[info.param].description);
                         });

TEST(PipelineExceptionTest, VerdictsCarryTheirClass) {
  for (size_t i = 0; i < kExceptionClassCount; ++i) {
    const auto exception_class = static_cast<ExceptionClass>(i);
    EXPECT_TRUE(goesToKernel(toKernel(exception_class)));
    EXPECT_EQ(exceptionClassOf(toKernel(exception_class)), exception_class);
  }
  EXPECT_FALSE(goesToKernel(Verdict::kDrop));
  EXPECT_FALSE(goesToKernel(Verdict::kTransmit));
}

}  // namespace
}  // namespace berth
