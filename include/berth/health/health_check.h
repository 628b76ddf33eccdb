#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "berth/config/config.h"

namespace berth {

// The rise/fall state machine of one health-check target, and its probe schedule. Pure: the
// caller passes the time (milliseconds from any epoch it keeps) and the jitter, so tests drive
// both by hand, and the prober that sends the probes lives apart (prober.h).

enum class Health : uint8_t { kHealthy, kUnhealthy };
absl::string_view toString(Health health);

// A change of state, with why: what the probe that tipped it saw, and how many in a row did.
struct HealthTransition {
  Health from;
  Health to;
  std::string reason;
};

// How far each probe's time may move from the interval, either way, so that the probes of many
// backends configured alike do not all go out together.
inline constexpr double kProbeJitterFraction = 0.1;

// The last probe that ran to a result, as `berthctl backends` shows it.
struct ProbeOutcome {
  bool success = false;
  std::string detail;       // "connected", "HTTP 200", "connect: Connection refused", ...
  uint64_t latency_ms = 0;  // from sending to the result, to the management loop's tick
  uint64_t at_ms = 0;
};

class HealthCheck {
 public:
  // Starts in `initial`: healthy for the backends berthd starts with (a restart must not stop
  // traffic until every backend has passed `rise` probes), unhealthy for backends a reload adds.
  // The first probe is due at `first_probe_ms`.
  // `now_ms` is when it starts: since then it is in `initial`.
  HealthCheck(const HealthCheckConfig& config, Health initial, uint64_t first_probe_ms,
              uint64_t now_ms = 0);

  Health health() const { return health_; }
  // Why health() is what it is, and since when: the transition that made it so, or how the
  // check started.
  const std::string& reason() const { return reason_; }
  uint64_t sinceMs() const { return since_ms_; }
  const std::optional<ProbeOutcome>& lastProbe() const { return last_probe_; }
  // Whether health() is a verdict: true from the start for a check that starts healthy; for one
  // that starts unhealthy (a reload added it), once `rise` probes in a row succeeded or `fall`
  // in a row failed. What a fleet counts (fleet/agreed_health.h).
  bool settled() const { return settled_; }
  bool due(uint64_t now_ms) const { return !in_flight_ && now_ms >= next_probe_ms_; }
  uint64_t nextProbeMs() const { return next_probe_ms_; }
  bool inFlight() const { return in_flight_; }
  // When a probe in flight counts as failed.
  uint64_t deadlineMs() const { return deadline_ms_; }

  // A probe went out at `now_ms`.
  void started(uint64_t now_ms);
  // Forgets a probe in flight without counting it (its prober is gone), and makes the next one
  // due at `now_ms` if it was.
  void abandonProbe(uint64_t now_ms) {
    if (!in_flight_) return;
    in_flight_ = false;
    next_probe_ms_ = now_ms;
  }

  // The probe in flight finished: succeeded, or failed for `reason` (a timeout included). The
  // next probe is due an interval after `now_ms`, moved by (2 * jitter_unit - 1) * 10% of the
  // interval, jitter_unit being uniform in [0, 1). Returns the state change this caused.
  std::optional<HealthTransition> finished(bool success, absl::string_view reason, uint64_t now_ms,
                                           double jitter_unit);
  // The probe in flight did not run: a local error (no descriptor, no memory, no free local port)
  // stopped it before it reached the backend. It counts neither way; the next probe is due as
  // after a result.
  void notRun(uint64_t now_ms, double jitter_unit);
  // Whether no probe has run to a verdict for longer than fall + 1 intervals and a timeout: the
  // health this check reports is stale.
  bool stale(uint64_t now_ms) const;

 private:
  HealthCheckConfig config_;
  Health health_;
  uint32_t successes_ = 0;  // in a row
  uint32_t failures_ = 0;   // in a row
  bool settled_;
  bool in_flight_ = false;
  void scheduleNext(uint64_t now_ms, double jitter_unit);
  // The rise/fall count after a probe's result, and the change it makes.
  std::optional<HealthTransition> verdict(bool success, absl::string_view reason);

  uint64_t next_probe_ms_;
  uint64_t deadline_ms_ = 0;
  uint64_t probe_started_ms_ = 0;
  uint64_t last_verdict_ms_;  // the last probe that ran, or the first probe's time
  std::string reason_;
  uint64_t since_ms_;
  std::optional<ProbeOutcome> last_probe_;
};

}  // namespace berth
