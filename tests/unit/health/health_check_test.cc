#include "berth/health/health_check.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

HealthCheckConfig settings(uint32_t rise, uint32_t fall) {
  HealthCheckConfig config;
  config.type = HealthCheckType::kTcp;
  config.interval_ms = 1000;
  config.timeout_ms = 300;
  config.rise = rise;
  config.fall = fall;
  return config;
}

// Runs one probe at `now` that succeeds or fails, with no jitter.
std::optional<HealthTransition> probe(HealthCheck& check, bool success, uint64_t now) {
  check.started(now);
  return check.finished(success, success ? "" : "connection refused", now + 1, 0.5);
}

TEST(HealthCheckTest, FallConsecutiveFailuresTurnAHealthyBackendUnhealthy) {
  HealthCheck check(settings(2, 3), Health::kHealthy, 0);
  EXPECT_FALSE(probe(check, false, 0).has_value());
  EXPECT_FALSE(probe(check, false, 1000).has_value());
  const std::optional<HealthTransition> change = probe(check, false, 2000);
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->from, Health::kHealthy);
  EXPECT_EQ(change->to, Health::kUnhealthy);
  EXPECT_EQ(change->reason, "3 probe(s) in a row failed, the last: connection refused");
  EXPECT_EQ(check.health(), Health::kUnhealthy);
  EXPECT_FALSE(probe(check, false, 3000).has_value()) << "no second change while down";
}

TEST(HealthCheckTest, RiseConsecutiveSuccessesBringItBack) {
  HealthCheck check(settings(2, 1), Health::kUnhealthy, 0);
  EXPECT_FALSE(probe(check, true, 0).has_value());
  const std::optional<HealthTransition> change = probe(check, true, 1000);
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->to, Health::kHealthy);
  EXPECT_EQ(change->reason, "2 probe(s) in a row succeeded");
}

// What `backends` shows: the reason for the state and since when (the start, then each change),
// and the last probe's result with its latency, whether or not it changed the state.
TEST(HealthCheckTest, KeepsTheReasonSinceWhenAndTheLastProbe) {
  HealthCheck check(settings(2, 2), Health::kHealthy, 500, 100);
  EXPECT_EQ(check.reason(), "healthy at start until probes say otherwise");
  EXPECT_EQ(check.sinceMs(), 100u);
  EXPECT_FALSE(check.lastProbe().has_value());
  check.started(1000);
  check.finished(false, "connect: Connection refused", 1007, 0.5);
  ASSERT_TRUE(check.lastProbe().has_value());
  EXPECT_FALSE(check.lastProbe()->success);
  EXPECT_EQ(check.lastProbe()->detail, "connect: Connection refused");
  EXPECT_EQ(check.lastProbe()->latency_ms, 7u);
  EXPECT_EQ(check.lastProbe()->at_ms, 1007u);
  EXPECT_EQ(check.sinceMs(), 100u) << "one failure of two changes nothing";
  ASSERT_TRUE(probe(check, false, 2000).has_value());
  EXPECT_EQ(check.reason(), "2 probe(s) in a row failed, the last: connection refused");
  EXPECT_EQ(check.sinceMs(), 2001u);
  EXPECT_EQ(check.lastProbe()->latency_ms, 1u);
  EXPECT_EQ(HealthCheck(settings(3, 2), Health::kUnhealthy, 0, 0).reason(),
            "new: unhealthy until 3 probe(s) in a row succeed");
}

// A check that starts unhealthy (a reload added it) has no verdict until `rise` successes or
// `fall` failures in a row; one that starts healthy has one from the start.
TEST(HealthCheckTest, ANewCheckSettlesOnARiseOrAFall) {
  EXPECT_TRUE(HealthCheck(settings(2, 2), Health::kHealthy, 0).settled());
  HealthCheck rising(settings(2, 2), Health::kUnhealthy, 0);
  EXPECT_FALSE(rising.settled());
  probe(rising, true, 0);
  EXPECT_FALSE(rising.settled());
  probe(rising, true, 1000);
  EXPECT_TRUE(rising.settled());
  HealthCheck failing(settings(2, 2), Health::kUnhealthy, 0);
  probe(failing, false, 0);
  probe(failing, true, 1000);
  probe(failing, false, 2000);
  EXPECT_FALSE(failing.settled());
  probe(failing, false, 3000);
  EXPECT_TRUE(failing.settled());
  EXPECT_EQ(failing.health(), Health::kUnhealthy);
}

TEST(HealthCheckTest, FlappingNeverCompletesARiseOrAFall) {
  HealthCheck up(settings(2, 2), Health::kHealthy, 0);
  HealthCheck down(settings(2, 2), Health::kUnhealthy, 0);
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_FALSE(probe(up, i % 2 == 0, i * 1000).has_value());
    EXPECT_FALSE(probe(down, i % 2 == 1, i * 1000).has_value());
  }
  EXPECT_EQ(up.health(), Health::kHealthy);
  EXPECT_EQ(down.health(), Health::kUnhealthy);
}

TEST(HealthCheckTest, ProbesAreScheduledAnIntervalApartWithinTheJitter) {
  HealthCheck check(settings(1, 1), Health::kHealthy, 500);
  EXPECT_FALSE(check.due(499));
  EXPECT_TRUE(check.due(500));
  check.started(500);
  EXPECT_FALSE(check.due(600)) << "not while a probe is in flight";
  EXPECT_TRUE(check.inFlight());
  EXPECT_EQ(check.deadlineMs(), 800u) << "the timeout counts from the probe's start";
  check.finished(true, "", 510, 0.0);
  EXPECT_EQ(check.nextProbeMs(), 510u + 900) << "jitter 0 moves it 10% early";
  check.started(1410);
  check.finished(true, "", 1410, 0.999999);
  EXPECT_EQ(check.nextProbeMs(), 1410u + 1100) << "jitter near 1 moves it 10% late";
}

TEST(HealthCheckTest, ATimedOutProbeIsAFailureLikeAnyOther) {
  HealthCheck check(settings(1, 1), Health::kHealthy, 0);
  check.started(0);
  // The prober reports the timeout once the deadline passes.
  ASSERT_GE(1000u, check.deadlineMs());
  const std::optional<HealthTransition> change =
      check.finished(false, "timed out after 300 ms", check.deadlineMs(), 0.5);
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->reason, "1 probe(s) in a row failed, the last: timed out after 300 ms");
}

// A probe that could not run (a local error) says nothing of the backend: it counts neither way,
// and only a check that goes without running probes for fall + 1 intervals and a timeout is
// stale.
TEST(HealthCheckTest, AProbeThatDidNotRunCountsNeitherWayAndLongSilenceIsStale) {
  HealthCheck check(settings(1, 2), Health::kHealthy, 0);
  EXPECT_FALSE(probe(check, false, 0).has_value());
  for (uint64_t now = 1000; now <= 6000; now += 1000) {
    check.started(now);
    check.notRun(now, 0.5);
    EXPECT_FALSE(check.inFlight());
    EXPECT_EQ(check.nextProbeMs(), now + 1000);
  }
  EXPECT_EQ(check.health(), Health::kHealthy) << "one real failure, then none that ran";
  // The last verdict was at 1 ms; fall + 1 intervals and the timeout make 3,300 ms.
  EXPECT_FALSE(check.stale(3301));
  EXPECT_TRUE(check.stale(3302));
  // A probe that runs again ends the staleness, and its failure counts with the earlier one.
  const std::optional<HealthTransition> change = probe(check, false, 7000);
  EXPECT_FALSE(check.stale(7001));
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->to, Health::kUnhealthy);
}

TEST(HealthCheckTest, AChecksThatRunsIsNeverStale) {
  HealthCheck check(settings(1, 1), Health::kHealthy, 0);
  // Probes an interval and 10% jitter apart, each taking its whole timeout.
  uint64_t now = 0;
  for (int i = 0; i < 20; ++i) {
    check.started(now);
    now += 300;
    EXPECT_FALSE(check.stale(now));
    check.finished(true, "", now, 0.999);
    now = check.nextProbeMs();
    EXPECT_FALSE(check.stale(now));
  }
}

}  // namespace
}  // namespace berth
