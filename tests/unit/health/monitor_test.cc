#include "berth/health/monitor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "support/loopback.h"

namespace berth {
namespace {

uint64_t steadyMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Two services whose backends a and c share one check target (the listener), and a backend b
// whose target nobody listens on. Probes every 50 ms; two failures make a backend unhealthy.
std::string configFor(uint16_t listening, uint16_t closed) {
  return absl::StrCat(R"(
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: tcp, interval: 0.05, timeout: 0.05, rise: 1, fall: 2, address: 127.0.0.1 }
    backends:
      - { name: a, address: 198.18.1.2, health: { port: )",
                      listening, R"( } }
      - { name: b, address: 198.18.2.2, health: { port: )",
                      closed, R"( } }
  - name: api
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    health: { type: tcp, interval: 0.05, timeout: 0.05, rise: 1, fall: 2, address: 127.0.0.1 }
    backends:
      - { name: c, address: 198.18.3.2, health: { port: )",
                      listening, R"( } }
      - { name: d, address: 198.18.4.2, health: { type: none } }
)");
}

TEST(HealthMonitorTest, SharedTargetsAreProbedOnceAndFailuresTurnBackendsUnhealthy) {
  auto listener = std::make_unique<Listener>(nullptr);
  const uint16_t closed = closedPort();
  const Config config = *parseConfig(configFor(listener->port(), closed), "test.yaml");
  std::unique_ptr<HealthMonitor> monitor =
      *HealthMonitor::create(config, steadyMs, [] { return 0.5; });
  EXPECT_EQ(monitor->checkCount(), 2u) << "a and c share one; b has its own; d has none";
  EXPECT_EQ(monitor->healthy(0), (std::vector<bool>{true, true})) << "everyone starts healthy";

  std::vector<BackendHealthChange> changes;
  const uint64_t deadline = steadyMs() + 5'000;
  while (changes.empty() && steadyMs() < deadline) {
    for (BackendHealthChange& change : monitor->poll(10)) changes.push_back(change);
  }
  ASSERT_EQ(changes.size(), 1u) << changes[1].target << ": " << changes[1].transition.reason;
  EXPECT_EQ((std::pair{changes[0].service, changes[0].backend}), (std::pair<size_t, size_t>{0, 1}));
  EXPECT_EQ(changes[0].transition.to, Health::kUnhealthy);
  EXPECT_EQ(changes[0].transition.reason,
            "2 probe(s) in a row failed, the last: connect: Connection refused");
  EXPECT_EQ(changes[0].target, absl::StrCat("tcp 127.0.0.1:", closed));
  EXPECT_EQ(monitor->healthy(0), (std::vector<bool>{true, false}));
  // Each backend's detail: the reason and the last probe for the checked, a note for d.
  const BackendHealthDetail b = monitor->detail(0, 1, monitor->now());
  EXPECT_EQ(b.reason, changes[0].transition.reason);
  ASSERT_TRUE(b.last_probe.has_value());
  EXPECT_FALSE(b.last_probe->success);
  EXPECT_EQ(b.last_probe->detail, "connect: Connection refused");
  EXPECT_LT(b.since_s, 5.0);
  const BackendHealthDetail a = monitor->detail(0, 0, monitor->now());
  EXPECT_EQ(a.reason, "healthy at start until probes say otherwise");
  ASSERT_TRUE(a.last_probe.has_value());
  EXPECT_TRUE(a.last_probe->success);
  EXPECT_EQ(a.last_probe->detail, "connected");
  const BackendHealthDetail d = monitor->detail(1, 1, monitor->now());
  EXPECT_EQ(d.reason, "no health check (type: none): always healthy");
  EXPECT_FALSE(d.last_probe.has_value());

  // The shared target goes away: both of its backends fall, in both services, together.
  listener.reset();
  changes.clear();
  const uint64_t second_deadline = steadyMs() + 5'000;
  while (changes.size() < 2 && steadyMs() < second_deadline) {
    for (BackendHealthChange& change : monitor->poll(10)) changes.push_back(change);
  }
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(monitor->healthy(0), (std::vector<bool>{false, false}));
  EXPECT_EQ(monitor->healthy(1), (std::vector<bool>{false, true})) << "d is never checked";
}

TEST(HealthMonitorTest, AReloadKeepsTheStateOfUnchangedChecksAndStartsNewOnesUnhealthy) {
  Listener listener(nullptr);
  const uint16_t closed = closedPort();
  const Config before = *parseConfig(configFor(listener.port(), closed), "test.yaml");
  std::unique_ptr<HealthMonitor> first =
      *HealthMonitor::create(before, steadyMs, [] { return 0.5; });
  const uint64_t deadline = steadyMs() + 5'000;
  while (first->healthy(0)[1] && steadyMs() < deadline) first->poll(10);
  ASSERT_FALSE(first->healthy(0)[1]);

  // The reload adds backend e, whose check (on its own port) is new.
  Listener other(nullptr);
  std::string yaml = configFor(listener.port(), closed);
  yaml += absl::StrCat(
      "      - { name: e, address: 198.18.5.2, health: { type: tcp, interval: 0.05, "
      "timeout: 0.05, rise: 2, fall: 2, address: 127.0.0.1, port: ",
      other.port(), " } }\n");
  const Config after = *parseConfig(yaml, "test.yaml");
  std::unique_ptr<HealthMonitor> second = *HealthMonitor::create(
      after, steadyMs, [] { return 0.5; }, first.get());
  EXPECT_EQ(second->healthy(0), (std::vector<bool>{true, false})) << "carried over, no flap";
  EXPECT_EQ(second->healthy(1), (std::vector<bool>{true, true, false})) << "e starts unhealthy";
  std::vector<BackendHealthChange> changes;
  const uint64_t rise_deadline = steadyMs() + 5'000;
  while (changes.empty() && steadyMs() < rise_deadline) {
    for (BackendHealthChange& change : second->poll(10)) changes.push_back(change);
  }
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ((std::pair{changes[0].service, changes[0].backend}), (std::pair<size_t, size_t>{1, 2}));
  EXPECT_EQ(changes[0].transition.reason, "2 probe(s) in a row succeeded");
}

}  // namespace
}  // namespace berth
