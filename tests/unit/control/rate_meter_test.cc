// The rates `stats` shows (control/rate_meter.h). Pinned: none until two samples exist; then the
// difference of the last two samples of the workers' summed totals over the time between them,
// bits from bytes.

#include "berth/control/rate_meter.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

WorkerMetrics worker(uint64_t rx_packets, uint64_t rx_bytes, uint64_t tx_packets, uint64_t tx_bytes,
                     uint64_t drops) {
  WorkerMetrics metrics;
  metrics.rx_packets = rx_packets;
  metrics.rx_bytes = rx_bytes;
  metrics.tx_packets = tx_packets;
  metrics.tx_bytes = tx_bytes;
  metrics.drops = drops;
  return metrics;
}

TEST(RateMeterTest, NoRatesBeforeTwoSamples) {
  RateMeter meter;
  EXPECT_EQ(meter.rates().interval_s, 0);
  meter.sample(kStart, {worker(100, 6400, 90, 5760, 10)});
  EXPECT_EQ(meter.rates().interval_s, 0);
  EXPECT_EQ(meter.rates().rx_pps, 0);
}

TEST(RateMeterTest, RatesAreTheWorkersSummedGrowthBetweenTheLastTwoSamples) {
  RateMeter meter;
  meter.sample(kStart, {worker(100, 6400, 90, 5760, 10), worker(0, 0, 0, 0, 0)});
  meter.sample(kStart + absl::Seconds(2),
               {worker(300, 19200, 250, 16000, 14), worker(100, 6400, 50, 3200, 2)});
  const Rates rates = meter.rates();
  EXPECT_DOUBLE_EQ(rates.interval_s, 2);
  EXPECT_DOUBLE_EQ(rates.rx_pps, 150);
  EXPECT_DOUBLE_EQ(rates.tx_pps, 105);
  EXPECT_DOUBLE_EQ(rates.rx_bps, 8.0 * (25600 - 6400) / 2);
  EXPECT_DOUBLE_EQ(rates.tx_bps, 8.0 * (19200 - 5760) / 2);
  EXPECT_DOUBLE_EQ(rates.drops_per_s, 3);
  // A third sample: the rates are over its interval alone.
  meter.sample(kStart + absl::Seconds(3),
               {worker(300, 19200, 250, 16000, 14), worker(100, 6400, 50, 3200, 2)});
  EXPECT_DOUBLE_EQ(meter.rates().interval_s, 1);
  EXPECT_DOUBLE_EQ(meter.rates().rx_pps, 0);
}

// Per service and backend: packets, bits and new connections per second between the last two
// samples; none before two, none for an id the older sample lacks, and no wrap when a counter
// goes down.
TEST(TrafficRateMeterTest, RatesPerIdOverTheLastInterval) {
  TrafficRateMeter meter;
  meter.sample(kStart, {{100, 1000, 5, 10}}, {{50, 500, 2, 4}});
  EXPECT_FALSE(meter.rate(0, false).has_value());
  meter.sample(kStart + absl::Seconds(2), {{300, 3000, 7, 30}}, {{40, 900, 2, 8}, {10, 10, 1, 1}});
  const std::optional<TrafficRate> service = meter.rate(0, false);
  ASSERT_TRUE(service.has_value());
  EXPECT_DOUBLE_EQ(service->packets_per_s, 100);
  EXPECT_DOUBLE_EQ(service->bits_per_s, 8000);
  EXPECT_DOUBLE_EQ(service->new_connections_per_s, 10);
  const std::optional<TrafficRate> backend = meter.rate(0, true);
  ASSERT_TRUE(backend.has_value());
  EXPECT_DOUBLE_EQ(backend->packets_per_s, 0) << "went down: no traffic, not a wrap";
  EXPECT_DOUBLE_EQ(backend->bits_per_s, 1600);
  EXPECT_DOUBLE_EQ(backend->new_connections_per_s, 2);
  EXPECT_FALSE(meter.rate(1, true).has_value()) << "new since the older sample";
  EXPECT_FALSE(meter.rate(7, false).has_value());
}

}  // namespace
}  // namespace berth
