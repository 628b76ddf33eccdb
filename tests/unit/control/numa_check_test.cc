// The NUMA placement check (control/numa_check.h) over made-up socket ids: a worker polling a
// port on another socket is named with both sockets; ports that do not say where they are, and
// workers that poll no queue of a port, are never a mismatch. The main-lcore check: a worker
// whose CPUs overlap the management lcore's is named with the CPUs.

#include "berth/control/numa_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(NumaCheckTest, NamesEachWorkerThatPollsAPortOnAnotherSocket) {
  const PortOnSocket ports[] = {{"uplink", 0, 4}, {"downlink", 1, 4}};
  const WorkerOnSocket workers[] = {{2, 0}, {3, 0}, {34, 1}, {35, 1}};
  const std::vector<std::string> lines = crossSocketPolling(ports, workers);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "port 'uplink' is on NUMA socket 0, but worker lcore 34, which polls its queue 2, is "
            "on socket 1; choose worker lcores on the port's socket");
  EXPECT_NE(lines[2].find("port 'downlink' is on NUMA socket 1, but worker lcore 2,"),
            std::string::npos);
}

TEST(NumaCheckTest, AllOnOneSocketIsFine) {
  const PortOnSocket ports[] = {{"p0", 1, 2}};
  const WorkerOnSocket workers[] = {{10, 1}, {11, 1}};
  EXPECT_TRUE(crossSocketPolling(ports, workers).empty());
}

TEST(NumaCheckTest, OnlyTheWorkersThatPollThePortCount) {
  // One queue pair (no RSS): only worker 0 polls it.
  const PortOnSocket ports[] = {{"p0", 0, 1}};
  const WorkerOnSocket workers[] = {{1, 0}, {40, 1}};
  EXPECT_TRUE(crossSocketPolling(ports, workers).empty());
}

TEST(NumaCheckTest, AnUnknownSocketIsNeverAMismatch) {
  const PortOnSocket vdev[] = {{"p0", -1, 2}};
  const WorkerOnSocket workers[] = {{1, 0}, {40, 1}};
  EXPECT_TRUE(crossSocketPolling(vdev, workers).empty());
  const PortOnSocket port[] = {{"p0", 0, 2}};
  const WorkerOnSocket unknown[] = {{1, -1}, {2, -1}};
  EXPECT_TRUE(crossSocketPolling(port, unknown).empty());
}

TEST(MainCpuCheckTest, AWorkerOnTheMainLcoresCpuIsNamedWithTheCpu) {
  // --lcores 0@0,1@0,2@1: worker 1 shares CPU 0, worker 2 has CPU 1 to itself.
  const LcoreCpus main{0, {0}};
  const LcoreCpus workers[] = {{1, {0}}, {2, {1}}};
  const std::vector<std::string> lines = workersOnMainCpus(main, workers);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              ::testing::StartsWith("worker lcore 1 shares CPU 0 with the management lcore 0"));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("docs/nics.md"));
}

TEST(MainCpuCheckTest, CpuSetsThatOverlapInPartCount) {
  // --lcores '0@(0-1),1@1': the main lcore may run on CPU 1, where the worker is.
  const LcoreCpus main{0, {0, 1}};
  const LcoreCpus workers[] = {{1, {1, 2}}};
  const std::vector<std::string> lines = workersOnMainCpus(main, workers);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::StartsWith("worker lcore 1 shares CPU 1 with"));
}

TEST(MainCpuCheckTest, SeparateCpusAreFine) {
  const LcoreCpus main{0, {0}};
  const LcoreCpus workers[] = {{1, {1}}, {2, {2}}};
  EXPECT_TRUE(workersOnMainCpus(main, workers).empty());
}

}  // namespace
}  // namespace berth
