#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "berth/config/loader.h"
#include "berth/dataplane/snapshot.h"
#include "berth/maglev/analysis.h"

namespace berth {

// A config parsed from YAML, its services' tables, and the snapshot built from them with every
// port's MAC `port_mac`: what the pipeline tests run frames through. Kept together because the
// snapshot refers to the tables and the config.
struct BuiltSnapshot {
  Config config;
  std::vector<Table> tables;
  CounterIds ids;
  std::unique_ptr<const Snapshot> snapshot;
};

inline std::unique_ptr<BuiltSnapshot> buildSnapshotFrom(absl::string_view yaml,
                                                        const MacAddress& port_mac,
                                                        const NeighborTable& neighbors = {}) {
  auto built = std::make_unique<BuiltSnapshot>();
  absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  built->config = *std::move(config);
  built->tables = *buildServiceTables(built->config);
  const std::vector<MacAddress> port_macs(built->config.dataplane.ports.size(), port_mac);
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      buildSnapshot(built->config, built->tables, port_macs, neighbors, built->ids, 1);
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  built->snapshot = *std::move(snapshot);
  return built;
}

}  // namespace berth
