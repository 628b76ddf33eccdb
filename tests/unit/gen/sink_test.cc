// berthgen's sink against berth's own pipeline: frames berthgen builds, forwarded by the pipeline
// in every mode, are decoded, verified byte for byte and booked to the backend the table picks.

#include "berth/gen/sink.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rte_byteorder.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "berth/config/loader.h"
#include "berth/dataplane/pipeline.h"
#include "berth/gen/backend_reply.h"
#include "support/frames.h"
#include "support/readdress.h"

namespace berth {
namespace {

const MacAddress kGenMac = *MacAddress::parse("02:00:00:00:00:02");
const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");
constexpr uint64_t kTscHz = 1'000'000'000;  // a nanosecond clock, for exact latencies

constexpr char kConfig[] = R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, ipv6: "2001:db8:ff::10",
        gateway_mac: "02:00:00:00:00:fe" }
services:
  - name: ipip
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: a, address: 198.18.1.2 }
      - { name: b, address: 198.18.1.3 }
      - { name: c, address: 198.18.1.4 }
  - name: gue
    vip: 198.18.100.2
    port: 53
    protocol: udp
    forwarding: gue
    gue_port: 6080
    backends:
      - { name: a, address: 198.18.2.2 }
      - { name: b, address: 198.18.2.3 }
  - name: gre6
    vip: "2001:db8::80"
    port: 443
    protocol: tcp
    forwarding: gre
    backends:
      - { name: a, address: "2001:db8:2::2" }
      - { name: b, address: "2001:db8:2::3" }
  - name: dsr
    vip: 198.18.100.3
    port: 80
    protocol: tcp
    forwarding: l2dsr
    backends:
      - { name: a, address: 198.18.0.21, mac: "02:00:00:00:00:21" }
      - { name: b, address: 198.18.0.22, mac: "02:00:00:00:00:22" }
)";

class SinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = *parseConfig(kConfig, "test.yaml");
    const std::vector<Table> tables = *buildServiceTables(config_);
    const MacAddress macs[] = {kPortMac};
    snapshot_ = *buildSnapshot(config_, tables, macs, {}, ids_, 1);
    state_.counters = &counters_;
    state_.traffic = {services_.data(), backends_.data()};
    const std::vector<VipTarget> vips = {
        *VipTarget::parse("198.18.100.1:80/tcp"), *VipTarget::parse("198.18.100.2:53/udp"),
        *VipTarget::parse("[2001:db8::80]:443/tcp"), *VipTarget::parse("198.18.100.3:80/tcp")};
    flows_ = *makeFlows(vips, v4_, v6_, 400);
  }

  // Flow `f`'s packet `sequence` as berthd would send it on.
  Bytes forwarded(size_t f, uint32_t sequence, uint64_t tsc, size_t size = 64) {
    Bytes frame(2048);
    frame.resize(buildFrame(flows_[f], static_cast<uint32_t>(f), sequence, tsc, size, kGenMac,
                            kPortMac, frame.data()));
    ReceivedFrame received(frame);
    EXPECT_EQ(processFrame(*snapshot_, 0, received.frame, state_), Verdict::kTransmit);
    return received.sent();
  }

  Sink sink() { return Sink(&flows_, v4_, v6_, 6080, kTscHz); }

  SourceNet v4_ = *SourceNet::parse("198.18.0.0/15");
  SourceNet v6_ = *SourceNet::parse("2001:db8:1::/64");
  Config config_;
  CounterIds ids_;
  std::unique_ptr<const Snapshot> snapshot_;
  WorkerCounters counters_;
  std::vector<TrafficCounter> services_ = std::vector<TrafficCounter>(CounterIds::kMaxServices);
  std::vector<TrafficCounter> backends_ = std::vector<TrafficCounter>(CounterIds::kMaxBackends);
  WorkerState state_;
  std::vector<GenFlow> flows_;
};

TEST_F(SinkTest, EveryModeDecodesVerifiesAndLandsOnTheTablesBackend) {
  Sink sink = this->sink();
  for (size_t f = 0; f < flows_.size(); ++f) {
    for (uint32_t sequence = 0; sequence < 3; ++sequence) {
      const Bytes out = forwarded(f, sequence, 1000 + sequence);
      sink.receive(out.data(), out.size(), 1500 + sequence);
    }
  }
  EXPECT_EQ(sink.totals().verified, 3 * flows_.size());
  EXPECT_EQ(sink.totals().corrupt, 0u);
  EXPECT_EQ(sink.totals().foreign, 0u);
  EXPECT_EQ(sink.totals().duplicates + sink.totals().reordered, 0u);
  const std::vector<BackendKey> expected = *tableBackends(config_, flows_);
  for (size_t f = 0; f < flows_.size(); ++f) {
    ASSERT_GE(sink.flowBackend(f), 0);
    EXPECT_EQ(sink.backends()[static_cast<size_t>(sink.flowBackend(f))], expected[f])
        << flows_[f].key.toString();
    EXPECT_FALSE(sink.flowMoved(f));
    EXPECT_EQ(sink.flowReceived(f), 3u);
  }
  EXPECT_EQ(sink.backends().size(), 9u) << "every backend of the four services gets flows";
  EXPECT_NEAR(static_cast<double>(sink.latency().percentile(0.5)), 500, 500 * 0.03);
}

// berthgen --reflect: flow `f`'s packet `sequence` to a Full-NAT backend, answered by it
// (gen/backend_reply.h), and translated back by berthd to come from the VIP to the client.
Bytes fullNatReply(const GenFlow& flow, size_t f, uint32_t sequence, uint64_t tsc,
                   const IpAddress& backend) {
  Bytes frame(2048);
  frame.resize(buildFrame(flow, static_cast<uint32_t>(f), sequence, tsc, 64, kGenMac, kPortMac,
                          frame.data()));
  const IpAddress local = flow.key.family == IpFamily::kIpv4 ? IpAddress::v4(198, 18, 1, 20)
                                                             : *IpAddress::parse("2001:db8:1::20");
  frame = readdressed(frame, local, 20001, backend, 8080);
  const size_t length = frame.size();
  frame.resize(2048);
  FlowKey key;
  frame.resize(replyAsBackend(frame.data(), length, frame.size(), {}, 0, key));
  EXPECT_GT(frame.size(), 0u);
  const IpAddress vip{flow.key.family, flow.key.destination};
  const IpAddress client{flow.key.family, flow.key.source};
  return readdressed(frame, vip, rte_be_to_cpu_16(flow.key.destination_port), client,
                     rte_be_to_cpu_16(flow.key.source_port));
}

TEST_F(SinkTest, AFullNatBackendsReplyIsVerifiedAndBookedToThatBackend) {
  Sink sink = this->sink();
  const IpAddress backend = IpAddress::v4(198, 18, 1, 3);
  const IpAddress backend6 = *IpAddress::parse("2001:db8:2::3");
  for (size_t f = 0; f < 8; ++f) {
    const bool v4 = flows_[f].key.family == IpFamily::kIpv4;
    for (uint32_t sequence = 0; sequence < 2; ++sequence) {
      const Bytes reply = fullNatReply(flows_[f], f, sequence, 1000, v4 ? backend : backend6);
      sink.receive(reply.data(), reply.size(), 1700);
    }
  }
  EXPECT_EQ(sink.totals().verified, 16u);
  EXPECT_EQ(sink.totals().corrupt + sink.totals().foreign, 0u);
  ASSERT_EQ(sink.backends().size(), 2u);
  for (size_t f = 0; f < 8; ++f) {
    const bool v4 = flows_[f].key.family == IpFamily::kIpv4;
    EXPECT_EQ(sink.backends()[static_cast<size_t>(sink.flowBackend(f))],
              BackendKey::of(v4 ? backend : backend6));
    EXPECT_EQ(sink.flowReceived(f), 2u);
  }
  EXPECT_NEAR(static_cast<double>(sink.latency().percentile(0.5)), 700, 700 * 0.03);

  // A payload byte changed on the way, or a checksum berthd left wrong: corrupt.
  Bytes changed = fullNatReply(flows_[0], 0, 2, 1000, backend);
  changed[changed.size() - kReplyBackendBytes - 1] ^= 1;
  changed = withChecksums(changed);
  sink.receive(changed.data(), changed.size(), 1700);
  Bytes bad_checksum = fullNatReply(flows_[0], 0, 3, 1000, backend);
  bad_checksum[14 + 20 + 16] ^= 1;
  sink.receive(bad_checksum.data(), bad_checksum.size(), 1700);
  EXPECT_EQ(sink.totals().corrupt, 2u);
  EXPECT_EQ(sink.totals().verified, 16u);
}

TEST_F(SinkTest, ACorruptedInnerByteIsCaughtAndAnUnknownFlowIsForeign) {
  Sink sink = this->sink();
  Bytes out = forwarded(0, 1, 1000, 200);
  out[out.size() - 5] ^= 0x40;
  sink.receive(out.data(), out.size(), 2000);
  EXPECT_EQ(sink.totals().corrupt, 1u);
  const Bytes arp = concat({Bytes(12, 0xff), Bytes{0x08, 0x06}, Bytes(28, 0)});
  sink.receive(arp.data(), arp.size(), 2000);
  EXPECT_EQ(sink.totals().foreign, 1u);
  EXPECT_EQ(sink.totals().verified, 0u);
}

TEST_F(SinkTest, FloodConnectionAttemptsAreCountedApartAndNeverTakenForAFlow) {
  Sink sink = this->sink();
  const VipTarget vip = *VipTarget::parse("198.18.100.1:80/tcp");
  for (uint64_t random = 1; random < 2000; random += 7) {
    const GenFlow flood = floodFlow(vip, v4_, random * 0x9E3779B97F4A7C15ull);
    Bytes frame(2048);
    frame.resize(buildFrame(flood, 0, 0, 1000, 0, kGenMac, kPortMac, frame.data()));
    ReceivedFrame received(frame);
    ASSERT_EQ(processFrame(*snapshot_, 0, received.frame, state_), Verdict::kTransmit);
    const Bytes out = received.sent();
    sink.receive(out.data(), out.size(), 2000);
  }
  EXPECT_EQ(sink.totals().flood, 286u);
  EXPECT_EQ(sink.totals().foreign + sink.totals().verified + sink.totals().corrupt, 0u);
}

TEST_F(SinkTest, BerthdsTooBigRepliesAreCountedApart) {
  Sink sink = this->sink();
  // 1514 bytes from the client, 20 more once in IPv4-in-IPv4: over the port's 1500.
  Bytes frame(2048);
  frame.resize(buildFrame(flows_[0], 0, 1, 0, 1514, kGenMac, kPortMac, frame.data()));
  ReceivedFrame received(frame);
  ASSERT_EQ(processFrame(*snapshot_, 0, received.frame, state_), Verdict::kTransmit);
  const Bytes reply = received.sent();
  sink.receive(reply.data(), reply.size(), 0);
  EXPECT_EQ(sink.totals().too_big, 1u);
  EXPECT_EQ(sink.totals().foreign, 0u);
}

TEST_F(SinkTest, DuplicatesReorderingAndMovesAreCounted) {
  Sink sink = this->sink();
  for (uint32_t sequence : {0u, 1u, 2u, 1u, 5u, 4u}) {
    const Bytes out = forwarded(0, sequence, 0);
    sink.receive(out.data(), out.size(), 0);
  }
  EXPECT_EQ(sink.totals().duplicates, 1u);
  EXPECT_EQ(sink.totals().reordered, 1u);
  EXPECT_EQ(sink.flowReceived(0), 5u) << "unique packets";
  // The same flow's packet arriving at another backend (encapsulated by hand to another address).
  Bytes moved = forwarded(0, 6, 0);
  moved[14 + 19] ^= 1;  // the outer destination's last byte; the sink ignores outer checksums
  sink.receive(moved.data(), moved.size(), 0);
  EXPECT_TRUE(sink.flowMoved(0));
}

// Where a loss fell: each missing packet named by flow and sequence, whether it was a hole the
// window still holds, one the window moved past (a jump of more than 64), a late arrival that
// was given up and then came, or the tail a flow never reached.
TEST_F(SinkTest, MissingPacketsAreNamedByFlowAndSequence) {
  Sink sink = this->sink();
  auto receive = [&](size_t f, uint32_t sequence) {
    const Bytes out = forwarded(f, sequence, 0);
    sink.receive(out.data(), out.size(), 0);
  };
  for (uint32_t sequence : {0u, 1u, 3u, 4u}) receive(0, sequence);  // 2 a hole in the window
  receive(1, 0);
  receive(1, 100);  // 1 to 36 leave the window unseen; 37 to 99 stay in it as holes
  receive(1, 20);   // given up, then late
  receive(2, 5);    // 0 to 4 holes below the first packet seen
  std::vector<uint64_t> sent(flows_.size(), 0);
  sent[0] = 6;  // 5 never came
  sent[1] = 101;
  sent[2] = 6;
  sent[3] = 2;  // never seen at all
  const std::vector<MissingPacket> missing = sink.missing(sent);
  std::vector<MissingPacket> expected;
  for (uint32_t s = 1; s <= 36; ++s) {
    if (s != 20) expected.push_back({1, s});
  }
  expected.push_back({0, 2});
  expected.push_back({0, 5});
  for (uint32_t s = 37; s <= 99; ++s) expected.push_back({1, s});
  for (uint32_t s = 0; s <= 4; ++s) expected.push_back({2, s});
  expected.push_back({3, 0});
  expected.push_back({3, 1});
  auto order = [](const MissingPacket& a, const MissingPacket& b) {
    return std::pair(a.flow, a.sequence) < std::pair(b.flow, b.sequence);
  };
  std::vector<MissingPacket> got = missing;
  std::sort(got.begin(), got.end(), order);
  std::sort(expected.begin(), expected.end(), order);
  EXPECT_EQ(got, expected);
  uint64_t lost = 0;
  for (size_t f = 0; f < 4; ++f) lost += sent[f] - sink.flowReceived(f);
  EXPECT_EQ(missing.size(), lost) << "the same loss the books count";
}

TEST_F(SinkTest, MissingPacketsAreKeptUpToTheirBound) {
  Sink sink = this->sink();
  std::vector<uint64_t> sent(flows_.size(), 100);  // 400 flows, nothing received
  EXPECT_EQ(sink.missing(sent).size(), Sink::kMissingKept);
}

TEST(LatencyHistogramTest, PercentilesAreWithinThreePercent) {
  LatencyHistogram histogram;
  for (uint64_t ns = 1; ns <= 100'000; ++ns) histogram.add(ns);
  EXPECT_EQ(histogram.count(), 100'000u);
  for (const auto& [quantile, exact] :
       {std::pair{0.5, 50'000.0}, {0.99, 99'000.0}, {0.999, 99'900.0}}) {
    const double got = static_cast<double>(histogram.percentile(quantile));
    EXPECT_NEAR(got, exact, exact * 0.03) << quantile;
  }
  EXPECT_EQ(histogram.percentile(0.0), 1u);
  LatencyHistogram empty;
  EXPECT_EQ(empty.percentile(0.99), 0u);
}

}  // namespace
}  // namespace berth
