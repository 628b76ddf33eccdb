#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "berth/runtime/port_readings.h"
#include "berth/util/background_thread.h"
#include "berth/util/json_writer.h"

namespace berth {

// What each port's NIC reports of itself (docs/nics.md): DPDK's basic statistics, the PMD's
// extended statistics by name, and the link. berthd reads them once a second away from the
// management loop (PortStatsSampler), and `berthctl stats`, Prometheus and telemetry show the
// latest reading with rates over the second before it. Pure: the runtime fills the readings
// (runtime/port_readings.h, runtime/port.h readPortStats).

struct PortStatsReading {
  absl::Time at = absl::InfinitePast();
  absl::Duration took;  // how long reading every port took
  std::vector<PortStats> ports;
};

// Per second, each port's totals between two readings of the same ports; zero for a port that is
// in only one of them, and for a total that went down (a PMD that reset its counters).
struct PortRates {
  double interval_s = 0;                                      // 0 without two readings
  std::vector<std::array<double, kPortTotalCount>> per_port;  // by `latest`'s ports
};
PortRates portRates(const PortStatsReading* previous, const PortStatsReading& latest);

// The `ports` array of the stats reply: per port its link, totals, rates, queues and xstats.
void writePortsJson(JsonWriter& json, const PortStatsReading& reading, const PortRates& rates,
                    absl::Time now);
// The same as text, for `berthctl stats`; xstats that are zero are left out of the text.
std::string portsText(const PortStatsReading& reading, const PortRates& rates, absl::Time now);

// Takes port readings on a thread of its own, so that a PMD whose statistics call waits on the
// kernel or the firmware never holds up the management loop. The loop calls turn() every pass:
// it never waits, picks up a finished reading, and starts the next once `interval` has passed
// since the last one started, unless one is still under way (that one is then counted late).
class PortStatsSampler {
 public:
  using Read = std::function<PortStatsReading()>;
  // `read` runs on the sampler's thread; it must stay valid until the sampler is destroyed,
  // which waits for a reading under way.
  PortStatsSampler(Read read, absl::Duration interval);
  ~PortStatsSampler();
  PortStatsSampler(const PortStatsSampler&) = delete;
  PortStatsSampler& operator=(const PortStatsSampler&) = delete;

  void turn(absl::Time now);
  // The newest reading and the one before it; null until there is one.
  std::shared_ptr<const PortStatsReading> latest() const { return latest_; }
  PortRates rates() const;
  // Turns at which a reading was due while the last one had not finished.
  uint64_t late() const { return late_; }

 private:
  struct Pending;
  Read read_;
  const absl::Duration interval_;
  absl::Time started_ = absl::InfinitePast();
  std::shared_ptr<Pending> pending_;
  std::shared_ptr<const PortStatsReading> latest_;
  std::shared_ptr<const PortStatsReading> previous_;
  uint64_t late_ = 0;
  // Last: destroyed first, so the reading under way finishes while the rest is still here.
  BackgroundThread thread_{1};
};

}  // namespace berth
