#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/maglev/table.h"

namespace berth {

// What a change to a service's table did: the slots that now name another backend. The control
// plane logs it with every change, so an operator sees how much each one moved.
struct SlotChange {
  uint32_t table_size = 0;
  std::vector<uint32_t> moved;  // slot numbers, ascending

  double movedShare() const {
    return table_size == 0 ? 0.0
                           : static_cast<double>(moved.size()) / static_cast<double>(table_size);
  }
};

// One service as the control plane holds it (docs/architecture.md, per-service state): its
// settings, its base table (every backend healthy), its live table (the base with health
// applied, which the snapshot carries), the backends' health and the backends drained at run
// time. Every change goes through a method that returns the slots it moved and leaves the state
// as it was when it fails. Pure: no DPDK, no clock, no I/O.
//
// The health policy is min-disruption failover from the base table (maglev/table.h
// withHealth()): healthy backends keep their slots, and the live table is a pure function of
// (settings, drained set, healthy set), so every instance that agrees on those agrees on it.
// A drain sets the backend's weight to 0 and builds the base table again in full.
class ServiceState {
 public:
  // The service as `config` gives it, with the backends named in `drained` drained (a reload
  // keeps run-time drains; names `config` lacks are dropped) and `healthy` (config order, one
  // flag per backend) applied. Errors name the service.
  static absl::StatusOr<ServiceState> create(ServiceConfig config, std::vector<bool> healthy,
                                             const absl::flat_hash_set<std::string>& drained = {});

  const std::string& name() const { return config_.name; }
  // The settings in force: as configured, with each drained backend's weight 0.
  const ServiceConfig& config() const { return config_; }
  const Table& baseTable() const { return base_; }
  const Table& liveTable() const { return live_; }
  // fingerprintOf(liveTable()), kept with it: `status` reports it on every request, and a
  // 655,373-slot table takes milliseconds to hash.
  uint64_t liveFingerprint() const { return live_fingerprint_; }
  // One flag per backend, in config order.
  const std::vector<bool>& healthy() const { return healthy_; }
  size_t healthyCount() const;
  bool hasBackend(absl::string_view backend) const;
  bool drained(absl::string_view backend) const { return drained_.contains(backend); }
  // The drained backends' names, in config order.
  std::vector<std::string> drainedBackends() const;
  // Whether a new flow has somewhere to go: a healthy backend with a weight, not drained.
  bool serving() const;

  // New health verdicts (config order). Only the live table changes.
  absl::StatusOr<SlotChange> setHealth(std::vector<bool> healthy);
  // Drains or undrains the backend named `backend`. NotFound when the service has no such
  // backend; nullopt when it already was so, and nothing changed.
  absl::StatusOr<std::optional<SlotChange>> setDrained(absl::string_view backend, bool drained);

 private:
  ServiceState(ServiceConfig configured, ServiceConfig config,
               absl::flat_hash_set<std::string> drained, std::vector<bool> healthy, Table base,
               Table live);
  // The state `configured` gives with exactly these drains (names it has) and verdicts.
  static absl::StatusOr<ServiceState> build(const ServiceConfig& configured,
                                            absl::flat_hash_set<std::string> drained,
                                            std::vector<bool> healthy);

  ServiceConfig configured_;  // as the config file gives it
  ServiceConfig config_;      // in force: drains applied
  absl::flat_hash_set<std::string> drained_;
  std::vector<bool> healthy_;
  Table base_;
  Table live_;
  uint64_t live_fingerprint_;
};

// The backends drained at run time, by service name: what a reload carries over.
using DrainsByService = absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>;
DrainsByService drainsOf(absl::Span<const ServiceState> states);

// The states of `services`, in order: `healthy(s)` gives service s's verdicts, and each keeps
// the drains `drains` lists under its name (a reload). Errors name the service.
absl::StatusOr<std::vector<ServiceState>> createServiceStates(
    absl::Span<const ServiceConfig> services,
    const std::function<std::vector<bool>(size_t)>& healthy, const DrainsByService& drains = {});

// `base` (every backend healthy) with min-disruption failover for the backends `healthy` marks
// down; `healthy` is in the order of `service`'s backends, the table's are sorted by name.
absl::StatusOr<Table> tableWithHealth(const ServiceConfig& service, const Table& base,
                                      const std::vector<bool>& healthy);

}  // namespace berth
