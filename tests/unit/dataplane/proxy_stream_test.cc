// A PROXY protocol session's two streams (dataplane/proxy_stream.h): the header goes in the
// client's first segment after the handshake and again in front of data at the stream's start
// until the backend acknowledges it, identical each time; the client's later bytes are shifted
// by its length; the backend's acknowledgements, SACK blocks and window come back into the
// client's numbering; the MTU, a SYN's data and ICMP errors are handled. Every frame's checksums
// verify after each step.

#include "berth/dataplane/proxy_stream.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/checksums.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

const IpAddress kLocal = IpAddress::v4(198, 18, 1, 20);
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);
const IpAddress kLocal6 = *IpAddress::parse("2001:db8:1::20");
const IpAddress kBackend6 = *IpAddress::parse("2001:db8:1::2");
constexpr uint32_t kIsn = 0xFFFFFF00;  // the stream wraps past 2^32 within the tests
constexpr uint32_t kStart = kIsn + 1;
constexpr uint32_t kHeader = kProxyHeaderIpv4Length;

uint32_t load32(const Bytes& bytes, size_t at) {
  return uint32_t{bytes[at]} << 24 | uint32_t{bytes[at + 1]} << 16 | uint32_t{bytes[at + 2]} << 8 |
         bytes[at + 3];
}
void put32(Bytes& bytes, size_t at, uint32_t value) {
  putBigEndian16(bytes, at, static_cast<uint16_t>(value >> 16));
  putBigEndian16(bytes, at + 2, static_cast<uint16_t>(value));
}

// A TCP segment of the session between `source` and `destination`, its checksums filled in.
struct SegmentSpec {
  uint8_t flags = kTcpAck;
  uint32_t sequence = 0;
  uint32_t acknowledgement = 0;
  uint16_t window = 1000;
  Bytes options;  // a multiple of 4 bytes
  Bytes data;
};

Bytes segment(const IpAddress& source, const IpAddress& destination, const SegmentSpec& spec) {
  Bytes l4 = concat(
      {tcp(source.isV4() ? 40000 : 40006, 80, static_cast<uint8_t>(5 + spec.options.size() / 4))});
  std::copy(spec.options.begin(), spec.options.end(), l4.begin() + 20);
  l4[13] = spec.flags;
  put32(l4, 4, spec.sequence);
  put32(l4, 8, spec.acknowledgement);
  putBigEndian16(l4, 14, spec.window);
  l4.insert(l4.end(), spec.data.begin(), spec.data.end());
  const Bytes l3 = source.isV4() ? ipv4(source, destination, kProtocolTcp, l4.size())
                                 : ipv6(source, destination, kProtocolTcp, l4.size());
  return withChecksums(concat({ethernet(source.isV4() ? kEtherTypeIpv4 : kEtherTypeIpv6), l3, l4}));
}

Bytes bytesOf(size_t length, uint8_t first = 1) {
  Bytes data(length);
  for (size_t i = 0; i < length; ++i) data[i] = static_cast<uint8_t>(first + i);
  return data;
}

// A SACK option of `blocks` (left, right) after two NOPs.
Bytes sackOption(const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
  Bytes option = {1, 1, 5, static_cast<uint8_t>(2 + 8 * blocks.size())};
  for (const auto& [left, right] : blocks) {
    const size_t at = option.size();
    option.resize(at + 8);
    put32(option, at, left);
    put32(option, at + 4, right);
  }
  return option;
}

// The TCP segment's parts in a frame the stream left.
struct Sent {
  Bytes frame;
  size_t tcp = 0;
  uint32_t sequence() const { return load32(frame, tcp + 4); }
  uint32_t acknowledgement() const { return load32(frame, tcp + 8); }
  uint16_t window() const { return static_cast<uint16_t>(frame[tcp + 14] << 8 | frame[tcp + 15]); }
  uint8_t flags() const { return frame[tcp + 13]; }
  size_t dataAt() const { return tcp + (frame[tcp + 12] >> 4) * 4; }
  Bytes data() const { return Bytes(frame.begin() + static_cast<long>(dataAt()), frame.end()); }
  Bytes options() const {
    return Bytes(frame.begin() + static_cast<long>(tcp + 20),
                 frame.begin() + static_cast<long>(dataAt()));
  }
};

class ProxyStreamTest : public testing::Test {
 protected:
  void open(IpFamily family = IpFamily::kIpv4) {
    const bool v4 = family == IpFamily::kIpv4;
    session_ = NatSession{};
    session_.client_family = family;
    session_.backend_family = family;
    header_.family = family;
    header_.source = (v4 ? kClient : kClient6).bytes;
    header_.destination = (v4 ? kVip : kVip6).bytes;
    header_.source_port = static_cast<uint16_t>(40000 >> 8 | (40000 & 0xFF) << 8);
    header_.destination_port = static_cast<uint16_t>(80 << 8);
    SegmentSpec syn;
    syn.flags = kTcpSyn;
    syn.sequence = kIsn;
    ReceivedFrame received(segment(client(), vip(), syn));
    startProxyStream(session_, received.frame, received.packet);
    ASSERT_EQ(session_.client_stream_start, kStart);
    ASSERT_EQ(session_.proxy_header, ProxyHeaderState::kPending);
  }
  const IpAddress& client() const {
    return session_.client_family == IpFamily::kIpv4 ? kClient : kClient6;
  }
  const IpAddress& vip() const { return session_.client_family == IpFamily::kIpv4 ? kVip : kVip6; }

  // The client's segment through the stream, to an egress of `mtu`.
  Sent fromClient(const SegmentSpec& spec, ProxyClientStep expected, uint16_t mtu = 1500) {
    ReceivedFrame received(segment(client(), vip(), spec));
    EXPECT_EQ(received.parse_error, ParseError::kNone);
    ParsedPacket packet = received.packet;
    EXPECT_EQ(proxyFromClient(received.frame, packet, session_, header_, mtu), expected);
    Sent sent{received.sent(), received.packet.l4_offset};
    EXPECT_TRUE(checksumsVerify(sent.frame));
    EXPECT_EQ(packet.ip_length, sent.frame.size() - received.packet.l3_offset);
    return sent;
  }
  Sent fromBackend(const SegmentSpec& spec) {
    const bool v4 = session_.client_family == IpFamily::kIpv4;
    ReceivedFrame received(segment(v4 ? kBackend : kBackend6, v4 ? kLocal : kLocal6, spec));
    proxyFromBackend(received.frame, received.packet, session_);
    Sent sent{received.sent(), received.packet.l4_offset};
    EXPECT_TRUE(checksumsVerify(sent.frame));
    return sent;
  }
  Bytes header() const {
    Bytes bytes(kProxyHeaderMaxLength);
    bytes.resize(encodeProxyHeader(header_, bytes.data()));
    return bytes;
  }

  NatSession session_{};
  ProxyEndpoints header_;
};

SegmentSpec clientSegment(uint32_t sequence, Bytes data = {}, uint8_t flags = kTcpAck) {
  SegmentSpec spec;
  spec.flags = flags;
  spec.sequence = sequence;
  spec.acknowledgement = 5001;
  spec.data = std::move(data);
  return spec;
}
SegmentSpec backendAck(uint32_t acknowledgement, Bytes options = {}) {
  SegmentSpec spec;
  spec.sequence = 5001;
  spec.acknowledgement = acknowledgement;
  spec.options = std::move(options);
  return spec;
}

TEST_F(ProxyStreamTest, TheHandshakesAckCarriesTheHeaderAndLaterBytesAreShifted) {
  open();
  // The ACK that ends the handshake: the header alone, at the stream's start, so that a server
  // that speaks first has it before it speaks.
  const Sent ack = fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  EXPECT_EQ(ack.sequence(), kStart);
  EXPECT_EQ(ack.data(), header());
  EXPECT_EQ(session_.proxy_header, ProxyHeaderState::kSent);
  // The backend acknowledges it: the client sees its own start acknowledged.
  const Sent acknowledged = fromBackend(backendAck(kStart + kHeader));
  EXPECT_EQ(acknowledged.acknowledgement(), kStart);
  EXPECT_EQ(acknowledged.window(), 1000);
  EXPECT_EQ(session_.proxy_header, ProxyHeaderState::kAcknowledged);
  // The client's request, shifted past the header, and its acknowledgement mapped back (across
  // the sequence space's wrap).
  const Sent request = fromClient(clientSegment(kStart, bytesOf(300)), ProxyClientStep::kShifted);
  EXPECT_EQ(request.sequence(), kStart + kHeader);
  EXPECT_EQ(request.data(), bytesOf(300));
  EXPECT_EQ(fromBackend(backendAck(kStart + kHeader + 300)).acknowledgement(), kStart + 300);
  EXPECT_EQ(
      fromClient(clientSegment(kStart + 300, {}, kTcpAck | kTcpFin), ProxyClientStep::kShifted)
          .sequence(),
      kStart + 300 + kHeader);
}

TEST_F(ProxyStreamTest, DataAtTheStartCarriesTheSameHeaderUntilTheBackendAcknowledgesIt) {
  open();
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  // The request right behind the ACK, before the backend's answer: the header again in front
  // of it, so that it arrives even if the ACK was lost.
  const Sent request =
      fromClient(clientSegment(kStart, bytesOf(100)), ProxyClientStep::kHeaderInserted);
  EXPECT_EQ(request.sequence(), kStart);
  EXPECT_EQ(request.data(), concat({header(), bytesOf(100)}));
  // Its retransmission leaves byte for byte the same.
  const Sent again =
      fromClient(clientSegment(kStart, bytesOf(100)), ProxyClientStep::kHeaderInserted);
  EXPECT_EQ(again.frame, request.frame);
  // A bare ACK at the start while the header is on its way needs none.
  EXPECT_EQ(fromClient(clientSegment(kStart), ProxyClientStep::kShifted).sequence(),
            kStart + kHeader);
  // Acknowledged, the same request is only shifted.
  fromBackend(backendAck(kStart + kHeader + 100));
  EXPECT_EQ(fromClient(clientSegment(kStart, bytesOf(100)), ProxyClientStep::kShifted).sequence(),
            kStart + kHeader);
}

TEST_F(ProxyStreamTest, ABackendThatLacksTheHeaderIsSentItAgainAndItsSackBlocksAreWithheld) {
  open();
  // The ACK with the header and the request's first segment (with the header again) are lost;
  // its second segment, shifted, arrives out of order: the backend acknowledges only the
  // stream's start and SACKs that segment.
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  fromClient(clientSegment(kStart, bytesOf(100)), ProxyClientStep::kHeaderInserted);
  fromClient(clientSegment(kStart + 100, bytesOf(100)), ProxyClientStep::kShifted);
  const Sent duplicate = fromBackend(
      backendAck(kStart, sackOption({{kStart + kHeader + 100, kStart + kHeader + 200}})));
  EXPECT_EQ(session_.proxy_header, ProxyHeaderState::kPending);
  EXPECT_EQ(duplicate.acknowledgement(), kStart);
  // The client cannot resend what it never sent: no SACK block reaches it, only NOPs.
  EXPECT_EQ(duplicate.options(), Bytes(12, 1));
  // The header takes its length of the window the backend advertised (no window scale).
  EXPECT_EQ(duplicate.window(), 1000 - kHeader);
  // The client's retransmission carries the header again.
  const Sent resent =
      fromClient(clientSegment(kStart, bytesOf(100)), ProxyClientStep::kHeaderInserted);
  EXPECT_EQ(resent.data(), concat({header(), bytesOf(100)}));
}

TEST_F(ProxyStreamTest, SackBlocksComeBackIntoTheClientsNumberingAndHeaderOnlyOnesGo) {
  open();
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  fromBackend(backendAck(kStart + kHeader));
  // A D-SACK of the header's duplicate (header bytes only), and a block of the client's data.
  const Sent sacked = fromBackend(backendAck(
      kStart + kHeader + 100,
      sackOption({{kStart, kStart + kHeader}, {kStart + kHeader + 200, kStart + kHeader + 300}})));
  EXPECT_EQ(sacked.acknowledgement(), kStart + 100);
  const Bytes options = sacked.options();
  ASSERT_EQ(options.size(), 20u);
  EXPECT_EQ(options[2], 5);
  EXPECT_EQ(options[3], 10);  // one block left
  EXPECT_EQ(load32(options, 4), kStart + 200);
  EXPECT_EQ(load32(options, 8), kStart + 300);
  EXPECT_EQ(Bytes(options.begin() + 12, options.end()), Bytes(8, 1));
  // A block that straddles the header's end starts at the stream's start.
  const Sent straddling =
      fromBackend(backendAck(kStart + kHeader, sackOption({{kStart + 10, kStart + kHeader + 50}})));
  EXPECT_EQ(load32(straddling.options(), 4), kStart);
  EXPECT_EQ(load32(straddling.options(), 8), kStart + 50);
}

TEST_F(ProxyStreamTest, TheClientsSackBlocksAndAcknowledgementsPassUnchanged) {
  open();
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  fromBackend(backendAck(kStart + kHeader));
  SegmentSpec spec = clientSegment(kStart);
  spec.acknowledgement = 9001;
  spec.options = sackOption({{9500, 9600}});
  const Sent sent = fromClient(spec, ProxyClientStep::kShifted);
  EXPECT_EQ(sent.acknowledgement(), 9001u);
  EXPECT_EQ(sent.options(), spec.options);
}

TEST_F(ProxyStreamTest, AWindowBeforeTheHeaderArrivesIsNarrowedInItsOwnUnits) {
  open();
  // The SYN-ACK offers window scale 7; its own window is never scaled.
  SegmentSpec syn_ack = backendAck(kStart, {1, 3, 3, 7});
  syn_ack.flags = kTcpSyn | kTcpAck;
  syn_ack.window = 64240;
  EXPECT_EQ(fromBackend(syn_ack).window(), 64240 - kHeader);
  EXPECT_EQ(session_.backend_window_scale, 7);
  EXPECT_EQ(session_.proxy_header, ProxyHeaderState::kPending);
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  // Half the header acknowledged: the client's start, and one 128-byte unit less.
  const Sent half = fromBackend(backendAck(kStart + 14));
  EXPECT_EQ(half.acknowledgement(), kStart);
  EXPECT_EQ(half.window(), 999);
  EXPECT_EQ(fromBackend(backendAck(kStart + kHeader)).window(), 1000);
}

TEST_F(ProxyStreamTest, AFullSegmentAtTheStartSendsTheHeaderAloneTheFirstTime) {
  open();
  // 1460 bytes fill a 1500-byte MTU: the header alone goes, without the data and the FIN that
  // follows it; the client resends them.
  const Sent first = fromClient(clientSegment(kStart, bytesOf(1460), kTcpAck | kTcpFin),
                                ProxyClientStep::kHeaderAlone);
  EXPECT_EQ(first.data(), header());
  EXPECT_EQ(first.flags() & kTcpFin, 0);
  EXPECT_EQ(first.sequence(), kStart);
  // Once the header went, the same full segment is only shifted, as it will be when resent.
  EXPECT_EQ(fromClient(clientSegment(kStart, bytesOf(1460)), ProxyClientStep::kShifted).data(),
            bytesOf(1460));
  // With room in the MTU it would have gone with the header.
  open();
  EXPECT_EQ(fromClient(clientSegment(kStart, bytesOf(1460)), ProxyClientStep::kHeaderInserted, 9000)
                .data(),
            concat({header(), bytesOf(1460)}));
}

TEST_F(ProxyStreamTest, ASynsDataIsDroppedSinceItWouldPrecedeTheHeader) {
  open();
  SegmentSpec syn = clientSegment(kIsn, bytesOf(40), kTcpSyn);
  const Sent sent = fromClient(syn, ProxyClientStep::kSynDataDropped);
  EXPECT_TRUE(sent.data().empty());
  EXPECT_EQ(sent.sequence(), kIsn);
  // An odd length of data comes out of the checksum as well (its last byte a word's high half).
  EXPECT_TRUE(
      fromClient(clientSegment(kIsn, bytesOf(41), kTcpSyn), ProxyClientStep::kSynDataDropped)
          .data()
          .empty());
  EXPECT_EQ(fromClient(clientSegment(kIsn, {}, kTcpSyn), ProxyClientStep::kSyn).sequence(), kIsn);
  EXPECT_EQ(session_.proxy_header, ProxyHeaderState::kPending);
}

TEST_F(ProxyStreamTest, IpV6SessionsTakeThe52ByteHeader) {
  open(IpFamily::kIpv6);
  const Sent ack = fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  EXPECT_EQ(ack.data(), header());
  EXPECT_EQ(ack.data().size(), kProxyHeaderIpv6Length);
  EXPECT_EQ(fromBackend(backendAck(kStart + kProxyHeaderIpv6Length + 10)).acknowledgement(),
            kStart + 10);
  EXPECT_EQ(
      fromClient(clientSegment(kStart + 10, bytesOf(5)), ProxyClientStep::kShifted).sequence(),
      kStart + 10 + kProxyHeaderIpv6Length);
}

TEST_F(ProxyStreamTest, TheAcknowledgedFastPathShiftsAsTheFullStepDoes) {
  open();
  fromClient(clientSegment(kStart), ProxyClientStep::kHeaderInserted);
  fromBackend(backendAck(kStart + kHeader));
  const Sent full = fromClient(clientSegment(kStart + 7, bytesOf(20)), ProxyClientStep::kShifted);
  ReceivedFrame received(segment(kClient, kVip, clientSegment(kStart + 7, bytesOf(20))));
  shiftClientSequence(received.frame, received.packet, kHeader);
  EXPECT_EQ(received.sent(), full.frame);
}

TEST_F(ProxyStreamTest, AnIcmpErrorAboutAShiftedSegmentNamesTheClientsSequenceNumber) {
  open();
  // "Fragmentation needed" from a router on the backend's side, about the client's segment as
  // it left berth (shifted), already turned toward the client.
  SegmentSpec shifted = clientSegment(kStart + kHeader + 1000, bytesOf(8));
  const Bytes embedded = segment(kClient, kVip, shifted);
  const Bytes inner(embedded.begin() + 14, embedded.end());
  Bytes error = icmp(3, 4);
  error.insert(error.end(), inner.begin(), inner.end());
  const Bytes frame = withChecksums(
      concat({ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 1, 254), kClient, kProtocolIcmp, error.size()), error}));
  ReceivedFrame received(frame);
  ASSERT_EQ(received.parse_error, ParseError::kNone);
  ASSERT_TRUE(received.packet.icmp_error);
  unshiftEmbeddedSequence(received.frame, received.packet, session_);
  const Bytes out = received.sent();
  EXPECT_TRUE(checksumsVerify(out));
  EXPECT_EQ(load32(out, 14 + 20 + 8 + 20 + 4), kStart + 1000);
  // The embedded TCP checksum still verifies over the embedded segment.
  EXPECT_TRUE(checksumsVerify(
      concat({Bytes(out.begin(), out.begin() + 14), Bytes(out.begin() + 14 + 28, out.end())})));
}

}  // namespace
}  // namespace berth
