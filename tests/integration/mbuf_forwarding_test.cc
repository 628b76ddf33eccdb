// The forwarding code on real mbufs from a DPDK mempool, under an EAL in --no-huge mode: the
// adapter between mbufs and Frame, and the headroom an mbuf really has.

#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>
#include <string>
#include <vector>

#include "berth/dataplane/forwarding.h"
#include "berth/runtime/mbuf_frame.h"
#include "support/eal_environment.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

rte_mempool* g_pool = nullptr;

rte_mbuf* mbufWith(const Bytes& bytes) {
  rte_mbuf* mbuf = rte_pktmbuf_alloc(g_pool);
  EXPECT_NE(mbuf, nullptr);
  char* data = rte_pktmbuf_append(mbuf, static_cast<uint16_t>(bytes.size()));
  EXPECT_NE(data, nullptr);
  std::memcpy(data, bytes.data(), bytes.size());
  return mbuf;
}

TEST(MbufForwardingTest, IpipGrowsTheMbufIntoItsHeadroom) {
  const Bytes frame = concat({ethernet(kEtherTypeIpv4, {5}), ipv4(kClient, kVip, kProtocolTcp, 20),
                              tcp(40000, 80), payload(2)});  // 2 bytes of Ethernet padding
  rte_mbuf* mbuf = mbufWith(frame);
  const uint16_t headroom_before = rte_pktmbuf_headroom(mbuf);

  Frame view = frameOf(mbuf);
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(view.data, view.length, packet), ParseError::kNone);
  ASSERT_EQ(forwardIpip(view, packet, testTarget(IpAddress::v4(198, 18, 1, 2)), 0x1234),
            ForwardResult::kSend);
  applyFrame(mbuf, view);

  EXPECT_EQ(rte_pktmbuf_pkt_len(mbuf), 14u + 20 + 40);
  EXPECT_EQ(rte_pktmbuf_data_len(mbuf), 14u + 20 + 40);
  EXPECT_EQ(rte_pktmbuf_headroom(mbuf), headroom_before - (34 - 18));
  const auto* bytes = rte_pktmbuf_mtod(mbuf, const uint8_t*);
  EXPECT_EQ(bytes[12], 0x08);
  EXPECT_EQ(bytes[14 + 9], 4) << "IP-in-IP";
  EXPECT_EQ(std::memcmp(bytes + 34, frame.data() + 18, 40), 0) << "the inner packet is intact";
  rte_pktmbuf_free(mbuf);
}

TEST(MbufForwardingTest, FreshMbufsHaveTheHeadroomEveryModeNeeds) {
  rte_mbuf* mbuf = rte_pktmbuf_alloc(g_pool);
  ASSERT_NE(mbuf, nullptr);
  // The largest encapsulation, GUE over IPv6, adds 48 bytes and a fresh Ethernet header.
  EXPECT_GE(rte_pktmbuf_headroom(mbuf), encapsulationOverhead(Forwarding::kGue, IpFamily::kIpv6));
  EXPECT_EQ(frameOf(mbuf).headroom, RTE_PKTMBUF_HEADROOM);
  rte_pktmbuf_free(mbuf);
}

// The EAL, and a small mbuf pool for the tests.
class MbufEnvironment : public EalEnvironment {
 public:
  MbufEnvironment() : EalEnvironment("berth-test") {}
  void SetUp() override {
    EalEnvironment::SetUp();
    g_pool =
        rte_pktmbuf_pool_create("berth_test", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(g_pool, nullptr) << rte_strerror(rte_errno);
  }
  void TearDown() override {
    rte_mempool_free(g_pool);
    EalEnvironment::TearDown();
  }
};

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::MbufEnvironment);
  return RUN_ALL_TESTS();
}
