// The fleet's agreed health (fleet/agreed_health.h). Pinned:
// - a backend one instance of three sees down stays in, and that instance is named as dissenting;
// - a majority takes it out, and the instance still seeing it up is named;
// - a configured quorum counts down verdicts, capped at the live instances;
// - an instance without a verdict for a backend counts neither way, and a backend is judged once
//   any instance has a verdict for it;
// - the result does not depend on the order of the reports.

#include "berth/fleet/agreed_health.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace berth {
namespace {

InstanceVerdicts verdicts(std::string instance, bool web1_up, bool web2_up = true) {
  InstanceVerdicts v;
  v.instance = std::move(instance);
  v.up["web"] = {{"web-1", web1_up}, {"web-2", web2_up}};
  return v;
}

TEST(AgreedHealthTest, OneInstanceOfThreeChangesNothing) {
  const AgreedHealth agreed =
      agreeOnHealth({verdicts("lb-a", true), verdicts("lb-b", false), verdicts("lb-c", true)});
  EXPECT_EQ(agreed.quorum, 2u);
  EXPECT_TRUE(agreed.down.empty());
  ASSERT_EQ(agreed.dissent.size(), 1u);
  EXPECT_EQ(agreed.dissent.at({"web", "web-1"}), std::vector<std::string>{"lb-b"});
  EXPECT_EQ(agreed.judged.at("web"), (std::set<std::string>{"web-1", "web-2"}));
}

TEST(AgreedHealthTest, AMajorityTakesABackendOut) {
  const AgreedHealth agreed =
      agreeOnHealth({verdicts("lb-c", false), verdicts("lb-a", true), verdicts("lb-b", false)});
  EXPECT_EQ(agreed.down.at("web"), std::set<std::string>{"web-1"});
  EXPECT_EQ(agreed.dissent.at({"web", "web-1"}), std::vector<std::string>{"lb-a"});
  EXPECT_EQ(agreed.dissent.count({"web", "web-2"}), 0u);
}

TEST(AgreedHealthTest, AConfiguredQuorumIsCappedAtTheLiveInstances) {
  const std::vector<InstanceVerdicts> live = {verdicts("lb-a", false), verdicts("lb-b", true),
                                              verdicts("lb-c", true)};
  EXPECT_EQ(agreeOnHealth(live, 1).down.at("web"), std::set<std::string>{"web-1"});
  EXPECT_TRUE(agreeOnHealth(live, 2).down.empty());
  const AgreedHealth alone = agreeOnHealth({verdicts("lb-a", false)}, 3);
  EXPECT_EQ(alone.quorum, 1u);
  EXPECT_EQ(alone.down.at("web"), std::set<std::string>{"web-1"});
  EXPECT_TRUE(agreeOnHealth({}).down.empty());
}

TEST(AgreedHealthTest, NoVerdictCountsNeitherWay) {
  InstanceVerdicts new_config = verdicts("lb-a", false);
  new_config.up["web"]["web-3"] = false;
  InstanceVerdicts old_config = verdicts("lb-b", false);
  const AgreedHealth agreed = agreeOnHealth({new_config, old_config, verdicts("lb-c", true)});
  // web-3: one down verdict of the two needed; nobody saw it up.
  EXPECT_EQ(agreed.down.at("web"), std::set<std::string>{"web-1"});
  EXPECT_EQ(agreed.dissent.at({"web", "web-3"}), std::vector<std::string>{"lb-a"});
}

TEST(AgreedHealthTest, TheOrderOfReportsDoesNotMatter) {
  std::vector<InstanceVerdicts> live = {verdicts("lb-a", false, false), verdicts("lb-b", true),
                                        verdicts("lb-c", false), verdicts("lb-d", true, false)};
  const AgreedHealth first = agreeOnHealth(live);
  std::reverse(live.begin(), live.end());
  const AgreedHealth second = agreeOnHealth(live);
  EXPECT_EQ(first.down, second.down);
  EXPECT_EQ(first.dissent, second.dissent);
  EXPECT_EQ(first.quorum, 3u);
}

}  // namespace
}  // namespace berth
