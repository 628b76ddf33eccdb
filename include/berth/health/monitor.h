#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/health/health_check.h"
#include "berth/health/prober.h"

namespace berth {

// Every configured backend's health, as the management thread keeps it: one HealthCheck per
// distinct check (target, interval, rise and fall), so a target that several services share is
// probed once, as Maglev does; its results count for each backend that has it. Backends with
// `type: none` are always healthy and are never probed.

// A backend's change of state, for the log line and the snapshot rebuild.
struct BackendHealthChange {
  size_t service = 0;  // indices into the config
  size_t backend = 0;
  HealthTransition transition;
  std::string target;  // ProbeTarget::toString()
};

// What `berthctl backends` shows of a backend's health: why it is in its state, for how long,
// and its check's last probe.
struct BackendHealthDetail {
  std::string reason;
  double since_s = 0;  // in this state, or since berthd started for a backend without a check
  std::optional<ProbeOutcome> last_probe;  // none before the first probe that ran
  double last_probe_s_ago = 0;
};

class HealthMonitor {
 public:
  // What berthd's monitor runs on: steady milliseconds (a wall-clock step, NTP's, must neither
  // hold probes back nor fire them all at once), and jitter from a seeded random source.
  static std::function<uint64_t()> steadyClock();
  static std::function<double()> randomJitter();

  // Every checked backend starts healthy (berthd starting must not stop traffic), its first
  // probe spread over one interval by `jitter` (uniform in [0, 1), from a random source in
  // berthd, fixed in tests). `clock` gives milliseconds.
  //
  // With `previous` (a reload), a check identical to one `previous` ran keeps its state and
  // schedule, so an unchanged backend neither flaps nor waits; a new check starts unhealthy and
  // takes `rise` successes before its backends get traffic.
  static absl::StatusOr<std::unique_ptr<HealthMonitor>> create(
      const Config& config, std::function<uint64_t()> clock, std::function<double()> jitter,
      const HealthMonitor* previous = nullptr);

  // Sends the probes that are due, waits up to `wait_ms` for results, and returns the changes of
  // state they caused.
  std::vector<BackendHealthChange> poll(int wait_ms);

  // In the order of the service's backends in the config.
  const std::vector<bool>& healthy(size_t service) const { return healthy_[service]; }
  size_t checkCount() const { return checks_.size(); }
  // Whether the backend's check has gone without a probe that ran for longer than it tolerates
  // (HealthCheck::stale): its health is what it was when probes last ran. False for a backend
  // without a check.
  bool stale(size_t service, size_t backend) const;
  // `now_ms` from now(): one reading of the clock for every backend of a reply.
  BackendHealthDetail detail(size_t service, size_t backend, uint64_t now_ms) const;
  uint64_t now() const { return clock_(); }
  // Whether the backend's health is a verdict (HealthCheck::settled); true without a check.
  bool settled(size_t service, size_t backend) const;
  // Checks that became settled in this monitor so far: a change says new verdicts to report.
  uint64_t settledCount() const { return settled_count_; }
  // Probes a local error stopped (ProbeResult::ran false), over this monitor and the ones a
  // reload replaced, and the last one's error. They change no backend's health.
  uint64_t probesNotRun() const { return probes_not_run_; }
  const std::string& lastNotRunReason() const { return last_not_run_reason_; }

 private:
  using CheckKey = std::tuple<ProbeTarget, uint32_t, uint32_t, uint32_t>;
  struct Check {
    CheckKey key;
    ProbeTarget target;
    HealthCheck state;
    std::vector<std::pair<size_t, size_t>> backends;  // (service, backend) in the config
    uint64_t probe = 0;                               // in flight, or 0
  };

  HealthMonitor(std::unique_ptr<Prober> prober, std::function<uint64_t()> clock,
                std::function<double()> jitter);

  std::unique_ptr<Prober> prober_;
  std::function<uint64_t()> clock_;
  std::function<double()> jitter_;
  std::vector<Check> checks_;
  absl::flat_hash_map<uint64_t, size_t> check_of_probe_;
  std::vector<std::vector<bool>> healthy_;
  uint64_t settled_count_ = 0;
  // Per service and backend, its check's index in checks_, or kNoCheck.
  static constexpr size_t kNoCheck = SIZE_MAX;
  std::vector<std::vector<size_t>> check_of_backend_;
  uint64_t probes_not_run_ = 0;
  std::string last_not_run_reason_;
  uint64_t started_ms_ = 0;  // the first monitor's creation: berthd's start
};

}  // namespace berth
