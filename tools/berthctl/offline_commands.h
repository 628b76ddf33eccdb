#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/maglev/comparison.h"
#include "progress.h"

namespace berth {

// berthctl's offline commands: they read a config file, not a running berthd.

struct OfflineOptions {
  bool json = false;
  // table: the balance and slots per backend, without the backend of every slot.
  bool summary = false;
  // Backends to treat as unhealthy, by name, in every service that has them.
  std::vector<std::string> fail;
  // analyze: at most this many single failures per service, evenly spaced; 0 for all.
  size_t max_failures = 100;
  // analyze: only this service; empty for all.
  std::string service;
  // analyze: compare these algorithms instead of analysing the configured one.
  std::vector<ComparedAlgorithm> algorithms;
  bool plot = false;  // also render the comparison as SVG charts
  // Long work reports how far it is (progress.h); none: silent.
  ProgressReport progress;
  bool measure_time = true;
};

// `berthctl table`: the backend per slot of one service's table, and slots per backend.
absl::StatusOr<std::string> tableReport(const Config& config, const std::string& service_name,
                                        const OfflineOptions& options);

// `berthctl analyze`: per service, balance and the disruption of each single backend failure,
// by min-disruption failover and by full rebuild; with `fail`, the figures for that failure set.
absl::StatusOr<std::string> analyzeReport(const Config& config, const OfflineOptions& options);

// `berthctl analyze --config NEW --against OLD`: per service of either file, what a reload from
// OLD to NEW would move in its table (every backend healthy, no run-time drain) against the
// least that had to move, and the cause berthd would log (service_state.h reloadChange()).
absl::StatusOr<std::string> changeReport(const Config& next, const Config& previous,
                                         const OfflineOptions& options);

// `berthctl analyze --algorithms A,B,...`: per service, each algorithm's build time, lookup
// cost, memory, balance, weighted error and movement (comparison.h), as text or JSON, and with
// `plot` the SVG charts of comparison_plot.h.
struct ComparisonOutput {
  std::string report;
  std::string svg;  // empty unless options.plot
};
absl::StatusOr<ComparisonOutput> comparisonReport(const Config& config,
                                                  const OfflineOptions& options);

}  // namespace berth
