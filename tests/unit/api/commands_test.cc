#include "berth/api/commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(CommandsTest, NamesAreUniqueAndFound) {
  absl::flat_hash_set<absl::string_view> names;
  for (const CommandSpec& command : controlCommands()) {
    EXPECT_TRUE(names.insert(command.name).second) << command.name;
    EXPECT_EQ(findControlCommand(command.name), &command);
    EXPECT_FALSE(command.help.empty()) << command.name;
  }
  EXPECT_EQ(findControlCommand("frobnicate"), nullptr);
  EXPECT_EQ(controlCommandNames(),
            "status, stats, services, backends, reload, drain, undrain, explain, table, neighbors, "
            "announce");
}

TEST(CommandsTest, SynopsisShowsWordsFlagsAndWhatIsOptional) {
  EXPECT_EQ(findControlCommand("drain")->synopsis(), "drain NAME [--service S]");
  EXPECT_EQ(findControlCommand("explain")->synopsis(),
            "explain --src IP:PORT --dst VIP:PORT [--proto tcp|udp]");
  EXPECT_EQ(findControlCommand("status")->synopsis(), "status");
}

// berthctl's usage is built from the table: every command, its help within the usage's width.
TEST(CommandsTest, UsageListsEveryCommandWithinTheWidth) {
  const std::string usage = controlCommandsUsage();
  for (const CommandSpec& command : controlCommands()) {
    EXPECT_THAT(usage, HasSubstr("  " + command.synopsis() + "\n"));
  }
  for (absl::string_view line : absl::StrSplit(usage, '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
}

TEST(CommandsTest, RequiredArgumentsAreNamedTogether) {
  const CommandSpec& explain = *findControlCommand("explain");
  EXPECT_TRUE(checkCommandFields(explain, {{"src", "1.2.3.4:5"}, {"dst", "198.18.100.1:80"}}).ok());
  const absl::Status missing = checkCommandFields(explain, {{"src", "1.2.3.4:5"}, {"dst", ""}});
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(),
            "explain needs --src IP:PORT and --dst VIP:PORT: berthctl explain --src IP:PORT "
            "--dst VIP:PORT [--proto tcp|udp]");
  EXPECT_EQ(checkCommandFields(*findControlCommand("drain"), {{"service", "web"}}).message(),
            "drain needs NAME: berthctl drain NAME [--service S]");
}

TEST(CommandsTest, AFieldTheCommandDoesNotTakeIsRefused) {
  EXPECT_EQ(checkCommandFields(*findControlCommand("status"), {{"service", "web"}}).message(),
            "status takes no arguments, not 'service'");
  EXPECT_THAT(checkCommandFields(*findControlCommand("table"), {{"service", "web"}, {"slot", "3"}})
                  .message(),
              HasSubstr("table takes no 'slot'"));
  // An empty value is no value: berthctl leaves unset flags out, other clients may not.
  EXPECT_TRUE(checkCommandFields(*findControlCommand("status"), {{"service", ""}}).ok());
}

}  // namespace
}  // namespace berth
