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

}  // namespace berth
