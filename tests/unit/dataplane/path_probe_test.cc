// A path probe's frames (dataplane/path_probe.h). Pinned: a segment leaves as a client's packet
// to the VIP would, from the port's address, rewritten by each mode for the backend (l2dsr at
// the backend's MAC, ipip/gue/gre encapsulated toward its address with the packet unchanged
// inside), with valid checksums and the MSS option on a SYN only; a frame without room is
// refused. An answer is read from berth's side with its payload; a wrong checksum, a short
// frame, a fragment or another protocol reads as nothing.

#include "berth/dataplane/path_probe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "berth/net/checksum.h"
#include "support/frames.h"

namespace berth {
namespace {

const IpAddress kPortAddress = IpAddress::v4(198, 18, 0, 10);
const IpAddress kPortAddress6 = *IpAddress::parse("2001:db8::10");
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);

struct Built {
  std::vector<uint8_t> buffer = std::vector<uint8_t>(512);
  Frame frame{buffer.data() + 128, 0, 128, 384};
  ForwardResult result = ForwardResult::kNoHeadroom;
};

Built build(ForwardFunction forward, const ForwardingTarget& target, const TcpEndpoints& endpoints,
            const TcpSegment& segment) {
  Built built;
  built.result = buildPathProbeFrame(built.frame, forward, target, endpoints, segment, 1400);
  return built;
}

TcpEndpoints probeEndpoints(const IpAddress& local = kPortAddress, const IpAddress& vip = kVip) {
  return TcpEndpoints{local, 61000, vip, 80};
}

// The segment in `frame` at `offset` (its inner IP header), read as the backend would receive it.
std::optional<ReceivedSegment> innerSegment(const uint8_t* ip, size_t length) {
  std::vector<uint8_t> ethernet(14 + length);
  ethernet[12] = (ip[0] >> 4) == 4 ? 0x08 : 0x86;
  ethernet[13] = (ip[0] >> 4) == 4 ? 0x00 : 0xDD;
  std::memcpy(ethernet.data() + 14, ip, length);
  ParsedPacket packet;
  if (parsePacket(ethernet.data(), ethernet.size(), packet) != ParseError::kNone) return {};
  std::optional<ReceivedSegment> read = readTcpSegment(ethernet.data(), ethernet.size(), packet);
  // The payload would point into the local buffer: the tests compare lengths only.
  if (read) read->segment.payload = absl::string_view(nullptr, read->segment.payload.size());
  return read;
}

TEST(PathProbeTest, L2DsrSendsTheSegmentToTheBackendsMacAsAClientsPacket) {
  ForwardingTarget target = testTarget(kBackend);
  target.destination_mac = *MacAddress::parse("02:00:00:00:01:02");  // the backend's
  const TcpSegment syn{kTcpSyn, 1000, 0, {}};
  Built built = build(forwardL2Dsr, target, probeEndpoints(), syn);
  ASSERT_EQ(built.result, ForwardResult::kSend);
  const uint8_t* frame = built.frame.data;
  EXPECT_EQ(0, std::memcmp(frame, target.destination_mac.bytes.data(), 6));
  EXPECT_EQ(0, std::memcmp(frame + 6, target.source_mac.bytes.data(), 6));
  ASSERT_EQ(built.frame.length, 14u + 20 + 24) << "Ethernet, IPv4, TCP with the MSS option";
  const std::optional<ReceivedSegment> read = innerSegment(frame + 14, built.frame.length - 14);
  ASSERT_TRUE(read.has_value()) << "checksums hold";
  EXPECT_EQ(read->endpoints.local, kVip);
  EXPECT_EQ(read->endpoints.local_port, 80);
  EXPECT_EQ(read->endpoints.remote, kPortAddress);
  EXPECT_EQ(read->endpoints.remote_port, 61000);
  EXPECT_EQ(read->segment.flags, kTcpSyn);
  EXPECT_EQ(read->segment.sequence, 1000u);
  const uint8_t* tcp = frame + 14 + 20;
  EXPECT_EQ(tcp[20], 2) << "MSS option";
  EXPECT_EQ(loadBigEndian16(tcp + 22), 1400);
  EXPECT_EQ(frame[14 + 8], 64) << "TTL";
  EXPECT_EQ(frame[14 + 6] & 0x40, 0x40) << "DF";
}

TEST(PathProbeTest, EncapsulatingModesCarryTheSegmentUnchangedToTheBackend) {
  const ForwardingTarget target = testTarget(kBackend);
  const std::string request = "GET /healthz HTTP/1.0\r\n\r\n";
  const TcpSegment data{kTcpAck | kTcpPsh, 1001, 5001, request};
  struct Mode {
    const char* name;
    ForwardFunction forward;
    size_t outer;  // Ethernet and outer headers before the inner IP header
    uint8_t outer_protocol;
  };
  for (const Mode& mode :
       {Mode{"ipip", forwardIpip, 14 + 20, 4}, Mode{"gue", forwardGue, 14 + 20 + 8, 17},
        Mode{"gre", forwardGre, 14 + 20 + 4, 47}}) {
    SCOPED_TRACE(mode.name);
    Built built = build(mode.forward, target, probeEndpoints(), data);
    ASSERT_EQ(built.result, ForwardResult::kSend);
    const uint8_t* frame = built.frame.data;
    EXPECT_EQ(0, std::memcmp(frame, target.destination_mac.bytes.data(), 6)) << "the gateway";
    const uint8_t* outer = frame + 14;
    EXPECT_EQ(outer[9], mode.outer_protocol);
    EXPECT_EQ(0, std::memcmp(outer + 12, kPortAddress.bytes.data(), 4));
    EXPECT_EQ(0, std::memcmp(outer + 16, kBackend.bytes.data(), 4));
    const size_t inner_length = 20 + 20 + request.size();
    ASSERT_EQ(built.frame.length, mode.outer + inner_length);
    const std::optional<ReceivedSegment> read = innerSegment(frame + mode.outer, inner_length);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->endpoints.local, kVip) << "the VIP inside";
    EXPECT_EQ(read->segment.flags, kTcpAck | kTcpPsh);
    EXPECT_EQ(read->segment.acknowledgement, 5001u);
    EXPECT_EQ(read->segment.payload.size(), request.size());
  }
}

TEST(PathProbeTest, AnIpv6ProbeAndAFrameWithoutRoom) {
  const ForwardingTarget target = testTarget(*IpAddress::parse("2001:db8:1::2"));
  Built built = build(forwardIpip, target, probeEndpoints(kPortAddress6, kVip6),
                      TcpSegment{kTcpRst, 7, 0, {}});
  ASSERT_EQ(built.result, ForwardResult::kSend);
  ASSERT_EQ(built.frame.length, 14u + 40 + 40 + 20) << "no MSS option but on a SYN";
  const std::optional<ReceivedSegment> read =
      innerSegment(built.frame.data + 14 + 40, built.frame.length - 14 - 40);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->endpoints.remote, kPortAddress6);
  EXPECT_EQ(read->segment.flags, kTcpRst);

  std::vector<uint8_t> small(60);
  Frame cramped{small.data(), 0, 0, small.size()};
  EXPECT_EQ(buildPathProbeFrame(cramped, forwardIpip, testTarget(kBackend), probeEndpoints(),
                                TcpSegment{kTcpSyn, 1, 0, {}}, 1400),
            ForwardResult::kNoHeadroom)
      << "58 bytes fit, the outer header does not";
  Frame too_short{small.data(), 0, 0, 40};
  EXPECT_EQ(buildPathProbeFrame(too_short, forwardL2Dsr, testTarget(kBackend), probeEndpoints(),
                                TcpSegment{kTcpSyn, 1, 0, {}}, 1400),
            ForwardResult::kNoHeadroom);
}

// The backend's answer, as berth receives it: the probe's segment written the other way round,
// at berth's MAC.
std::vector<uint8_t> answer(const TcpSegment& segment) {
  Built built = build(forwardL2Dsr, testTarget(kBackend),
                      TcpEndpoints{kVip, 80, kPortAddress, 61000}, segment);
  return std::vector<uint8_t>(built.frame.data, built.frame.data + built.frame.length);
}

std::optional<ReceivedSegment> read(const std::vector<uint8_t>& frame) {
  ParsedPacket packet;
  if (parsePacket(frame.data(), frame.size(), packet) != ParseError::kNone) return std::nullopt;
  return readTcpSegment(frame.data(), frame.size(), packet);
}

TEST(PathProbeTest, AnAnswerIsReadFromBerthsSide) {
  const std::vector<uint8_t> frame = answer(TcpSegment{kTcpAck, 5001, 1026, "HTTP/1.1 200 OK\r\n"});
  const std::optional<ReceivedSegment> received = read(frame);
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->endpoints, (TcpEndpoints{kPortAddress, 61000, kVip, 80}));
  EXPECT_EQ(received->segment.sequence, 5001u);
  EXPECT_EQ(received->segment.acknowledgement, 1026u);
  EXPECT_EQ(received->segment.payload, "HTTP/1.1 200 OK\r\n");
}

TEST(PathProbeTest, WhatIsNotAWholeValidSegmentReadsAsNothing) {
  const std::vector<uint8_t> frame = answer(TcpSegment{kTcpAck, 5001, 1026, "HTTP/1.1 200 OK\r\n"});
  std::vector<uint8_t> corrupt = frame;
  corrupt.back() ^= 1;
  EXPECT_FALSE(read(corrupt).has_value()) << "payload checksum";
  std::vector<uint8_t> forged_port = frame;
  forged_port[14 + 20 + 3] ^= 1;
  EXPECT_FALSE(read(forged_port).has_value()) << "a port changed without the checksum";
  // Cut short: the IP header's length says more than the frame holds.
  const std::vector<uint8_t> cut(frame.begin(), frame.end() - 4);
  ParsedPacket packet;
  if (parsePacket(cut.data(), cut.size(), packet) == ParseError::kNone) {
    EXPECT_FALSE(readTcpSegment(cut.data(), cut.size(), packet).has_value());
  }
  // A TCP header length past the packet.
  std::vector<uint8_t> long_header = frame;
  long_header[14 + 20 + 12] = 0xF0;
  EXPECT_FALSE(read(long_header).has_value());
  // A fragment.
  std::vector<uint8_t> fragment = frame;
  fragment[14 + 6] |= 0x20;  // more fragments
  EXPECT_FALSE(read(fragment).has_value());
  // UDP.
  ReceivedFrame udp_frame(
      concat({ethernet(kEtherTypeIpv4), ipv4(kVip, kPortAddress, kProtocolUdp, 8 + 4),
              udp(80, 61000, 4), payload(4)}));
  ASSERT_EQ(udp_frame.parse_error, ParseError::kNone);
  EXPECT_FALSE(readTcpSegment(udp_frame.frame.data, udp_frame.frame.length, udp_frame.packet));
}

}  // namespace
}  // namespace berth
