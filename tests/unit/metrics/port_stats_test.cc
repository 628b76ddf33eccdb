#include "berth/metrics/port_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

PortStats portWith(const std::string& name, uint64_t ipackets, uint64_t imissed) {
  PortStats port;
  port.port = name;
  port.driver = "net_test";
  port.link = {true, 100000, true, false};
  port.totals[kPortIpackets] = ipackets;
  port.totals[kPortImissed] = imissed;
  return port;
}

PortStatsReading readingAt(absl::Time at, std::vector<PortStats> ports) {
  PortStatsReading reading;
  reading.at = at;
  reading.ports = std::move(ports);
  return reading;
}

TEST(PortRatesTest, PerSecondBetweenTwoReadingsOfTheSamePort) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  const PortStatsReading before = readingAt(start, {portWith("wan", 1000, 10)});
  const PortStatsReading after =
      readingAt(start + absl::Milliseconds(500), {portWith("wan", 3000, 110)});
  const PortRates rates = portRates(&before, after);
  EXPECT_DOUBLE_EQ(rates.interval_s, 0.5);
  ASSERT_EQ(rates.per_port.size(), 1u);
  EXPECT_DOUBLE_EQ(rates.per_port[0][kPortIpackets], 4000);
  EXPECT_DOUBLE_EQ(rates.per_port[0][kPortImissed], 200);
  EXPECT_DOUBLE_EQ(rates.per_port[0][kPortOpackets], 0);
}

TEST(PortRatesTest, ZeroWithoutAnEarlierReadingForAResetOrForANewPort) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  const PortStatsReading first = readingAt(start, {portWith("wan", 1000, 10)});
  const PortRates alone = portRates(nullptr, first);
  EXPECT_EQ(alone.interval_s, 0);
  ASSERT_EQ(alone.per_port.size(), 1u);
  EXPECT_EQ(alone.per_port[0][kPortIpackets], 0);

  // The PMD reset its counters (a total went down), and "lan" was not in the first reading.
  const PortStatsReading second =
      readingAt(start + absl::Seconds(1), {portWith("wan", 5, 20), portWith("lan", 50, 0)});
  const PortRates rates = portRates(&first, second);
  EXPECT_EQ(rates.per_port[0][kPortIpackets], 0) << "a reset is no negative rate";
  EXPECT_DOUBLE_EQ(rates.per_port[0][kPortImissed], 10);
  EXPECT_EQ(rates.per_port[1][kPortIpackets], 0);
}

TEST(PortStatsReportTest, JsonHasLinkTotalsRatesQueuesAndEveryXstat) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  PortStats port = portWith("wan", 3000, 110);
  port.rx_queues = {{2000, 128000, 1}, {1000, 64000, 0}};
  port.tx_queues = {{5, 320, 0}, {0, 0, 0}};
  port.xstats = {{"rx_good_packets", 3000}, {"rx_crc_errors", 0}};
  const PortStatsReading before = readingAt(start, {portWith("wan", 1000, 10)});
  const PortStatsReading after = readingAt(start + absl::Seconds(1), {port});
  JsonWriter json;
  json.beginObject();
  writePortsJson(json, after, portRates(&before, after), start + absl::Seconds(2));
  json.endObject();
  EXPECT_EQ(json.str(),
            "{\"ports_read_s_ago\":1,\"ports\":[{\"port\":\"wan\",\"driver\":\"net_test\","
            "\"drops_reported\":true,"
            "\"link\":{\"up\":true,\"speed_mbps\":100000,\"full_duplex\":true,\"autoneg\":false},"
            "\"totals\":{\"ipackets\":3000,\"opackets\":0,\"ibytes\":0,\"obytes\":0,"
            "\"imissed\":110,\"ierrors\":0,\"oerrors\":0,\"rx_nombuf\":0},"
            "\"per_second\":{\"ipackets\":2000,\"opackets\":0,\"ibytes\":0,\"obytes\":0,"
            "\"imissed\":100,\"ierrors\":0,\"oerrors\":0,\"rx_nombuf\":0},"
            "\"rx_queues\":[{\"packets\":2000,\"bytes\":128000,\"errors\":1},"
            "{\"packets\":1000,\"bytes\":64000,\"errors\":0}],"
            "\"tx_queues\":[{\"packets\":5,\"bytes\":320,\"errors\":0},"
            "{\"packets\":0,\"bytes\":0,\"errors\":0}],"
            "\"xstats\":{\"rx_good_packets\":3000,\"rx_crc_errors\":0}}]}");
}

TEST(PortStatsReportTest, TextShowsRatesBesideTotalsAndLeavesZeroXstatsOut) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  PortStats port = portWith("wan", 3000, 110);
  port.xstats = {{"rx_good_packets", 3000}, {"rx_crc_errors", 0}, {"tx_errors", 0}};
  port.error = "";
  const PortStatsReading before = readingAt(start, {portWith("wan", 1000, 10)});
  const PortStatsReading after = readingAt(start + absl::Seconds(1), {port});
  const std::string text =
      portsText(after, portRates(&before, after), start + absl::Milliseconds(1500));
  EXPECT_THAT(text, HasSubstr("ports (read 0.5 s ago; rates over 1.0 s):"));
  EXPECT_THAT(text, HasSubstr("port wan (net_test): link up 100000 Mbit/s full-duplex\n"));
  EXPECT_THAT(text, HasSubstr("imissed                                  110 (100/s)"));
  EXPECT_THAT(text, HasSubstr("xstat rx_good_packets"));
  EXPECT_THAT(text, Not(HasSubstr("rx_crc_errors")));
  EXPECT_THAT(text, HasSubstr("(2 xstats at 0 not shown)"));
  EXPECT_EQ(portsText(PortStatsReading(), PortRates(), start), "") << "no ports, no section";
}

TEST(PortStatsReportTest, AFailedReadingSaysWhy) {
  PortStats port = portWith("wan", 0, 0);
  port.error = "rte_eth_stats_get: Operation not supported";
  port.link.up = false;
  const PortStatsReading reading = readingAt(absl::FromUnixSeconds(1000), {port});
  const std::string text = portsText(reading, portRates(nullptr, reading), reading.at);
  EXPECT_THAT(text, HasSubstr("link down"));
  EXPECT_THAT(text, HasSubstr("not read: rte_eth_stats_get: Operation not supported"));
}

TEST(PortStatsReportTest, ADriverThatCountsNoDropsShowsImissedAsNotReported) {
  PortStats port = portWith("lan", 500, 0);
  port.driver = "net_af_packet";
  port.drops_reported = false;
  const PortStatsReading reading = readingAt(absl::FromUnixSeconds(1000), {port});
  const std::string text = portsText(reading, portRates(nullptr, reading), reading.at);
  EXPECT_THAT(text, HasSubstr("imissed                                  not reported: "
                              "net_af_packet counts no frames it drops\n"));
  EXPECT_THAT(text, Not(HasSubstr("imissed                                  0")));
  JsonWriter json;
  json.beginObject();
  writePortsJson(json, reading, portRates(nullptr, reading), reading.at);
  json.endObject();
  EXPECT_THAT(json.str(), HasSubstr("\"drops_reported\":false"));
}

// Turns until `done` or a deadline; readings run on the sampler's thread.
template <typename Done>
void turnUntil(PortStatsSampler& sampler, Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done() && absl::Now() < deadline) {
    sampler.turn(absl::Now());
    absl::SleepFor(absl::Milliseconds(1));
  }
}

TEST(PortStatsSamplerTest, ReadsOffTheCallingThreadOncePerIntervalAndKeepsTheLastTwo) {
  std::atomic<int> reads{0};
  std::atomic<bool> on_caller{false};
  const std::thread::id caller = std::this_thread::get_id();
  PortStatsSampler sampler(
      [&] {
        if (std::this_thread::get_id() == caller) on_caller = true;
        const int n = ++reads;
        return readingAt(absl::InfinitePast(), {portWith("wan", 1000u * n, 0)});
      },
      absl::Milliseconds(20));
  EXPECT_EQ(sampler.latest(), nullptr);
  turnUntil(sampler, [&] { return sampler.latest() != nullptr; });
  ASSERT_NE(sampler.latest(), nullptr);
  EXPECT_EQ(sampler.rates().interval_s, 0) << "one reading, no rates yet";
  EXPECT_NE(sampler.latest()->at, absl::InfinitePast()) << "the sampler stamps each reading";
  turnUntil(sampler, [&] { return sampler.latest()->ports[0].totals[kPortIpackets] >= 2000; });
  const PortRates rates = sampler.rates();
  EXPECT_GT(rates.interval_s, 0);
  EXPECT_GT(rates.per_port[0][kPortIpackets], 0);
  EXPECT_FALSE(on_caller);
}

TEST(PortStatsSamplerTest, NeverWaitsForASlowReadingAndCountsTheTurnsItWasLate) {
  std::atomic<bool> release{false};
  PortStatsSampler sampler(
      [&] {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return readingAt(absl::InfinitePast(), {portWith("wan", 1, 0)});
      },
      absl::Milliseconds(1));
  const absl::Time start = absl::Now();
  for (int turn = 0; turn < 20; ++turn) {
    sampler.turn(absl::Now());
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(sampler.latest(), nullptr) << "the reading has not finished";
  EXPECT_GE(sampler.late(), 10u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  release = true;
  turnUntil(sampler, [&] { return sampler.latest() != nullptr; });
  EXPECT_NE(sampler.latest(), nullptr);
}

}  // namespace
}  // namespace berth
