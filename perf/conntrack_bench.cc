// The per-core connection table at datapath sizes, looked up as the datapath does: in bursts of
// 32, every bucket prefetched before the first lookup. At 1M connections the table (32 MiB) is
// larger than L3, so a lone lookup is a DRAM miss; the burst overlaps them.
//
// Flows are random IPv4 5-tuples; each lookup computes its bucket's keyed hash, as the datapath
// does. Run through perf/run-benchmarks.sh.

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "berth/dataplane/conntrack.h"
#include "berth/net/flow_hash.h"

namespace berth {
namespace {

constexpr size_t kBurst = 32;
constexpr uint16_t kService = 1;

struct Flow {
  ConnectionKey key;
};

std::vector<Flow> randomFlows(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<Flow> flows(count);
  for (Flow& flow : flows) {
    const uint32_t client = random();
    const FlowKey key = FlowKey::make(
        IpAddress::v4(static_cast<uint8_t>(client >> 24), static_cast<uint8_t>(client >> 16),
                      static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)),
        IpAddress::v4(198, 18, 100, 1), static_cast<uint16_t>(random()), 80, kProtocolTcp);
    flow.key = ConnectionKey::of(key, HashFields::kFiveTuple, kService);
  }
  return flows;
}

struct Fixture {
  explicit Fixture(uint32_t entries)
      : buckets(ConnectionTable::bucketsFor(entries)),
        table(buckets.data(), buckets.size(), ConntrackTimeouts{}, 0, &counters, secret()) {}
  static ConnectionHashKey secret() {
    std::mt19937_64 random(7);
    ConnectionHashKey key;
    for (uint64_t& multiplier : key.multipliers) multiplier = random();
    return key;
  }
  uint32_t hashOf(const Flow& flow) const { return table.bucketHash(flow.key); }
  std::vector<ConnectionBucket> buckets;
  ConntrackCounters counters;
  ConnectionTable table;
};

// Lookups of connections the table holds, in random order. Arg: table capacity.
void BM_ConntrackHit(benchmark::State& state) {
  const auto entries = static_cast<uint32_t>(state.range(0));
  Fixture fixture(entries);
  std::vector<Flow> flows = randomFlows(entries, 1);
  for (const Flow& flow : flows) {
    fixture.table.insert(flow.key, fixture.hashOf(flow), 1, ConnectionState::kTcpEstablished, 0);
  }
  // A full 4-way table keeps about nine in ten of as many random flows: look up those it kept.
  std::erase_if(flows, [&](const Flow& flow) {
    return fixture.table.find(flow.key, fixture.hashOf(flow), 1) == nullptr;
  });
  std::shuffle(flows.begin(), flows.end(), std::mt19937(2));
  const size_t bursts = flows.size() / kBurst;
  size_t burst = 0;
  uint64_t found = 0;
  for (auto _ : state) {
    const Flow* batch = &flows[burst * kBurst];
    uint32_t hashes[kBurst];
    for (size_t i = 0; i < kBurst; ++i) {
      hashes[i] = fixture.hashOf(batch[i]);
      fixture.table.prefetch(hashes[i]);
    }
    for (size_t i = 0; i < kBurst; ++i) {
      Connection* connection = fixture.table.find(batch[i].key, hashes[i], 2);
      found += connection != nullptr;
      benchmark::DoNotOptimize(connection);
    }
    burst = burst + 1 == bursts ? 0 : burst + 1;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["hit_share"] =
      static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
  state.counters["kept_share"] = static_cast<double>(flows.size()) / entries;
  state.counters["bytes_per_entry"] =
      static_cast<double>(sizeof(ConnectionBucket) * fixture.buckets.size()) / entries;
  state.counters["table_mib"] =
      static_cast<double>(sizeof(ConnectionBucket) * fixture.buckets.size()) / (1 << 20);
}
BENCHMARK(BM_ConntrackHit)->Arg(1 << 20)->Arg(8 << 20)->Unit(benchmark::kNanosecond);

// A new flow: the lookup misses and the connection is inserted, into a table already full of
// other connections, so most inserts evict. Arg: table capacity.
void BM_ConntrackMissAndInsert(benchmark::State& state) {
  const auto entries = static_cast<uint32_t>(state.range(0));
  Fixture fixture(entries);
  for (const Flow& flow : randomFlows(entries, 1)) {
    fixture.table.insert(flow.key, fixture.hashOf(flow), 1, ConnectionState::kTcpEstablished, 0);
  }
  const std::vector<Flow> fresh = randomFlows(size_t{1} << 22, 3);
  const size_t bursts = fresh.size() / kBurst;
  size_t burst = 0;
  uint32_t now = 1;
  for (auto _ : state) {
    const Flow* batch = &fresh[burst * kBurst];
    uint32_t hashes[kBurst];
    for (size_t i = 0; i < kBurst; ++i) {
      hashes[i] = fixture.hashOf(batch[i]);
      fixture.table.prefetch(hashes[i]);
    }
    for (size_t i = 0; i < kBurst; ++i) {
      Connection* connection = fixture.table.find(batch[i].key, hashes[i], now);
      if (connection == nullptr) {
        connection =
            fixture.table.insert(batch[i].key, hashes[i], 2, ConnectionState::kTcpOpening, now);
      }
      benchmark::DoNotOptimize(connection);
    }
    // After one pass the fresh flows are in the table; later passes are a fresh set again, as the
    // time steps past their opening timeout.
    if (++burst == bursts) {
      burst = 0;
      now += 10'000;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ConntrackMissAndInsert)->Arg(1 << 20)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
