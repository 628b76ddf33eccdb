#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "berth/control/periodic_jobs.h"
#include "berth/control/reload_history.h"
#include "berth/control/service_state.h"
#include "berth/fleet/agent.h"
#include "berth/util/json_writer.h"

namespace berth {

// What `status` shows of the fleet: the agent's view, the version cache, the generation served,
// fail-safe removals and the backends whose verdicts some instances do not share.
struct FleetStatusRow {
  std::string instance;
  FleetAgentStatus agent;
  std::string cache_path;
  absl::Status cache_written;
  uint64_t generation = 0;  // the table generation served; 0 for none
  bool fail_safe = false;
  std::vector<std::string> fail_safe_removed;  // "service/backend"
  AgreedHealth agreed;
};

// One service's table as `status` shows it: its fingerprint, and its last change with what it
// moved against the least it had to.
struct TableStatusRow {
  std::string service;
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t table_size = 0;
  std::string fingerprint;
  std::optional<SlotChange> last_change;
  double last_change_seconds_ago = 0;
};

// The figures of a `status` reply, gathered on the management loop.
struct StatusReport {
  std::string version;
  double uptime_s = 0;
  std::string config_path;
  uint32_t config_crc32c = 0;
  uint64_t snapshot_generation = 0;
  uint64_t workers = 0;
  uint64_t services = 0;
  uint64_t backends = 0;
  std::vector<std::string> drained;  // "service/backend"
  // Where drains are kept across a restart (none without --drain-state), and the last write.
  std::optional<std::string> drain_state_path;
  absl::Status drain_state_written;
  std::vector<std::string> exception_interfaces;
  // How each port spreads what it receives over its queues (its RSS key, redirection table and
  // the fields it hashes), and its Full-NAT pool: one line a port (docs/fullnat.md).
  std::vector<std::string> port_spreads;
  std::vector<TableStatusRow> tables;
  std::vector<PeriodicJobs::JobFigures> periodic_jobs;
  std::optional<FleetStatusRow> fleet;
  ReloadHistory reloads;
  absl::Time taken_at = absl::UnixEpoch();  // when the loop gathered this report
};

// The `status` reply: a JSON object with the figures and a "text" member for people. Pure.
std::string statusReplyJson(const StatusReport& report);
// The fleet's part of it: its members under "fleet", and its lines of the text.
std::string writeFleetStatus(const FleetStatusRow& fleet, JsonWriter& json);

}  // namespace berth
