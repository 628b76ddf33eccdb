// Where each fleet version stands for one instance (fleet/fleet_versions.h). Pinned: the newest
// head is fetched unless the instance runs, builds, refused or holds it; a version fetched after
// a newer head arrived is dropped; a version on offer is taken once; a refusal holds until
// forgotten; a version is on its way while the newest head is at least it and neither run nor
// refused.

#include "berth/fleet/fleet_versions.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

const FleetHead kFirst{1, "push-1"};
const FleetHead kSecond{2, "push-2"};

FleetVersionText text(const FleetHead& head) { return {head, "services: []\n", "pushed.yaml"}; }

TEST(FleetVersionsTest, TheNewestHeadIsFetchedUntilRunBuiltOrOnOffer) {
  FleetVersions versions(std::nullopt);
  EXPECT_FALSE(versions.toFetch()) << "no head seen";
  versions.noteHead(kFirst);
  EXPECT_EQ(versions.toFetch(), kFirst);
  versions.offer(text(kFirst));
  EXPECT_FALSE(versions.toFetch()) << "on offer";
  const std::optional<FleetVersionText> taken = versions.take();
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->head, kFirst);
  EXPECT_FALSE(versions.take()) << "taken once";
  EXPECT_FALSE(versions.toFetch()) << "being built";
  versions.applied(kFirst);
  EXPECT_EQ(versions.running(), kFirst);
  EXPECT_FALSE(versions.toFetch()) << "running";
}

TEST(FleetVersionsTest, AVersionOvertakenWhileFetchedIsDropped) {
  FleetVersions versions(kFirst);
  EXPECT_FALSE(versions.toFetch()) << "the cached version runs";
  versions.noteHead(kSecond);
  versions.noteHead(FleetHead{3, "push-3"});
  versions.offer(text(kSecond));
  EXPECT_FALSE(versions.take());
  EXPECT_EQ(versions.toFetch()->version, 3u);
}

TEST(FleetVersionsTest, ARefusalHoldsUntilForgotten) {
  FleetVersions versions(kFirst);
  versions.noteHead(kSecond);
  versions.offer(text(kSecond));
  ASSERT_TRUE(versions.take());
  versions.refused(kSecond);
  EXPECT_FALSE(versions.toFetch());
  EXPECT_EQ(versions.running(), kFirst);
  versions.forgetRefusal();
  EXPECT_EQ(versions.toFetch(), kSecond);
}

TEST(FleetVersionsTest, AVersionIsOnItsWayWhileSeenAndNeitherRunNorRefused) {
  FleetVersions versions(kFirst);
  EXPECT_FALSE(versions.onItsWay(2)) << "no newer head seen";
  versions.noteHead(kSecond);
  EXPECT_TRUE(versions.onItsWay(2));
  EXPECT_FALSE(versions.onItsWay(1)) << "runs it";
  EXPECT_FALSE(versions.onItsWay(3)) << "not seen";
  versions.offer(text(kSecond));
  versions.take();
  EXPECT_TRUE(versions.onItsWay(2)) << "being built";
  versions.refused(kSecond);
  EXPECT_FALSE(versions.onItsWay(2));
}

}  // namespace
}  // namespace berth
