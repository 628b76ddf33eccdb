// Google Benchmark programs for the Maglev table and the flow hash. Run through
// perf/run-benchmarks.sh, which reports medians of repetitions as JSON.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/table.h"
#include "berth/util/heap.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

// Full build of the all-healthy table. Args: N, M.
void BM_TableBuild(benchmark::State& state) {
  const std::vector<Backend> backends = equalBackends(state.range(0));
  const auto table_size = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<Table> table = build(backends, table_size);
    benchmark::DoNotOptimize(table);
  }
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_TableBuild)
    ->ArgsProduct({{10, 100, 1000}, {65537, 655373}})
    ->Unit(benchmark::kMillisecond);

// The ring (160 virtual nodes per backend) built and sampled into the M-slot table the datapath
// reads. Args: N, M.
void BM_RingBuild(benchmark::State& state) {
  const std::vector<Backend> backends = equalBackends(state.range(0));
  const auto table_size = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<HashRing> ring = HashRing::build(backends);
    std::vector<uint16_t> entries = ring->slotTable(table_size);
    benchmark::DoNotOptimize(entries.data());
  }
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_RingBuild)->ArgsProduct({{100, 1000}, {65537}})->Unit(benchmark::kMillisecond);

// Rendezvous precomputed into the M-slot table: M x N draws, with equal weights (no logarithm)
// and with unequal ones. Args: N, M, weighted.
void BM_RendezvousBuild(benchmark::State& state) {
  std::vector<Backend> backends = equalBackends(state.range(0));
  if (state.range(2) != 0) {
    for (size_t i = 0; i < backends.size(); ++i)
      backends[i].weight = 1 + static_cast<int64_t>(i % 3);
  }
  const auto table_size = static_cast<uint32_t>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<Rendezvous> rendezvous = Rendezvous::build(backends);
    std::vector<uint16_t> entries = rendezvous->slotTable(table_size);
    benchmark::DoNotOptimize(entries.data());
  }
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_RendezvousBuild)
    ->ArgsProduct({{100, 1000}, {65537}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// The paper's population loop as Katran and Envoy write it: one probe at a time, every backend
// a turn per round until the table is full.
std::vector<int32_t> buildTextbook(const std::vector<Permutation>& permutations,
                                   uint32_t table_size) {
  std::vector<uint32_t> next(permutations.size());
  for (size_t i = 0; i < next.size(); ++i) next[i] = permutations[i].offset;
  std::vector<int32_t> entries(table_size, -1);
  uint32_t filled = 0;
  while (filled < table_size) {
    for (size_t i = 0; i < permutations.size() && filled < table_size; ++i) {
      uint32_t slot = next[i];
      while (entries[slot] >= 0) slot = (slot + permutations[i].skip) % table_size;
      entries[slot] = static_cast<int32_t>(i);
      next[i] = (slot + permutations[i].skip) % table_size;
      ++filled;
    }
  }
  return entries;
}

std::vector<Permutation> permutationsOf(const std::vector<Backend>& backends, uint32_t table_size) {
  std::vector<Permutation> permutations;
  for (const Backend& backend : backends) {
    permutations.push_back(permutationFor(backend.name, table_size));
  }
  return permutations;
}

// The textbook loop alone: the baseline that berth's build is compared with. Args: N, M.
void BM_TableBuildTextbook(benchmark::State& state) {
  const auto table_size = static_cast<uint32_t>(state.range(1));
  const std::vector<Permutation> permutations =
      permutationsOf(equalBackends(state.range(0)), table_size);
  for (auto _ : state) {
    std::vector<int32_t> entries = buildTextbook(permutations, table_size);
    benchmark::DoNotOptimize(entries.data());
  }
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_TableBuildTextbook)
    ->ArgsProduct({{1000}, {65537, 655373}})
    ->Unit(benchmark::kMillisecond);

// berth's build against the textbook loop, build by build in turn (the order alternating), so that
// a neighbour's load on a shared machine weighs on both alike: BM_TableBuild and
// BM_TableBuildTextbook run seconds apart drifted by a third between runs. Reports the medians of
// each one's time and of the per-pair ratios (speedup: textbook time / berth's). Both start from
// the backends' permutations; berth's build also sorts the backends by name and checks them, as a
// reload does. Args: N, M.
void BM_TableBuildSpeedup(benchmark::State& state) {
  const std::vector<Backend> backends = equalBackends(state.range(0));
  const auto table_size = static_cast<uint32_t>(state.range(1));
  const std::vector<Permutation> permutations = permutationsOf(backends, table_size);
  std::vector<double> berth_ms;
  std::vector<double> textbook_ms;
  std::vector<double> speedups;
  auto elapsedMs = [](auto start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (auto _ : state) {
    double times[2];
    for (int turn = 0; turn < 2; ++turn) {
      const bool textbook = (turn == 0) == (speedups.size() % 2 == 0);
      const auto start = std::chrono::steady_clock::now();
      if (textbook) {
        std::vector<int32_t> entries = buildTextbook(permutations, table_size);
        benchmark::DoNotOptimize(entries.data());
      } else {
        absl::StatusOr<Table> table = buildWithPermutations(backends, permutations, table_size);
        benchmark::DoNotOptimize(table);
      }
      times[textbook ? 1 : 0] = elapsedMs(start);
    }
    berth_ms.push_back(times[0]);
    textbook_ms.push_back(times[1]);
    speedups.push_back(times[1] / times[0]);
  }
  auto median = [](std::vector<double> values) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
  };
  state.counters["berth_ms"] = median(berth_ms);
  state.counters["textbook_ms"] = median(textbook_ms);
  state.counters["speedup"] = median(speedups);
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_TableBuildSpeedup)
    ->ArgsProduct({{1000}, {65537, 655373}})
    ->Iterations(41)
    ->Unit(benchmark::kMillisecond);

// Times withHealth() with one backend down, from the cached all-healthy table. The failed
// backend rotates, so no single backend's luck decides the figure.
void timeOneFailureAtATime(benchmark::State& state, const Table& full) {
  std::vector<bool> healthy(full.backends().size(), true);
  size_t failed = 0;
  for (auto _ : state) {
    healthy[failed] = false;
    absl::StatusOr<Table> failover = withHealth(full, healthy);
    benchmark::DoNotOptimize(failover);
    healthy[failed] = true;
    failed = (failed + 1) % healthy.size();
  }
}

// withHealth() for one failed backend, from the cached all-healthy table. Args: N, M.
void BM_FailoverOneBackend(benchmark::State& state) {
  const auto table_size = static_cast<uint32_t>(state.range(1));
  absl::StatusOr<Table> full = build(equalBackends(state.range(0)), table_size);
  if (!full.ok()) {
    state.SkipWithError(std::string(full.status().message()).c_str());
    return;
  }
  timeOneFailureAtATime(state, *full);
  state.counters["N"] = static_cast<double>(state.range(0));
  state.counters["M"] = table_size;
}
BENCHMARK(BM_FailoverOneBackend)
    ->ArgsProduct({{100, 1000}, {65537, 655373}})
    ->Unit(benchmark::kMillisecond);

// withHealth() for one failed backend of a ring or rendezvous table (1 ring, 2 rendezvous,
// weighted 1..4 for rendezvous so that the logarithm is taken): only the vacated slots are
// recomputed. Args: algorithm, N.
void BM_FailoverByAlgorithm(benchmark::State& state) {
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  std::vector<Backend> backends = equalBackends(state.range(1));
  if (algorithm == Algorithm::kRendezvous) {
    for (size_t i = 0; i < backends.size(); ++i)
      backends[i].weight = 1 + static_cast<int64_t>(i % 4);
  }
  absl::StatusOr<Table> full = buildTable(backends, {.algorithm = algorithm, .table_size = 65537});
  if (!full.ok()) {
    state.SkipWithError(std::string(full.status().message()).c_str());
    return;
  }
  state.SetLabel(std::string(toString(algorithm)));
  timeOneFailureAtATime(state, *full);
  state.counters["N"] = static_cast<double>(state.range(1));
}
BENCHMARK(BM_FailoverByAlgorithm)
    ->ArgsProduct({{1, 2}, {100, 1000}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  berth::retainFreedHeapMemory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
