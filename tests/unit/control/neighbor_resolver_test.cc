// The neighbour cache's turn as the management loop takes it (control/neighbor_resolver.h).
// Pinned: what the cache learned is logged with the port's name, and a change asks for a publish;
// at most kLogLinesPerSecond lines a second are logged, the rest held back and counted beside the
// cache's own counters.

#include "berth/control/neighbor_resolver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace berth {
namespace {

const MacAddress kMac = *MacAddress::parse("02:00:00:00:00:fe");
const IpAddress kSource = IpAddress::v4(198, 18, 0, 10);

std::vector<PortConfig> ports() {
  PortConfig port;
  port.name = "outside";
  return {port};
}

class ResolverHarness {
 public:
  ResolverHarness() : resolver({}, 1, [this](const std::string& line) { lines.push_back(line); }) {}

  bool turn() {
    return resolver.turn(
        now,
        [this](const NextHopToResolve& hop) {
          asked.push_back(hop);
          return true;
        },
        ports_);
  }
  // Every next hop asked for answers with kMac.
  void answerAll() {
    for (const NextHopToResolve& hop : asked) {
      resolver.cache().table().resolving(hop.port, hop.address).slot->recordOtherAnswer(kMac);
    }
    asked.clear();
  }
  uint64_t sum(const std::string& name) const {
    for (const auto& [key, value] : resolver.sums()) {
      if (key == name) return value;
    }
    ADD_FAILURE() << "no sum " << name;
    return 0;
  }

  absl::Time now = absl::FromUnixSeconds(1'000'000);
  std::vector<std::string> lines;
  std::vector<NextHopToResolve> asked;
  NeighborResolver resolver;

 private:
  std::vector<PortConfig> ports_ = ports();
};

TEST(NeighborResolverTest, ALearnedMacIsLoggedWithItsPortAndAsksForAPublish) {
  ResolverHarness harness;
  const IpAddress gateway = IpAddress::v4(198, 18, 0, 254);
  harness.resolver.cache().track(std::vector<NextHopToResolve>{{0, gateway, kSource}}, ports(),
                                 harness.now);
  EXPECT_FALSE(harness.turn());
  ASSERT_EQ(harness.asked.size(), 1u);
  harness.answerAll();
  EXPECT_TRUE(harness.turn());
  EXPECT_EQ(harness.lines, std::vector<std::string>{
                               "port 'outside': next hop 198.18.0.254 is at 02:00:00:00:00:fe"});
  EXPECT_EQ(harness.sum("neighbor_log_lines_held_back"), 0u);
}

TEST(NeighborResolverTest, NewsBeyondTheLineLimitIsHeldBackAndCounted) {
  ResolverHarness harness;
  std::vector<NextHopToResolve> hops;
  for (uint8_t h = 1; h <= 30; ++h) hops.push_back({0, IpAddress::v4(198, 18, 1, h), kSource});
  harness.resolver.cache().track(hops, ports(), harness.now);
  harness.turn();
  ASSERT_EQ(harness.asked.size(), 30u);
  harness.answerAll();
  EXPECT_TRUE(harness.turn());
  EXPECT_EQ(harness.lines.size(), NeighborResolver::kLogLinesPerSecond);
  EXPECT_EQ(harness.sum("neighbor_log_lines_held_back"),
            30u - NeighborResolver::kLogLinesPerSecond);
  EXPECT_GT(harness.sum("neighbor_changes"), 0u) << "the cache's own counters come first";
}

}  // namespace
}  // namespace berth
