// The fleet's instances as one instance reads them (fleet/instance_roster.h). Pinned: an instance
// whose report leaves is named once and still counts with its last verdicts for kDepartedHold,
// then no more; one that comes back counts as live; this instance's own verdicts count as they are
// now, not as its last report put them; this instance never counts as departed.

#include "berth/fleet/instance_roster.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace berth {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

InstanceReport report(const std::string& name, bool web1_up) {
  InstanceReport made;
  made.name = name;
  made.health["web"]["web-1"] = web1_up;
  return made;
}

InstanceRoster::Verdicts up(bool web1_up) { return {{"web", {{"web-1", web1_up}}}}; }

TEST(InstanceRosterTest, ADepartedInstanceCountsForTheHoldThenNoMore) {
  InstanceRoster roster("lb-1", 2);
  EXPECT_TRUE(roster
                  .update({report("lb-1", true), report("lb-2", false), report("lb-3", false)},
                          kStart, up(true))
                  .empty());
  EXPECT_EQ(roster.agreed().down.at("web"), std::set<std::string>{"web-1"});

  EXPECT_EQ(roster.update({report("lb-1", true), report("lb-2", false)}, kStart + absl::Seconds(1),
                          up(true)),
            std::vector<std::string>{"lb-3"});
  EXPECT_EQ(roster.reports().size(), 2u);
  EXPECT_EQ(roster.agreed().down.at("web"), std::set<std::string>{"web-1"})
      << "lb-3's last verdict still counts";
  EXPECT_TRUE(roster
                  .update({report("lb-1", true), report("lb-2", false)},
                          kStart + absl::Seconds(1) + InstanceRoster::kDepartedHold, up(true))
                  .empty());
  EXPECT_FALSE(roster.agreed().down.contains("web")) << "held no longer: 1 of 2 is no quorum";
}

TEST(InstanceRosterTest, AnInstanceThatComesBackIsLiveAgain) {
  InstanceRoster roster("lb-1", 0);
  roster.update({report("lb-1", true), report("lb-2", true)}, kStart, up(true));
  roster.update({report("lb-1", true)}, kStart + absl::Seconds(1), up(true));
  EXPECT_TRUE(
      roster
          .update({report("lb-1", true), report("lb-2", true)}, kStart + absl::Seconds(2), up(true))
          .empty());
  EXPECT_TRUE(roster
                  .update({report("lb-1", true), report("lb-2", true)}, kStart + absl::Seconds(100),
                          up(true))
                  .empty());
  EXPECT_EQ(roster.reports().size(), 2u);
}

TEST(InstanceRosterTest, ThisInstancesVerdictsCountAsTheyAreNow) {
  InstanceRoster roster("lb-1", 1);
  roster.update({report("lb-1", true)}, kStart, up(true));
  EXPECT_FALSE(roster.agreed().down.contains("web"));
  roster.agree(up(false));
  EXPECT_EQ(roster.agreed().down.at("web"), std::set<std::string>{"web-1"})
      << "its own report still says up";
  EXPECT_TRUE(roster.update({}, kStart + absl::Seconds(1), up(false)).empty())
      << "this instance's own report gone is not a departure";
}

}  // namespace
}  // namespace berth
