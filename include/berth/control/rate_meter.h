#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "berth/control/reports.h"

namespace berth {

// Packet, bit and drop rates over the interval between the last two samples.
struct Rates {
  double interval_s = 0;  // 0 until two samples exist
  double rx_pps = 0;
  double tx_pps = 0;
  double rx_bps = 0;
  double tx_bps = 0;
  double drops_per_s = 0;
};

// The rates `stats` shows: the loop samples the workers' summed totals every interval, and the
// rates are the difference of the last two samples. Pure.
class RateMeter {
 public:
  void sample(absl::Time now, const std::vector<WorkerMetrics>& workers);
  Rates rates() const;

 private:
  struct Sample {
    absl::Time at = absl::InfinitePast();
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_packets = 0;
    uint64_t tx_bytes = 0;
    uint64_t drops = 0;
  };
  Sample previous_;
  Sample latest_;
};

// Per service and per backend, by counter id: packets, bits and new connections per second over
// the interval between the last two samples, for `services`, `backends` and the metrics. The
// loop samples the workers' summed counters with the totals above. Pure.
class TrafficRateMeter {
 public:
  void sample(absl::Time now, std::vector<TrafficTotals> services,
              std::vector<TrafficTotals> backends);
  // nullopt until two samples, or for an id the older sample lacks (new since).
  std::optional<TrafficRate> rate(uint32_t id, bool backend) const;

 private:
  struct Sample {
    absl::Time at = absl::InfinitePast();
    std::vector<TrafficTotals> services;
    std::vector<TrafficTotals> backends;
  };
  Sample previous_;
  Sample latest_;
};

}  // namespace berth
