#include "berth/health/health_check.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view toString(Health health) {
  return health == Health::kHealthy ? "healthy" : "unhealthy";
}

HealthCheck::HealthCheck(const HealthCheckConfig& config, Health initial, uint64_t first_probe_ms,
                         uint64_t now_ms)
    : config_(config),
      health_(initial),
      settled_(initial == Health::kHealthy),
      next_probe_ms_(first_probe_ms),
      last_verdict_ms_(first_probe_ms),
      reason_(initial == Health::kHealthy ? "healthy at start until probes say otherwise"
                                          : absl::StrCat("new: unhealthy until ", config.rise,
                                                         " probe(s) in a row succeed")),
      since_ms_(now_ms) {}

void HealthCheck::scheduleNext(uint64_t now_ms, double jitter_unit) {
  in_flight_ = false;
  const double jitter = (2 * jitter_unit - 1) * kProbeJitterFraction * config_.interval_ms;
  next_probe_ms_ = now_ms + static_cast<uint64_t>(std::llround(config_.interval_ms + jitter));
}

void HealthCheck::notRun(uint64_t now_ms, double jitter_unit) { scheduleNext(now_ms, jitter_unit); }

bool HealthCheck::stale(uint64_t now_ms) const {
  // Fall intervals, one more for the jitter and the schedule, and a probe's timeout: a check that
  // runs is never stale.
  const uint64_t patience =
      (static_cast<uint64_t>(config_.fall) + 1) * config_.interval_ms + config_.timeout_ms;
  return now_ms > last_verdict_ms_ + patience;
}

void HealthCheck::started(uint64_t now_ms) {
  in_flight_ = true;
  probe_started_ms_ = now_ms;
  deadline_ms_ = now_ms + config_.timeout_ms;
}

std::optional<HealthTransition> HealthCheck::finished(bool success, absl::string_view reason,
                                                      uint64_t now_ms, double jitter_unit) {
  scheduleNext(now_ms, jitter_unit);
  last_verdict_ms_ = now_ms;
  last_probe_ = ProbeOutcome{success, std::string(reason),
                             now_ms > probe_started_ms_ ? now_ms - probe_started_ms_ : 0, now_ms};
  std::optional<HealthTransition> transition = verdict(success, reason);
  if (transition) {
    reason_ = transition->reason;
    since_ms_ = now_ms;
  }
  return transition;
}

std::optional<HealthTransition> HealthCheck::verdict(bool success, absl::string_view reason) {
  if (success) {
    failures_ = 0;
    ++successes_;
    if (health_ == Health::kUnhealthy && successes_ >= config_.rise) {
      health_ = Health::kHealthy;
      settled_ = true;
      return HealthTransition{Health::kUnhealthy, Health::kHealthy,
                              absl::StrCat(successes_, " probe(s) in a row succeeded")};
    }
    return std::nullopt;
  }
  successes_ = 0;
  ++failures_;
  settled_ |= failures_ >= config_.fall;
  if (health_ == Health::kHealthy && failures_ >= config_.fall) {
    health_ = Health::kUnhealthy;
    return HealthTransition{
        Health::kHealthy, Health::kUnhealthy,
        absl::StrCat(failures_, " probe(s) in a row failed, the last: ", reason)};
  }
  return std::nullopt;
}

}  // namespace berth
