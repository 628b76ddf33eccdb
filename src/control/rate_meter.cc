#include "berth/control/rate_meter.h"

namespace berth {

void RateMeter::sample(absl::Time now, const std::vector<WorkerMetrics>& workers) {
  Sample sample;
  sample.at = now;
  for (const WorkerMetrics& worker : workers) {
    sample.rx_packets += worker.rx_packets;
    sample.rx_bytes += worker.rx_bytes;
    sample.tx_packets += worker.tx_packets;
    sample.tx_bytes += worker.tx_bytes;
    sample.drops += worker.drops;
  }
  previous_ = latest_;
  latest_ = sample;
}

Rates RateMeter::rates() const {
  Rates rates;
  const double seconds = absl::ToDoubleSeconds(latest_.at - previous_.at);
  if (previous_.at == absl::InfinitePast() || seconds <= 0) return rates;
  const auto per_second = [seconds](uint64_t later, uint64_t earlier) {
    return static_cast<double>(later - earlier) / seconds;
  };
  rates.interval_s = seconds;
  rates.rx_pps = per_second(latest_.rx_packets, previous_.rx_packets);
  rates.tx_pps = per_second(latest_.tx_packets, previous_.tx_packets);
  rates.rx_bps = 8.0 * per_second(latest_.rx_bytes, previous_.rx_bytes);
  rates.tx_bps = 8.0 * per_second(latest_.tx_bytes, previous_.tx_bytes);
  rates.drops_per_s = per_second(latest_.drops, previous_.drops);
  return rates;
}

void TrafficRateMeter::sample(absl::Time now, std::vector<TrafficTotals> services,
                              std::vector<TrafficTotals> backends) {
  previous_ = std::move(latest_);
  latest_ = Sample{now, std::move(services), std::move(backends)};
}

std::optional<TrafficRate> TrafficRateMeter::rate(uint32_t id, bool backend) const {
  const double seconds = absl::ToDoubleSeconds(latest_.at - previous_.at);
  if (previous_.at == absl::InfinitePast() || seconds <= 0) return std::nullopt;
  const std::vector<TrafficTotals>& earlier = backend ? previous_.backends : previous_.services;
  const std::vector<TrafficTotals>& later = backend ? latest_.backends : latest_.services;
  if (id >= earlier.size() || id >= later.size()) return std::nullopt;
  // A counter that went down (its worker was replaced) counts as no traffic, not as 2^64.
  const auto per_second = [seconds](uint64_t after, uint64_t before) {
    return after >= before ? static_cast<double>(after - before) / seconds : 0.0;
  };
  TrafficRate rate;
  rate.packets_per_s = per_second(later[id].packets, earlier[id].packets);
  rate.bits_per_s = 8.0 * per_second(later[id].bytes, earlier[id].bytes);
  rate.new_connections_per_s = per_second(later[id].opened, earlier[id].opened);
  return rate;
}

}  // namespace berth
