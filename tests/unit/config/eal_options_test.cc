// The EAL arguments checked before rte_eal_init (config/eal_options.h): unknown options with a
// suggestion, options missing a value, pairs the EAL refuses, and the causes named when it
// fails anyway.

#include "berth/config/eal_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> problems(std::vector<std::string> args) {
  return ealArgumentProblems(args);
}

TEST(EalArgumentsTest, WhatTheShippedConfigsGivePasses) {
  EXPECT_THAT(problems({"--no-huge", "-m", "512", "--no-pci", "--file-prefix", "berth-demo",
                        "--lcores", "0@0,1@1", "--log-level", "lib.eal:error"}),
              IsEmpty());
  EXPECT_THAT(problems({"--in-memory", "-l", "20-28", "-a", "0000:3b:00.0", "--vdev=net_null0",
                        "--huge-unlink", "--syslog=daemon", "-v"}),
              IsEmpty());
  // getopt_long takes a prefix that names one option alone.
  EXPECT_THAT(problems({"--in-mem"}), IsEmpty());
}

TEST(EalArgumentsTest, ATypoIsNamedWithTheOptionMeant) {
  EXPECT_THAT(problems({"--in-memroy", "--no-pci"}),
              ElementsAre(HasSubstr("'--in-memroy' is not an EAL option; did you mean "
                                    "'--in-memory'?")));
  EXPECT_THAT(problems({"--frobnicate"}), ElementsAre(HasSubstr("not an EAL option (DPDK")));
  EXPECT_THAT(problems({"-x"}), ElementsAre("'-x' is not an EAL option"));
}

TEST(EalArgumentsTest, ValuesAreWhereTheOptionsNeedThem) {
  EXPECT_THAT(problems({"--file-prefix"}), ElementsAre("'--file-prefix' needs a value"));
  EXPECT_THAT(problems({"-m"}), ElementsAre("'-m' needs a value"));
  EXPECT_THAT(problems({"--no-pci=yes"}), ElementsAre("'--no-pci' takes no value"));
  EXPECT_THAT(problems({"512"}), ElementsAre(HasSubstr("'512' is no EAL option")));
}

TEST(EalArgumentsTest, PairsTheEalRefusesTogetherAreNamed) {
  // What the command line's --no-huge makes of a config's --in-memory.
  EXPECT_THAT(problems({"--no-huge", "-m", "256", "--in-memory"}),
              ElementsAre(HasSubstr("'--no-huge' and '--in-memory' together")));
  EXPECT_THAT(problems({"--no-huge", "--socket-mem", "512"}),
              ElementsAre(HasSubstr("'--socket-mem' needs hugepages")));
  EXPECT_THAT(problems({"-m", "512", "--socket-mem=512"}),
              ElementsAre(HasSubstr("'-m' and '--socket-mem' together")));
}

TEST(EalFailureTest, NoHugepagesIsNamedWithBothWaysOut) {
  EalFailure failure{.error = EACCES, .args = {"berthd", "--in-memory"}};
  EXPECT_THAT(ealFailureAdvice(failure),
              ElementsAre(AllOf(HasSubstr("no hugepages are reserved"), HasSubstr("nr_hugepages"),
                                HasSubstr("--no-huge -m 512"))));
  failure.args = {"berthd", "--no-huge", "-m", "512"};
  EXPECT_THAT(ealFailureAdvice(failure), IsEmpty()) << "without hugepages, none are missing";
}

TEST(EalFailureTest, AnUnmountedHugetlbfsMattersOnlyWithoutInMemory) {
  EalFailure failure{.error = EACCES, .args = {"berthd", "--file-prefix", "x"}};
  failure.hugepages_reserved = 1024;
  EXPECT_THAT(ealFailureAdvice(failure), ElementsAre(HasSubstr("no hugetlbfs is mounted")));
  failure.args.push_back("--in-memory");
  EXPECT_THAT(ealFailureAdvice(failure), IsEmpty());
}

TEST(EalFailureTest, ANonRootUserAndAHeldFilePrefixAreNamed) {
  // The EAL leaves rte_errno at 0 when the prefix's lock is taken.
  EalFailure failure{.error = 0,
                     .args = {"berthd", "--no-huge", "--file-prefix", "lb"},
                     .euid = 1000,
                     .file_prefix_held = true};
  EXPECT_THAT(ealFailureAdvice(failure),
              ElementsAre(HasSubstr("berthd runs as uid 1000"),
                          HasSubstr("another DPDK process holds the file prefix 'lb'")));
}

TEST(EalFailureTest, TheFilePrefixIsTheEalsDefaultUnlessGivenAndNoneInMemory) {
  EXPECT_EQ(ealFilePrefix(std::vector<std::string>{"berthd", "--no-huge"}), "rte");
  EXPECT_EQ(ealFilePrefix(std::vector<std::string>{"--file-prefix", "lb"}), "lb");
  EXPECT_EQ(ealFilePrefix(std::vector<std::string>{"--file-prefix=lb2"}), "lb2");
  EXPECT_EQ(ealFilePrefix(std::vector<std::string>{"--in-memory", "--file-prefix", "x"}), "");
}

}  // namespace
}  // namespace berth
