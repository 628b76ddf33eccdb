// The numbering of published snapshots and the report of each once in force
// (control/snapshot_rollouts.h). Pinned: generations count from 1 with each publish; a publish to
// report is reported once, when its own token is in force, with the time since its event began,
// and the ones not in force wait for a later turn.

#include "berth/control/snapshot_rollouts.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace berth {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(SnapshotRolloutsTest, GenerationsCountPublishes) {
  SnapshotRollouts rollouts;
  EXPECT_EQ(rollouts.generation(), 0u);
  EXPECT_EQ(rollouts.next(), 1u);
  rollouts.published(40);
  rollouts.published(41);
  EXPECT_EQ(rollouts.generation(), 2u);
  EXPECT_EQ(rollouts.next(), 3u);
}

TEST(SnapshotRolloutsTest, EachPublishIsReportedOnceWhenItsTokenIsInForce) {
  SnapshotRollouts rollouts;
  rollouts.published(7);
  rollouts.reportWhenInForce(kStart, "the reload began");
  rollouts.published(8);  // not to be reported: a MAC learned
  rollouts.published(9);
  rollouts.reportWhenInForce(kStart + absl::Milliseconds(5), "the health change");
  std::set<uint64_t> in_force = {7, 8};
  const auto in_force_now = [&](uint64_t token) { return in_force.contains(token); };

  EXPECT_EQ(rollouts.takeInForce(in_force_now, kStart + absl::Milliseconds(10)),
            std::vector<std::string>{
                "snapshot 1 in use by every worker 10.00 ms after the reload began"});
  EXPECT_EQ(rollouts.waiting(), 1u);
  EXPECT_TRUE(rollouts.takeInForce(in_force_now, kStart + absl::Milliseconds(11)).empty());
  in_force.insert(9);
  EXPECT_EQ(rollouts.takeInForce(in_force_now, kStart + absl::Milliseconds(12)),
            std::vector<std::string>{
                "snapshot 3 in use by every worker 7.00 ms after the health change"});
  EXPECT_EQ(rollouts.waiting(), 0u);
}

}  // namespace
}  // namespace berth
