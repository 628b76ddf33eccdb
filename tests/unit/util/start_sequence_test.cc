#include "berth/util/start_sequence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace berth {
namespace {

using ::testing::ElementsAre;

class StartSequenceTest : public ::testing::Test {
 protected:
  StartStep step(const std::string& name, bool fails = false) {
    return {name,
            [this, name, fails] {
              log_.push_back("start " + name);
              return fails ? absl::UnavailableError("no such device") : absl::OkStatus();
            },
            [this, name] { log_.push_back("stop " + name); }};
  }
  std::vector<std::string> log_;
};

TEST_F(StartSequenceTest, StartsInOrderAndStopsInReverseOnce) {
  {
    StartSequence sequence({step("eal"), step("ports"), step("workers")});
    ASSERT_TRUE(sequence.start().ok());
    sequence.stop();
  }
  EXPECT_THAT(log_, ElementsAre("start eal", "start ports", "start workers", "stop workers",
                                "stop ports", "stop eal"));
}

// A failed start names its step, and what started before it (the failed step included, whose
// stop cleans up a half-done start) is stopped in reverse; later steps never start.
TEST_F(StartSequenceTest, AFailureNamesItsStepAndUnwinds) {
  StartSequence sequence({step("eal"), step("ports", true), step("workers")});
  const absl::Status status = sequence.start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "ports: no such device");
  EXPECT_THAT(log_, ElementsAre("start eal", "start ports", "stop ports", "stop eal"));
  sequence.stop();
  EXPECT_EQ(log_.size(), 4u);
}

TEST_F(StartSequenceTest, TheDestructorStopsWhatStarted) {
  {
    StartSequence sequence({step("a"), {"b", [] { return absl::OkStatus(); }, nullptr}});
    ASSERT_TRUE(sequence.start().ok());
  }
  EXPECT_THAT(log_, ElementsAre("start a", "stop a"));
}

}  // namespace
}  // namespace berth
