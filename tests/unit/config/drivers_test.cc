// What berth knows of each driver (config/drivers.h): the mbufs af_xdp keeps besides its RX
// ring, af_packet's missing drop count, and the pool sized from them, so that every descriptor
// count the config accepts starts on every driver.

#include "berth/config/drivers.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

PoolDemand demandOf(const char* driver, uint16_t rx, uint16_t tx) {
  return {.driver = driver,
          .queues = 1,
          .rx_descriptors = rx,
          .tx_descriptors = tx,
          .workers = 1,
          .cache_per_lcore = 256,
          .exception_frames = 0};
}

TEST(DriverTraitsTest, AfXdpKeepsItsFillRingBesidesTheRxRing) {
  EXPECT_EQ(driverTraits("net_af_xdp").rx_mbufs_besides_ring, 2048u);
  EXPECT_TRUE(driverTraits("net_af_xdp").reports_drops);
  EXPECT_EQ(driverTraits("net_ice").rx_mbufs_besides_ring, 0u);
}

TEST(DriverTraitsTest, AfPacketCountsNoDropsAndSaysWhatItsRingHolds) {
  const DriverTraits traits = driverTraits("net_af_packet");
  EXPECT_FALSE(traits.reports_drops);
  EXPECT_NE(traits.ring_note.find("framecnt"), absl::string_view::npos);
  EXPECT_TRUE(driverTraits("net_mlx5").reports_drops);
  EXPECT_TRUE(driverTraits("net_mlx5").ring_note.empty());
}

TEST(PoolSizingTest, TheSmallestAcceptedDescriptorsStillCoverAfXdpsFillRing) {
  // 64 RX and 64 TX descriptors: 1,856 by the rings alone, below the 2,048 af_xdp takes at
  // queue set-up (rte_eth_rx_queue_setup failed with EINVAL before).
  EXPECT_EQ(mbufsNeeded(demandOf("net_mlx5", 64, 64)), 64u + 64 + 64 + 2 * 256 + 1024);
  EXPECT_GE(mbufsNeeded(demandOf("net_af_xdp", 64, 64)), 2048u + 2 * 256 + 1024);
  EXPECT_EQ(mbufsNeeded(demandOf("net_af_xdp", 64, 64)) - mbufsNeeded(demandOf("x", 64, 64)),
            2048u);
}

TEST(PoolSizingTest, GrowsWithQueuesWorkersAndTheExceptionPath) {
  PoolDemand demand = demandOf("net_ice", 1024, 1024);
  const unsigned one = mbufsNeeded(demand);
  demand.queues = 4;
  demand.workers = 4;
  EXPECT_EQ(mbufsNeeded(demand), one + 3 * (1024 + 1024 + 64) + 3 * 256);
  demand.exception_frames = 5000;
  EXPECT_EQ(mbufsNeeded(demand), one + 3 * (1024 + 1024 + 64) + 3 * 256 + 5000);
}

TEST(VdevDriverTest, NamesTheDriverOfAVdevStringAndNothingForPci) {
  EXPECT_EQ(vdevDriver("net_af_xdp0,iface=eth1"), "net_af_xdp");
  EXPECT_EQ(vdevDriver("net_memif12"), "net_memif");
  EXPECT_EQ(vdevDriver("net_pcap"), "net_pcap");
  EXPECT_EQ(vdevDriver("0000:3b:00.0"), "");
  EXPECT_EQ(vdevDriver("eth0"), "");
}

TEST(VdevStringTest, ArgumentsAndTheEalVdevThatCreatesADevice) {
  EXPECT_EQ(vdevArgument("net_af_xdp0,iface=eth1,queue=0", "iface"), "eth1");
  EXPECT_EQ(vdevArgument("net_af_xdp0,queue=0", "iface"), "");
  EXPECT_EQ(vdevArgument("net_af_xdp0", "iface"), "");
  const std::vector<std::string> eal = {"--no-pci", "--vdev", "net_memif0,role=server",
                                        "--vdev=net_af_packet1,iface=eth2"};
  EXPECT_EQ(ealVdevCreating(eal, "net_memif0"), "net_memif0,role=server");
  EXPECT_EQ(ealVdevCreating(eal, "net_af_packet1"), "net_af_packet1,iface=eth2");
  EXPECT_EQ(ealVdevCreating(eal, "net_memif1"), "");
  EXPECT_EQ(ealVdevCreating(eal, "net_memif"), "") << "names match whole";
}

TEST(PciBindingTest, AKernelDriverIsNamedWithHowToBindTheDevice) {
  EXPECT_EQ(sysfsPciAddress("3b:00.0,rxq_cqe_comp_en=0"), "0000:3b:00.0");
  EXPECT_EQ(sysfsPciAddress("0000:3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(pciBindingAdvice("0000:3b:00.0", {true, "ice"}),
            "0000:3b:00.0 is bound to the kernel's ice driver, which DPDK cannot share: take its "
            "interface down, then dpdk-devbind.py -b vfio-pci 0000:3b:00.0 (docs/nics.md)");
  EXPECT_NE(pciBindingAdvice("0000:3b:00.0", {true, ""}).find("bound to no driver"),
            std::string::npos);
  EXPECT_NE(pciBindingAdvice("0000:3b:00.0", {false, ""}).find("no PCI device 0000:3b:00.0"),
            std::string::npos);
  EXPECT_NE(pciBindingAdvice("0000:3b:00.0", {true, "mlx5_core"}).find("where it stays"),
            std::string::npos);
  EXPECT_EQ(pciBindingAdvice("0000:3b:00.0", {true, "vfio-pci"}), "")
      << "bound as DPDK needs: the cause is elsewhere";
}

}  // namespace
}  // namespace berth
