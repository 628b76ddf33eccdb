#pragma once

#include <cstdint>
#include <vector>

#include "berth/dataplane/conntrack.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/pipeline.h"

namespace berth {

// The fixed secret of TestWorker's connection table; peer flows built under it are found from the
// bucket hash, as the workers' are (WorkerSetup::connection_hash_key).
inline constexpr ConnectionHashKey kTestWorkerHashKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9,
                                                       0x94d049bb133111eb, 0x2545f4914f6cdd1d,
                                                       0xd6e8feb86659fd93, 0xa0761d6478bd642f}};

// One worker's state as tests drive the pipeline with it: its counters, a connection table of
// `entries` under a fixed hash key, per-service and per-backend traffic counters, and, with
// `shared` loads, its view of them for bounded-load services. Everything a WorkerState points
// to lives here, so the struct stays where it was made.
struct TestWorker {
  explicit TestWorker(const BackendLoads* shared = nullptr, uint32_t entries = 1 << 16)
      : buckets(ConnectionTable::bucketsFor(entries)),
        table(buckets.data(), buckets.size(), ConntrackTimeouts{}, 0, &counters.conntrack,
              kTestWorkerHashKey),
        services(CounterIds::kMaxServices),
        backends(CounterIds::kMaxBackends),
        loads(shared) {
    state.counters = &counters;
    state.traffic = {services.data(), backends.data()};
    state.conntrack = &table;
    state.now_ms = 1'000;
    if (shared != nullptr) state.loads = &loads;
    table.countConnectionsIn(state.traffic);
  }
  TestWorker(const TestWorker&) = delete;
  TestWorker& operator=(const TestWorker&) = delete;

  WorkerCounters counters;
  std::vector<ConnectionBucket> buckets;
  ConnectionTable table;
  std::vector<TrafficCounter> services;
  std::vector<TrafficCounter> backends;
  WorkerLoads loads;
  WorkerState state;
};

}  // namespace berth
