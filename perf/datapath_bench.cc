// Google Benchmark programs for per-packet work: parsing, the flow hash and the table read.
// Run through perf/run-benchmarks.sh, which reports medians of repetitions as JSON.

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "berth/dataplane/service_map.h"
#include "berth/maglev/table.h"
#include "berth/net/flow_hash.h"
#include "berth/net/packet_parser.h"
#include "support/maglev_backends.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

// Parsing one frame. Arg: 0 TCP/IPv4, 1 TCP/IPv6 with a VLAN tag, 2 an ICMP error (IPv4).
void BM_ParsePacket(benchmark::State& state) {
  const IpAddress client = IpAddress::v4(198, 18, 0, 1);
  const IpAddress vip = IpAddress::v4(198, 18, 100, 1);
  Bytes frame;
  switch (state.range(0)) {
    case 0:
      frame = concat({ethernet(kEtherTypeIpv4), ipv4(client, vip, kProtocolTcp, 20), tcp(1, 80)});
      break;
    case 1:
      frame = concat({ethernet(kEtherTypeIpv6, {100}),
                      ipv6(*IpAddress::parse("2001:db8::1"), *IpAddress::parse("2001:db8::2"),
                           kProtocolTcp, 20),
                      tcp(1, 80)});
      break;
    default:
      frame = concat({ethernet(kEtherTypeIpv4), ipv4(client, vip, kProtocolIcmp, 36), icmp(3, 4),
                      ipv4(vip, client, kProtocolTcp, 20), tcp(80, 1)});
  }
  ParsedPacket packet;
  for (auto _ : state) {
    benchmark::DoNotOptimize(frame.data());
    benchmark::DoNotOptimize(parsePacket(frame.data(), frame.size(), packet));
    benchmark::DoNotOptimize(packet);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParsePacket)->Arg(0)->Arg(1)->Arg(2);

// Per packet: flow hash of a random 5-tuple plus the table read. Arg: IP version.
void BM_FlowHashAndLookup(benchmark::State& state) {
  absl::StatusOr<Table> table = build(equalBackends(1000), 65537);
  std::mt19937 random(1);
  constexpr size_t kKeys = 4096;  // a working set that stays in cache, as a burst's keys do
  std::vector<FlowKey> keys(kKeys);
  for (FlowKey& key : keys) {
    key.family = state.range(0) == 4 ? IpFamily::kIpv4 : IpFamily::kIpv6;
    const size_t length = key.family == IpFamily::kIpv4 ? 4 : 16;
    for (size_t i = 0; i < length; ++i) {
      key.source[i] = static_cast<uint8_t>(random());
      key.destination[i] = static_cast<uint8_t>(random());
    }
    key.source_port = static_cast<uint16_t>(random());
    key.destination_port = static_cast<uint16_t>(random());
    key.protocol = kProtocolTcp;
  }
  size_t i = 0;
  for (auto _ : state) {
    const uint16_t backend =
        table->lookup(flowHash(keys[i], HashFields::kFiveTuple, kDefaultFlowHashSeed));
    benchmark::DoNotOptimize(backend);
    i = (i + 1) & (kKeys - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FlowHashAndLookup)->Arg(4)->Arg(6);

// The bare table read, for comparison with Katran's 2.2 ns.
void BM_TableLookupOnly(benchmark::State& state) {
  absl::StatusOr<Table> table = build(equalBackends(1000), 65537);
  std::mt19937 random(2);
  std::vector<uint32_t> hashes(4096);
  for (uint32_t& hash : hashes) hash = random();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(table->lookup(hashes[i]));
    i = (i + 1) & 4095;
  }
}
BENCHMARK(BM_TableLookupOnly);

// Finding a packet's service among N services (Arg), for random packets that all hit one.
void BM_ServiceLookup(benchmark::State& state) {
  ServiceMap map;
  std::vector<FlowKey> flows;
  for (int64_t i = 0; i < state.range(0); ++i) {
    const IpAddress vip = IpAddress::v4(198, 18, static_cast<uint8_t>(100 + i / 250),
                                        static_cast<uint8_t>(i % 250 + 1));
    map.insert(ServiceKey::of(FlowKey::make(kClient, vip, 0, 443, kProtocolTcp)),
               static_cast<uint32_t>(i));
    flows.push_back(
        FlowKey::make(kClient, vip, static_cast<uint16_t>(1024 + i), 443, kProtocolTcp));
  }
  std::mt19937 random(5);
  std::vector<uint32_t> order(4096);
  for (uint32_t& index : order) index = random() % flows.size();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map.find(flows[order[i]]));
    i = (i + 1) & 4095;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ServiceLookup)->Arg(1)->Arg(16)->Arg(1000);

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
