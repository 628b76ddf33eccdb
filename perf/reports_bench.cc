// What the management loop gathers for each per-backend reply: the rows of control/reports.h
// (backendRows), which the `backends` reply, `stats` and every Prometheus scrape take before
// rendering off the loop (docs/architecture.md, "The management loop"). The loop is blocked for
// as long as this takes, so its cost at 65,535 backends bounds how long any other client waits.
// Run with --benchmark_format=json for machine-readable figures; items are backend rows.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/control/reports.h"
#include "berth/control/service_state.h"
#include "berth/dataplane/snapshot.h"

namespace berth {
namespace {

// One service of `count` backends, every one with a counter id, as berthd has after a reload.
struct Fleet {
  std::vector<ServiceState> services;
  CounterIds ids;
};

Fleet fleetOf(size_t count) {
  ServiceConfig config;
  config.name = "big";
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 655373;
  for (size_t b = 0; b < count; ++b) {
    BackendConfig backend;
    backend.name = absl::StrCat("big-", b + 1);
    backend.address =
        IpAddress::v4(198, 19, static_cast<uint8_t>(b / 256), static_cast<uint8_t>(b % 256));
    config.backends.push_back(backend);
  }
  Fleet fleet;
  absl::StatusOr<ServiceState> state = ServiceState::create(config, std::vector<bool>(count, true));
  if (!state.ok()) std::abort();
  fleet.services.push_back(*std::move(state));
  if (!fleet.ids.service("big").ok()) std::abort();
  for (const BackendConfig& backend : config.backends) {
    if (!fleet.ids.backend("big", backend.name).ok()) std::abort();
  }
  return fleet;
}

void BM_BackendRows(benchmark::State& state) {
  const Fleet fleet = fleetOf(static_cast<size_t>(state.range(0)));
  const TrafficSource traffic = [](uint32_t id, bool) {
    return TrafficTotals{100 + id, 64000 + id, id % 100};
  };
  for (auto _ : state) {
    std::vector<BackendRow> rows = backendRows(fleet.services, fleet.ids, traffic);
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BackendRows)->Arg(1000)->Arg(65535)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
