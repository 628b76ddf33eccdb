#include "berth/control/descriptor_budget.h"

#include <sys/resource.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "berth/api/control_socket.h"
#include "berth/api/metrics_server.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(DescriptorBudgetTest, CountsEndpointsChecksAndTheReserve) {
  EXPECT_EQ(descriptorsNeeded(3000), 3000u + 2 * ControlSocket::kMaxClients +
                                         MetricsServer::kMaxClients + kDescriptorReserve);
}

// What the budget pins: a soft limit below the need is raised, and a hard limit below it is a
// refusal that names the limit, not a prober that later runs out of descriptors.
TEST(DescriptorBudgetTest, RaisesTheSoftLimitOrNamesTheHardOne) {
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  rlimit lowered = original;
  lowered.rlim_cur = 300;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  EXPECT_TRUE(raiseDescriptorLimit(500, 10).ok());
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, 500u);
  if (original.rlim_max != RLIM_INFINITY) {
    const absl::Status refused = raiseDescriptorLimit(original.rlim_max + 1, 10);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(refused.message(), HasSubstr("hard limit on open files (RLIMIT_NOFILE) is"));
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
}

}  // namespace
}  // namespace berth
