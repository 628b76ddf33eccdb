#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "berth/control/service_state.h"
#include "berth/maglev/table.h"

namespace berth {

// Every service's state (service_state.h) in config order, the management loop's health and
// tables subsystem: each change to a table goes through one of its methods, which logs what the
// change moved against the least it had to ("table: service 'web': moved ..."), adds it to the
// service's history (kept across reloads by the service's name, for status and the metrics) and
// leaves a service whose change failed serving as it was. Publishing the snapshot is the
// caller's. Pure: no DPDK, no clock, no I/O beyond the log it is given.
class ServiceTables {
 public:
  using Log = std::function<void(const std::string&)>;
  // Service s's verdicts (config order) for its state as it stands.
  using VerdictsOf = std::function<std::vector<bool>(const ServiceState& state, size_t s)>;
  // Service s's base table from a table generation, or nullopt for the config's own.
  using BaseOf = std::function<absl::StatusOr<std::optional<Table>>(const ServiceState& state)>;

  explicit ServiceTables(Log log) : log_(std::move(log)) {}

  const std::vector<ServiceState>& states() const { return states_; }
  // The history of the service named `service`, or nullptr before its first change.
  const TableChangeHistory* history(absl::string_view service) const;

  // At start and at a reload: the states in force from now on. Each service whose live table a
  // reload changed (reloadChange() of its state before and after, by name) is noted.
  void replace(std::vector<ServiceState> states, absl::Time now);
  // Serves each service in `which` with `verdicts`: min-disruption failover of its live table.
  // Returns whether any table changed.
  bool serveVerdicts(absl::Span<const size_t> which, const VerdictsOf& verdicts, absl::Time now);
  // Every service: `verdicts` as above.
  bool serveVerdicts(const VerdictsOf& verdicts, absl::Time now);
  // A new table generation (`generation`, for the log) as every service's base table, each with
  // the verdicts that go with that base (`verdicts` is asked after the base is in place). A
  // service whose base cannot be had keeps its table. Returns whether any service took it; only
  // a table that moved is noted.
  bool serveGeneration(uint64_t generation, const BaseOf& base_of,
                       const std::function<std::vector<bool>(const ServiceConfig& service, size_t s,
                                                             const Table* base)>& verdicts,
                       absl::Time now);

  // What a drain or undrain of backend `backend` did, in every service that has it (or only in
  // `service` when it is not empty).
  struct DrainOutcome {
    std::vector<std::string> changed;  // "service/backend", for those that were not so already
    std::vector<std::string> moved;    // "service/backend moved ...", the same, for the log
  };
  // Drains (or undrains) on copies first, then puts them in force and calls `publish`: when it
  // fails, or a copy cannot be built, every service is as it was and the error says why. Notes
  // each change without a line of its own: the caller logs the outcome. NotFound naming the
  // backend (and the service) when no service has it.
  absl::StatusOr<DrainOutcome> setDrained(absl::string_view service, absl::string_view backend,
                                          bool drained,
                                          const std::function<absl::Status()>& publish,
                                          absl::Time now);

 private:
  void note(const std::string& service, const SlotChange& change, absl::Time now);
  void record(const std::string& service, const SlotChange& change, absl::Time now);

  Log log_;
  std::vector<ServiceState> states_;
  absl::flat_hash_map<std::string, TableChangeHistory> history_;
};

}  // namespace berth
