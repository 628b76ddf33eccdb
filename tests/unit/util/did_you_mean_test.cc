// "Did you mean" (util/did_you_mean.h). Pinned: a typo or two finds the nearest name; a word far
// from every name finds none; a qualified name finds the plain one it holds.

#include "berth/util/did_you_mean.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace berth {
namespace {

const std::vector<std::string> kCommands = {"status", "stats", "services", "backends", "reload"};

TEST(DidYouMeanTest, ATypoFindsTheNearestName) {
  EXPECT_EQ(nearestName("statsu", kCommands), "stats");
  EXPECT_EQ(nearestName("backend", kCommands), "backends");
  EXPECT_EQ(nearestName("relaod", kCommands), "reload");
  EXPECT_EQ(nearestName("stat", kCommands), "stats") << "the first of two equally near";
}

TEST(DidYouMeanTest, AWordFarFromEveryNameFindsNone) {
  EXPECT_EQ(nearestName("frobnicate", kCommands), std::nullopt);
  EXPECT_EQ(nearestName("ab", kCommands), std::nullopt) << "two letters may differ by one only";
  EXPECT_EQ(nearestName("x", {}), std::nullopt);
}

TEST(DidYouMeanTest, AQualifiedNameFindsThePlainOneItHolds) {
  const std::vector<std::string> flags = {"socket", "config", "json"};
  EXPECT_EQ(nearestName("control-socket", flags), "socket");
  EXPECT_EQ(nearestName("config-file", flags), "config");
  EXPECT_EQ(nearestName("controlsocket", flags), std::nullopt);
}

TEST(DidYouMeanTest, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(editDistance("", "abc"), 3u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistance("same", "same"), 0u);
}

}  // namespace
}  // namespace berth
