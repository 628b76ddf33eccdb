#include "berth/util/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;

TEST(CommandLineTest, SplitsAtTheFirstDoubleDash) {
  const char* argv[] = {"berthd", "-l", "0-1", "--", "--config", "x.yaml", "--", "y"};
  const SplitCommandLine split = splitAtDoubleDash(8, argv, true);
  EXPECT_THAT(split.eal, ElementsAre("berthd", "-l", "0-1"));
  EXPECT_THAT(split.own, ElementsAre("berthd", "--config", "x.yaml", "--", "y"));
}

// berthd without "--" takes every argument as its own (the EAL's come from its config);
// berthgen, as testpmd, takes them all as the EAL's.
TEST(CommandLineTest, WithoutADoubleDashEverythingGoesOneWay) {
  const char* argv[] = {"prog", "--config", "x.yaml"};
  EXPECT_THAT(splitAtDoubleDash(3, argv, true).own, ElementsAre("prog", "--config", "x.yaml"));
  EXPECT_THAT(splitAtDoubleDash(3, argv, true).eal, ElementsAre("prog"));
  EXPECT_THAT(splitAtDoubleDash(3, argv, false).eal, ElementsAre("prog", "--config", "x.yaml"));
  EXPECT_THAT(splitAtDoubleDash(3, argv, false).own, ElementsAre("prog"));
}

TEST(CommandLineTest, ArgvPointsIntoTheStrings) {
  std::vector<std::string> arguments = {"a", "bc"};
  const std::vector<char*> argv = argvOf(arguments);
  ASSERT_EQ(argv.size(), 2u);
  EXPECT_EQ(argv[1], arguments[1].data());
}

}  // namespace
}  // namespace berth
