#include "berth/control/reports.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

ServiceConfig webService() {
  ServiceConfig config;
  config.name = "web";
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 1009;
  for (int i = 1; i <= 2; ++i) {
    BackendConfig backend;
    backend.name = "web-" + std::to_string(i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i));
    backend.weight = 2;
    config.backends.push_back(backend);
  }
  return config;
}

class ReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ServiceState> state = ServiceState::create(webService(), {true, true});
    ASSERT_TRUE(state.ok()) << state.status();
    services_.push_back(*std::move(state));
    ASSERT_TRUE(ids_.service("web").ok());
    ASSERT_TRUE(ids_.backend("web", "web-1").ok());
    ASSERT_TRUE(ids_.backend("web", "web-2").ok());
  }

  // Every counter id's traffic is made from its id, so a row shows whose it got.
  TrafficSource traffic_ = [](uint32_t id, bool backend) {
    return TrafficTotals{100 + id + (backend ? 10 : 0), 1000 + id, id};
  };
  std::vector<ServiceState> services_;
  CounterIds ids_;
};

TEST_F(ReportsTest, RowsCarryStateAndTraffic) {
  ASSERT_TRUE(services_[0].setDrained("web-2", true).ok());
  ASSERT_TRUE(services_[0].setHealth({false, true}).ok());
  const std::vector<ServiceRow> rows = serviceRows(services_, ids_, traffic_);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].listener, "tcp 198.18.100.1:80");
  EXPECT_EQ(rows[0].healthy, 1u);
  EXPECT_EQ(rows[0].traffic.packets, 100u);
  const std::vector<BackendRow> backends = backendRows(services_, ids_, traffic_);
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_FALSE(backends[0].healthy);
  EXPECT_EQ(backends[0].slots, 0u);
  EXPECT_EQ(backends[0].traffic.packets, 110u);
  EXPECT_TRUE(backends[1].drained);
  // The configured weight, kept for the undrain, and none in use; nor for the unhealthy one.
  EXPECT_EQ(backends[1].weight, 2);
  EXPECT_EQ(backends[1].effective_weight, 0);
  EXPECT_EQ(backends[0].weight, 2);
  EXPECT_EQ(backends[0].effective_weight, 0);
  EXPECT_EQ(backends[1].slots, 0u);
  EXPECT_EQ(backends[1].traffic.packets, 111u);
}

// The JSON and the text table come from one list of columns: same rows, same order.
TEST_F(ReportsTest, ServicesReplyHasJsonAndTheTextTable) {
  const std::string reply = servicesReplyJson(serviceRows(services_, ids_, traffic_), 7);
  EXPECT_THAT(reply, StartsWith(R"({"ok":true,"conntrack_entries":7,"services":[{"name":"web",)"
                                R"("listener":"tcp 198.18.100.1:80","forwarding":"ipip",)"
                                R"("algorithm":"maglev","backends":2,"healthy":2,"packets":100,)"
                                R"("bytes":1000,"connections":0,"connections_opened":0,)"
                                R"("packets_per_s":null,"bits_per_s":null,)"
                                R"("new_connections_per_s":null}],"text":")"));
  // The text shows what happens now: rates, "-" until the meter has two samples.
  EXPECT_THAT(reply,
              HasSubstr("service          listener                     mode   algorithm "
                        "  backends healthy     conns    packets/s         bits/s new conns/s\\n"
                        "web              tcp 198.18.100.1:80          ipip   maglev             2 "
                        "      2         0            -              -           -\\n"));
  const std::string with_rates =
      servicesReplyJson(serviceRows(services_, ids_, traffic_,
                                    [](uint32_t, bool) {
                                      return TrafficRate{1.5e6, 12e9, 2500};
                                    }),
                        7);
  EXPECT_THAT(with_rates, HasSubstr(R"("packets_per_s":1500000,"bits_per_s":1.2e+10,)"
                                    R"("new_connections_per_s":2500})"));
  EXPECT_THAT(with_rates, HasSubstr("    1.50 Mpps   12.00 Gbit/s      2500.0\\n"));
  EXPECT_THAT(reply, HasSubstr("connections tracked: 7\\n"));
}

// The text shows "drained" in the health column, and marks a stale check's verdict and the fleet's
// dissenting instances; the JSON keeps each fact apart.
TEST_F(ReportsTest, BackendsReplyShowsDrainsAndStaleChecksInTextAndEachInJson) {
  ASSERT_TRUE(services_[0].setDrained("web-2", true).ok());
  std::vector<BackendRow> rows = backendRows(services_, ids_, traffic_);
  rows[0].check_stale = true;
  const std::string reply = backendsReplyJson(rows, 0);
  EXPECT_THAT(reply, HasSubstr(R"("name":"web-2","address":"198.18.1.2","weight":2,)"
                               R"("effective_weight":0,"drained":true,"health":"healthy",)"
                               R"("health_check":"none","check_stale":false,)"));
  EXPECT_THAT(reply, HasSubstr(R"("fleet_dissent":"","slots":0,)"));
  EXPECT_THAT(reply, HasSubstr(R"("name":"web-1","address":"198.18.1.1","weight":2,)"
                               R"("effective_weight":2,"drained":false,"health":"healthy",)"
                               R"("health_check":"none","check_stale":true,)"));
  EXPECT_THAT(reply, HasSubstr("web              web-1            198.18.1.1                 2 "
                               "     2 healthy (stale)        0s    1009"));
  // In a fleet, the instances whose probes disagree with the fleet's verdict.
  rows[0].fleet_dissent = {"lb-2"};
  EXPECT_THAT(backendsReplyJson(rows, 0),
              HasSubstr(R"("last_check_s_ago":null,"fleet_dissent":"lb-2",)"));
  EXPECT_THAT(backendsReplyJson(rows, 0), HasSubstr("healthy (stale) (lb-2 disagree)"));
  EXPECT_THAT(reply, HasSubstr("web              web-2            198.18.1.2                 2 "
                               "     0 drained                0s       0"));
}

// Each backend's health says why and for how long, with its check's last probe; one out of
// service is named under the table with its reason, which before was only in the log.
TEST_F(ReportsTest, BackendsReplyGivesEachVerdictsReasonAgeAndLastProbe) {
  std::vector<BackendRow> rows = backendRows(services_, ids_, traffic_);
  rows[0].health_check = "tcp";
  rows[0].healthy = false;
  rows[0].health_reason = "3 probe(s) in a row failed, the last: connect: Connection refused";
  rows[0].health_since_s = 245;
  rows[0].last_check = BackendRow::LastCheck{false, "connect: Connection refused", 1, 2.5};
  rows[1].health_check = "http";
  rows[1].health_reason = "healthy at start until probes say otherwise";
  rows[1].health_since_s = 3 * 3600 + 7 * 60;
  const std::string reply = backendsReplyJson(rows, 0);
  EXPECT_THAT(reply, HasSubstr(R"("health_reason":"3 probe(s) in a row failed, the last: )"
                               R"(connect: Connection refused","health_since_s":245,)"
                               R"("last_check_ok":false,"last_check_detail":"connect: )"
                               R"(Connection refused","last_check_latency_ms":1,)"
                               R"("last_check_s_ago":2.5,)"));
  EXPECT_THAT(reply, HasSubstr(R"("last_check_ok":null,)"));
  EXPECT_THAT(reply, HasSubstr("unhealthy           4m05s     505"));
  EXPECT_THAT(reply, HasSubstr("FAILED connect: Connection refused, 1 ms, 2s ago\\n"));
  EXPECT_THAT(reply, HasSubstr("healthy             3h07m     504"));
  EXPECT_THAT(reply, HasSubstr("not yet\\n"));
  EXPECT_THAT(reply, HasSubstr("\\nweb/web-1 unhealthy for 4m05s: 3 probe(s) in a row failed, "
                               "the last: connect: Connection refused\\n"));
  EXPECT_THAT(reply, Not(HasSubstr("web/web-2 healthy for")));
}

TEST(ShortDurationTest, SecondsMinutesHoursDays) {
  EXPECT_EQ(shortDuration(-1), "0s");
  EXPECT_EQ(shortDuration(59.9), "59s");
  EXPECT_EQ(shortDuration(60), "1m00s");
  EXPECT_EQ(shortDuration(3599), "59m59s");
  EXPECT_EQ(shortDuration(3600 * 5 + 60), "5h01m");
  EXPECT_EQ(shortDuration(86400 * 2 + 3600 * 4), "2d04h");
}

// `stats`: the counters grouped with units, zeros left out and counted, one receive rate only
// (the rates line), and with `all` every counter, the window's average and each backend.
TEST(StatsTextTest, GroupsNonZeroCountersWithUnitsAndAllShowsEveryOne) {
  CountersReport report;
  report.elapsed_s = 3725;
  report.generation = 4;
  report.rx_window_s = 2;
  report.sums = {{"rx_packets", 1234567},
                 {"rx_bytes", 98765432},
                 {"tx_packets", 1234000},
                 {"tx_bytes", 98700000},
                 {"idle_sleep_us", 2500000},
                 {"parse_truncated", 3},
                 {"drop_no_service", 10000},
                 {"drop_tx_ring_full", 2345},
                 {"drop_no_backend", 0},
                 {"conntrack_hits", 0},
                 {"sync_sent", 0}};
  report.workers = {{600000, 590000}, {634567, 644000}};
  report.services = {{"web", {1000, 64000, 12, 30}}, {"idle", {}}};
  report.backends = {{"web/web-1", {1000, 64000, 12, 30}}};
  const std::string text = statsText(report, false);
  EXPECT_THAT(text, StartsWith("berthd up 1h02m, 2 worker(s), snapshot 4\n"
                               "traffic: rx 1,234,567 packets (98.77 MB), tx 1,234,000 packets "
                               "(98.70 MB)\n"));
  EXPECT_THAT(text, HasSubstr("drops: 12,345 frames\n  no_service"));
  EXPECT_THAT(text, HasSubstr("10,000\n  tx_ring_full"));
  EXPECT_THAT(text, HasSubstr("malformed frames: 3 frames\n  truncated"));
  EXPECT_THAT(text, HasSubstr("idle workers:\n  sleep_us"));
  EXPECT_THAT(text, HasSubstr("2.500 s\n"));
  EXPECT_THAT(text, Not(HasSubstr("no_backend")));
  EXPECT_THAT(text, Not(HasSubstr("connection table")));
  EXPECT_THAT(text, Not(HasSubstr("average rx")));
  EXPECT_THAT(text, HasSubstr("services:\n  web"));
  EXPECT_THAT(text, Not(HasSubstr("idle   ")));
  EXPECT_THAT(text, Not(HasSubstr("web/web-1")));
  EXPECT_THAT(text, HasSubstr("(3 counters at zero not shown; `berthctl stats --all`"));
  const std::string all = statsText(report, true);
  EXPECT_THAT(all, HasSubstr("no_backend"));
  EXPECT_THAT(all, HasSubstr("connection table:\n  hits"));
  EXPECT_THAT(all, HasSubstr("flow sync:\n  sent"));
  EXPECT_THAT(all, HasSubstr("average rx from the first frame to the last: 617.28 kpps over "
                             "2.000 s\n"));
  EXPECT_THAT(all, HasSubstr("backends:\n  web/web-1"));
  EXPECT_THAT(all, Not(HasSubstr("not shown")));
}

TEST(StatsTextTest, NumbersAndUnits) {
  EXPECT_EQ(withThousands(0), "0");
  EXPECT_EQ(withThousands(999), "999");
  EXPECT_EQ(withThousands(1000), "1,000");
  EXPECT_EQ(withThousands(1234567890), "1,234,567,890");
  EXPECT_EQ(siUnits(999, "pps"), "999 pps");
  EXPECT_EQ(siUnits(1500, "pps"), "1.50 kpps");
  EXPECT_EQ(siUnits(100e9, "bit/s"), "100.00 Gbit/s");
}

TEST_F(ReportsTest, CountersTextAndJsonFromOneReport) {
  CountersReport report;
  report.elapsed_s = 2.5;
  report.generation = 3;
  report.rx_window_s = 0.5;
  report.sums = {{"rx_packets", 1000}, {"tx_packets", 990}};
  report.workers = {{600, 590}, {400, 400}};
  report.services = {{"web", {1000, 64000, 12}}};
  report.backends = {{"web/web-1", {1000, 64000, 12}}};
  const std::string text = countersText(report);
  EXPECT_THAT(text, StartsWith("berthd counters after 2.500 s (2 workers, snapshot 3)\n"));
  EXPECT_THAT(text, HasSubstr("rx_pps"));
  EXPECT_THAT(text, HasSubstr("2000 (1000 packets in 0.500000 s from first to last)"));
  EXPECT_THAT(text, HasSubstr("worker 1"));
  EXPECT_THAT(text, HasSubstr("backend web/web-1"));
  const std::string json = countersJson(report);
  EXPECT_THAT(json, HasSubstr(R"("workers":2,"rx_window_s":0.5,"rx_pps":2000)"));
  EXPECT_THAT(json, HasSubstr(R"("counters":{"rx_packets":1000,"tx_packets":990})"));
  EXPECT_THAT(json,
              HasSubstr(R"("services":{"web":{"packets":1000,"bytes":64000,"connections":12}})"));
}

// A resolved next hop shows its MAC and age; an unresolved one has null for both in JSON and
// "-" in text, and the reply has no connections line.
TEST(NeighborsReplyTest, RowsInJsonAndTheTextTable) {
  NeighborRow resolved;
  resolved.port = 0;
  resolved.address = IpAddress::v4(198, 18, 0, 254);
  resolved.mac = *MacAddress::parse("02:00:00:00:00:fe");
  resolved.state = NeighborState::kReachable;
  resolved.age = absl::Milliseconds(2500);
  resolved.changes = 1;
  resolved.refused = 1004;
  NeighborRow unresolved;
  unresolved.port = 1;
  unresolved.address = IpAddress::v4(198, 18, 0, 21);
  unresolved.unanswered = 3;
  const std::string reply = neighborsReplyJson({resolved, unresolved}, {"uplink", "lan"});
  EXPECT_THAT(reply, StartsWith(R"({"ok":true,"neighbors":[{"port":"uplink",)"
                                R"("address":"198.18.0.254","mac":"02:00:00:00:00:fe",)"
                                R"("state":"reachable","age_s":2.5,"unanswered":0,"changes":1,)"
                                R"("refused":1004},{"port":"lan","address":"198.18.0.21",)"
                                R"("mac":null,"state":"unresolved","age_s":null,)"));
  EXPECT_THAT(reply, HasSubstr("lan          198.18.0.21                -                 "
                               "unresolved        -          3        0        0\\n"));
  EXPECT_THAT(reply, Not(HasSubstr("connections tracked")));
}

}  // namespace
}  // namespace berth
