#include "berth/health/monitor.h"

#include <chrono>
#include <memory>
#include <random>
#include <tuple>

namespace berth {

std::function<uint64_t()> HealthMonitor::steadyClock() {
  return [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  };
}

std::function<double()> HealthMonitor::randomJitter() {
  auto random = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [random] { return std::uniform_real_distribution<double>(0.0, 1.0)(*random); };
}

HealthMonitor::HealthMonitor(std::unique_ptr<Prober> prober, std::function<uint64_t()> clock,
                             std::function<double()> jitter)
    : prober_(std::move(prober)), clock_(std::move(clock)), jitter_(std::move(jitter)) {}

absl::StatusOr<std::unique_ptr<HealthMonitor>> HealthMonitor::create(
    const Config& config, std::function<uint64_t()> clock, std::function<double()> jitter,
    const HealthMonitor* previous) {
  absl::StatusOr<std::unique_ptr<Prober>> prober = Prober::create(clock);
  if (!prober.ok()) return prober.status();
  std::unique_ptr<HealthMonitor> monitor(
      new HealthMonitor(*std::move(prober), std::move(clock), std::move(jitter)));
  const uint64_t now = monitor->clock_();
  // Identical checks are one: the same target probed on the same schedule with the same rise
  // and fall.
  absl::flat_hash_map<CheckKey, const Check*> carried;
  if (previous != nullptr) {
    for (const Check& check : previous->checks_) carried.emplace(check.key, &check);
  }
  absl::flat_hash_map<CheckKey, size_t> by_check;
  monitor->healthy_.resize(config.services.size());
  monitor->check_of_backend_.resize(config.services.size());
  if (previous != nullptr) monitor->probes_not_run_ = previous->probes_not_run_;
  monitor->started_ms_ = previous != nullptr ? previous->started_ms_ : now;
  for (size_t s = 0; s < config.services.size(); ++s) {
    const ServiceConfig& service = config.services[s];
    monitor->healthy_[s].assign(service.backends.size(), true);
    monitor->check_of_backend_[s].assign(service.backends.size(), kNoCheck);
    for (size_t b = 0; b < service.backends.size(); ++b) {
      const HealthCheckConfig& settings = service.backends[b].health;
      if (settings.type == HealthCheckType::kNone) continue;
      const ProbeTarget target = ProbeTarget::of(settings);
      const CheckKey key{target, settings.interval_ms, settings.rise, settings.fall};
      auto [it, inserted] = by_check.try_emplace(key, monitor->checks_.size());
      if (inserted) {
        if (auto old = carried.find(key); old != carried.end()) {
          HealthCheck state = old->second->state;
          // A probe the old monitor had in flight is lost with it: the next one goes out now.
          state.abandonProbe(now);
          monitor->checks_.push_back(Check{key, target, state, {}, 0});
        } else {
          const auto first = now + static_cast<uint64_t>(monitor->jitter_() * settings.interval_ms);
          const Health initial = previous != nullptr ? Health::kUnhealthy : Health::kHealthy;
          monitor->checks_.push_back(
              Check{key, target, HealthCheck(settings, initial, first, now), {}, 0});
        }
      }
      monitor->checks_[it->second].backends.emplace_back(s, b);
      monitor->check_of_backend_[s][b] = it->second;
      monitor->healthy_[s][b] = monitor->checks_[it->second].state.health() == Health::kHealthy;
    }
  }
  return monitor;
}

bool HealthMonitor::stale(size_t service, size_t backend) const {
  const size_t check = check_of_backend_[service][backend];
  return check != kNoCheck && checks_[check].state.stale(clock_());
}

BackendHealthDetail HealthMonitor::detail(size_t service, size_t backend, uint64_t now_ms) const {
  BackendHealthDetail detail;
  const auto seconds_since = [now_ms](uint64_t at_ms) {
    return static_cast<double>(now_ms > at_ms ? now_ms - at_ms : 0) / 1000.0;
  };
  const size_t check = check_of_backend_[service][backend];
  if (check == kNoCheck) {
    detail.reason = "no health check (type: none): always healthy";
    detail.since_s = seconds_since(started_ms_);
    return detail;
  }
  const HealthCheck& state = checks_[check].state;
  detail.reason = state.reason();
  detail.since_s = seconds_since(state.sinceMs());
  if (const std::optional<ProbeOutcome>& last = state.lastProbe()) {
    detail.last_probe = *last;
    detail.last_probe_s_ago = seconds_since(last->at_ms);
  }
  return detail;
}

bool HealthMonitor::settled(size_t service, size_t backend) const {
  const size_t check = check_of_backend_[service][backend];
  return check == kNoCheck || checks_[check].state.settled();
}

std::vector<BackendHealthChange> HealthMonitor::poll(int wait_ms) {
  const uint64_t now = clock_();
  for (size_t c = 0; c < checks_.size(); ++c) {
    Check& check = checks_[c];
    if (!check.state.due(now)) continue;
    check.state.started(now);
    check.probe = prober_->start(check.target);
    check_of_probe_[check.probe] = c;
  }
  std::vector<BackendHealthChange> changes;
  for (const ProbeResult& result : prober_->poll(wait_ms)) {
    auto it = check_of_probe_.find(result.probe);
    if (it == check_of_probe_.end()) continue;
    Check& check = checks_[it->second];
    check_of_probe_.erase(it);
    check.probe = 0;
    if (!result.ran) {
      check.state.notRun(clock_(), jitter_());
      ++probes_not_run_;
      last_not_run_reason_ = result.detail;
      continue;
    }
    const bool was_settled = check.state.settled();
    const std::optional<HealthTransition> transition =
        check.state.finished(result.success, result.detail, clock_(), jitter_());
    settled_count_ += !was_settled && check.state.settled();
    if (!transition) continue;
    for (const auto& [service, backend] : check.backends) {
      healthy_[service][backend] = transition->to == Health::kHealthy;
      changes.push_back({service, backend, *transition, check.target.toString()});
    }
  }
  return changes;
}

}  // namespace berth
