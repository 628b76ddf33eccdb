// The management loop's table of periodic jobs (control/periodic_jobs.h). Pinned:
// - every job runs on the first turn, then on the first turn at least its interval after its
//   previous run, never twice within one interval, in the order the jobs were added;
// - a turn that comes late runs a job once, not once per missed interval;
// - each job's runs and longest run are kept, as the clock given measures them.

#include "berth/control/periodic_jobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace berth {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(PeriodicJobsTest, EachJobRunsOncePerIntervalInTheOrderAdded) {
  PeriodicJobs jobs;
  std::vector<std::string> ran;
  jobs.add("fast", absl::Milliseconds(100), [&](absl::Time) { ran.push_back("fast"); });
  jobs.add("slow", absl::Seconds(1), [&](absl::Time) { ran.push_back("slow"); });
  const auto clock = [] { return kStart; };

  EXPECT_EQ(jobs.runDue(kStart, clock), 2u);
  EXPECT_EQ(ran, (std::vector<std::string>{"fast", "slow"}));
  ran.clear();
  // Within both intervals: nothing.
  EXPECT_EQ(jobs.runDue(kStart + absl::Milliseconds(99), clock), 0u);
  // Turns every 50 ms for a second: the fast job every other turn, the slow one once, at 1 s.
  for (int turn = 2; turn <= 20; ++turn) jobs.runDue(kStart + absl::Milliseconds(50 * turn), clock);
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "fast"), 10);
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "slow"), 1);
  EXPECT_EQ(ran.back(), "slow");
}

TEST(PeriodicJobsTest, ALateTurnRunsAJobOnceAndItsNextIntervalStartsThen) {
  PeriodicJobs jobs;
  std::vector<absl::Time> runs;
  jobs.add("links", absl::Milliseconds(100), [&](absl::Time now) { runs.push_back(now); });
  const auto clock = [] { return kStart; };
  jobs.runDue(kStart, clock);
  // The loop held for a second: one run, not ten.
  EXPECT_EQ(jobs.runDue(kStart + absl::Seconds(1), clock), 1u);
  EXPECT_EQ(jobs.runDue(kStart + absl::Milliseconds(1050), clock), 0u);
  EXPECT_EQ(jobs.runDue(kStart + absl::Milliseconds(1100), clock), 1u);
  EXPECT_EQ(runs, (std::vector<absl::Time>{kStart, kStart + absl::Seconds(1),
                                           kStart + absl::Milliseconds(1100)}));
}

TEST(PeriodicJobsTest, KeepsEachJobsRunsAndLongestRun) {
  PeriodicJobs jobs;
  absl::Time clock_now = kStart;
  absl::Duration next_cost = absl::Milliseconds(3);
  jobs.add("rates", absl::Seconds(1), [&](absl::Time) { clock_now += next_cost; });
  jobs.add("idle", absl::Seconds(1), [](absl::Time) {});
  const auto clock = [&] { return clock_now; };
  jobs.runDue(kStart, clock);
  next_cost = absl::Milliseconds(1);
  jobs.runDue(kStart + absl::Seconds(1), clock);
  const std::vector<PeriodicJobs::JobFigures> figures = jobs.figures();
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "rates");
  EXPECT_EQ(figures[0].interval, absl::Seconds(1));
  EXPECT_EQ(figures[0].runs, 2u);
  EXPECT_EQ(figures[0].longest, absl::Milliseconds(3));
  EXPECT_EQ(figures[1].runs, 2u);
  EXPECT_EQ(figures[1].longest, absl::ZeroDuration());
}

}  // namespace
}  // namespace berth
