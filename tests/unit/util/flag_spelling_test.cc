// One flag style for the absl programs (util/flag_spelling.h). Pinned: hyphens are respelled to
// absl's underscores silently; the old underscore spellings and absl's --noX still work, with a
// note each; a negated boolean is --no-X; a value that follows its flag is never read as a flag;
// an unknown flag is refused with the nearest name; nothing after "--" is touched.

#include "berth/util/flag_spelling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<KnownFlag> kKnown = {
    {"control_socket", false}, {"max_failures", false}, {"timing", true}, {"json", true},
    {"config", false},
};

RespelledFlags respell(std::vector<std::string> arguments) {
  absl::StatusOr<RespelledFlags> respelled = respellFlags(std::move(arguments), kKnown);
  EXPECT_TRUE(respelled.ok()) << respelled.status();
  return respelled.ok() ? *respelled : RespelledFlags();
}

TEST(FlagSpellingTest, HyphensAreTheSpellingAndNeedNoNote) {
  const RespelledFlags flags =
      respell({"berthd", "--control-socket", "/run/x.sock", "--max-failures=3", "--json"});
  EXPECT_THAT(flags.arguments, ElementsAre("berthd", "--control_socket", "/run/x.sock",
                                           "--max_failures=3", "--json"));
  EXPECT_TRUE(flags.notes.empty());
}

TEST(FlagSpellingTest, OldSpellingsStillWorkWithANote) {
  const RespelledFlags flags = respell({"berthctl", "--max_failures", "3", "--notiming"});
  EXPECT_THAT(flags.arguments, ElementsAre("berthctl", "--max_failures", "3", "--notiming"));
  EXPECT_THAT(flags.notes,
              ElementsAre("--max_failures is now spelled --max-failures; the old spelling will "
                          "go in a later release",
                          "--notiming is now spelled --no-timing; the old spelling will go in a "
                          "later release"));
}

TEST(FlagSpellingTest, ANegatedBooleanIsNoHyphenAndOnlyForBooleans) {
  EXPECT_THAT(respell({"berthctl", "--no-timing"}).arguments,
              ElementsAre("berthctl", "--notiming"));
  EXPECT_FALSE(respellFlags({"berthctl", "--no-config"}, kKnown).ok());
}

TEST(FlagSpellingTest, AValueThatLooksLikeAFlagIsTheFlagsValue) {
  EXPECT_THAT(
      respell({"berthctl", "--max-failures", "-1", "--config", "--odd-name.yaml"}).arguments,
      ElementsAre("berthctl", "--max_failures", "-1", "--config", "--odd-name.yaml"));
}

TEST(FlagSpellingTest, AnUnknownFlagIsRefusedWithTheNearest) {
  absl::StatusOr<RespelledFlags> typo = respellFlags({"berthd", "--control-sockt", "x"}, kKnown);
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "unknown flag --control-sockt; did you mean --control-socket?");
  absl::StatusOr<RespelledFlags> far = respellFlags({"berthd", "--frobnicate"}, kKnown);
  ASSERT_FALSE(far.ok());
  EXPECT_THAT(far.status().message(), HasSubstr("--help lists the flags"));
}

TEST(FlagSpellingTest, PositionalWordsAndEverythingAfterADoubleDashAreLeftAlone) {
  EXPECT_THAT(respell({"berthctl", "drain", "web-1", "--", "--whatever_else"}).arguments,
              ElementsAre("berthctl", "drain", "web-1", "--", "--whatever_else"));
  EXPECT_EQ(flagSpelling("read_only_group"), "read-only-group");
}

}  // namespace
}  // namespace berth
