#include "berth/control/announce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "berth/config/loader.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kConfig[] = R"(dataplane:
  ports:
    - name: uplink
      device: net_null0
      ipv4: 198.18.0.1
      ipv6: "2001:db8::1"
      gateway: 198.18.0.254
bgp:
  asn: 65001
  router_id: 198.18.0.1
  port: uplink
  neighbors:
    - { address: 198.18.0.254, asn: 65000 }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    announce: bgp
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
  - name: dns
    vip: "2001:db8::53"
    port: 53
    protocol: udp
    forwarding: ipip
    announce: bgp
    backends:
      - { name: dns-1, address: "2001:db8:1::2" }
  - name: quiet
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    backends:
      - { name: q-1, address: 198.18.1.9 }
)";

class AnnounceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Config> config = parseConfig(kConfig, "announce.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    absl::StatusOr<std::vector<ServiceState>> states = createServiceStates(config_.services);
    ASSERT_TRUE(states.ok()) << states.status();
    services_ = *std::move(states);
    forwarding_.workers_running = true;
  }

  AnnounceDecision decide() const { return decideAnnouncements(config_, services_, forwarding_); }

  Config config_;
  std::vector<ServiceState> services_;
  ForwardingState forwarding_;
};

// A stop waits for the routes' withdrawal only where some service announces over BGP.
TEST_F(AnnounceTest, OnlyABgpSectionWithAnAnnouncingServiceHasRoutesToWithdraw) {
  EXPECT_TRUE(announcesOverBgp(config_));
  Config quiet = config_;
  for (ServiceConfig& service : quiet.services) service.announce_bgp = false;
  EXPECT_FALSE(announcesOverBgp(quiet));
  Config no_bgp = config_;
  no_bgp.bgp.reset();
  EXPECT_FALSE(announcesOverBgp(no_bgp));
}

// Each `announce: bgp` service gets a host route with the bgp port's address of its family.
TEST_F(AnnounceTest, AnnouncesEveryBgpServiceThatServes) {
  const AnnounceDecision decision = decide();
  EXPECT_TRUE(decision.not_forwarding.empty());
  ASSERT_EQ(decision.routes.size(), 2u);
  EXPECT_EQ(decision.routes[0].service, "web");
  EXPECT_EQ(decision.routes[0].prefix, "198.18.100.1/32");
  EXPECT_EQ(decision.routes[0].next_hop, "198.18.0.1");
  EXPECT_EQ(decision.routes[1].prefix, "2001:db8::53/128");
  EXPECT_EQ(decision.routes[1].next_hop, "2001:db8::1");
  EXPECT_THAT(decision.withheld, IsEmpty());
  const std::string reply = announceReplyJson(decision);
  EXPECT_THAT(reply, HasSubstr(R"("forwarding":true)"));
  EXPECT_THAT(
      reply,
      HasSubstr(R"("route_list":"198.18.100.1/32 198.18.0.1\n2001:db8::53/128 2001:db8::1\n")"));
}

// A service whose backends are all down, or all drained, is held back; the others stay.
TEST_F(AnnounceTest, WithholdsAServiceWithNothingToServe) {
  ASSERT_TRUE(services_[0].setHealth({false, false}).ok());
  ASSERT_TRUE(services_[1].setDrained("dns-1", true).ok());
  const AnnounceDecision decision = decide();
  EXPECT_THAT(decision.routes, IsEmpty());
  ASSERT_EQ(decision.withheld.size(), 2u);
  EXPECT_EQ(decision.withheld[0].service, "web");
  EXPECT_EQ(decision.withheld[0].reason, "no healthy backend with a weight");
  EXPECT_EQ(decision.withheld[1].service, "dns");

  ASSERT_TRUE(services_[0].setHealth({true, false}).ok());
  EXPECT_EQ(decide().routes.size(), 1u);
}

// While the instance does not forward, nothing at all is announced, each time with its reason.
TEST_F(AnnounceTest, NothingWhileNotForwarding) {
  struct Case {
    std::function<void(ForwardingState&)> set;
    std::string reason;
  };
  const Case cases[] = {
      {[](ForwardingState& f) { f.workers_running = false; }, "workers not running"},
      {[](ForwardingState& f) { f.stopping = true; }, "stopping"},
      {[](ForwardingState& f) { f.stalled_for_ms = 500; },
       "datapath stalled: a worker passed no quiescent state for 500 ms"},
      {[](ForwardingState& f) { f.ports_down = {"uplink"}; }, "port 'uplink' is down"},
  };
  for (const Case& c : cases) {
    ForwardingState forwarding = forwarding_;
    c.set(forwarding);
    const AnnounceDecision decision = decideAnnouncements(config_, services_, forwarding);
    EXPECT_EQ(decision.not_forwarding, c.reason);
    EXPECT_THAT(decision.routes, IsEmpty());
    EXPECT_THAT(decision.withheld, IsEmpty());
    EXPECT_THAT(announceReplyJson(decision), HasSubstr(R"("route_list":"")"));
  }
  // Another port being down does not stop the announcements.
  forwarding_.ports_down = {"backends"};
  EXPECT_EQ(decide().routes.size(), 2u);
}

TEST_F(AnnounceTest, NothingWithoutABgpSection) {
  config_.bgp.reset();
  const AnnounceDecision decision = decide();
  EXPECT_TRUE(decision.not_forwarding.empty());
  EXPECT_THAT(decision.routes, IsEmpty());
  EXPECT_THAT(decision.withheld, IsEmpty());
}

}  // namespace
}  // namespace berth
