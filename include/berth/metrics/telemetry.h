#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/api/telemetry_answer.h"
#include "berth/control/reports.h"
#include "berth/control/status_report.h"
#include "berth/metrics/port_stats.h"

namespace berth {

// The /berth/... telemetry commands' answers, from the same rows as `berthctl status`, `stats`,
// `services` and `backends` (control/reports.h, control/status_report.h) and the port readings
// (metrics/port_stats.h). Pure: berthd gathers the rows on its loop and hands the answer to DPDK's
// telemetry (daemon/control_metrics.cc).

// /berth/status.
TelemetryAnswer statusTelemetry(const StatusReport& report);
// /berth/stats: the summed counters, and the connections the workers track.
TelemetryAnswer statsTelemetry(const std::vector<std::pair<std::string, uint64_t>>& sums,
                               uint64_t conntrack_entries);
// /berth/services[,FIRST]: a page of kTelemetryRows services from row FIRST.
TelemetryAnswer servicesTelemetry(const std::vector<ServiceRow>& rows, absl::string_view params);
// /berth/backends,SERVICE[,FIRST]: a page of SERVICE's backends; `known` says whether a service
// of that name is configured.
TelemetryAnswer backendsTelemetry(std::vector<BackendRow> rows, absl::string_view params,
                                  const std::function<bool(absl::string_view)>& known);
// /berth/ports[,PORT]: the port names, or PORT's statistics; at most `max_array` xstats (an
// array's limit in DPDK's telemetry). `reading` null: none read yet.
TelemetryAnswer portsTelemetry(const PortStatsReading* reading, const PortRates& rates,
                               absl::string_view port_name, absl::Time now, size_t max_array);

}  // namespace berth
