// berth's two ways to write JSON, on the document where writing speed matters most: the
// `backends` reply, one object per backend (docs/architecture.md, "The management loop": 65,535
// backends make 22 MB). util/json_writer.h streams straight into one string; nlohmann builds a
// tree and dumps it, which is how the fleet writes etcd's requests and its stored records. Run
// with --benchmark_format=json for machine-readable figures; items are backend rows.

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

struct Row {
  std::string service;
  std::string name;
  std::string address;
  std::string health;
  uint64_t weight;
  uint64_t slots;
  uint64_t packets;
  uint64_t bytes;
  uint64_t connections;
  double share;
};

std::vector<Row> rows(size_t count) {
  std::vector<Row> made;
  made.reserve(count);
  for (size_t b = 0; b < count; ++b) {
    made.push_back({"web", absl::StrCat("web-", b), absl::StrCat("198.18.", b / 250, ".", b % 250),
                    b % 7 == 0 ? "unhealthy" : "healthy", 1 + b % 3, 65537 / count, b * 1000,
                    b * 64000, b % 100, 1.0 / static_cast<double>(count)});
  }
  return made;
}

void BM_JsonWriter(benchmark::State& state) {
  const std::vector<Row> backends = rows(static_cast<size_t>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    JsonWriter json;
    json.beginObject().key("ok").value(true).key("backends").beginArray();
    for (const Row& row : backends) {
      json.beginObject()
          .key("service")
          .value(row.service)
          .key("name")
          .value(row.name)
          .key("address")
          .value(row.address)
          .key("health")
          .value(row.health)
          .key("weight")
          .value(row.weight)
          .key("slots")
          .value(row.slots)
          .key("packets")
          .value(row.packets)
          .key("bytes")
          .value(row.bytes)
          .key("connections")
          .value(row.connections)
          .key("share")
          .value(row.share)
          .endObject();
    }
    json.endArray().endObject();
    bytes = json.str().size();
    benchmark::DoNotOptimize(json.str().data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * backends.size()));
  state.counters["bytes"] = static_cast<double>(bytes);
}

void BM_NlohmannDump(benchmark::State& state) {
  const std::vector<Row> backends = rows(static_cast<size_t>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    nlohmann::json list = nlohmann::json::array();
    for (const Row& row : backends) {
      list.push_back({{"service", row.service},
                      {"name", row.name},
                      {"address", row.address},
                      {"health", row.health},
                      {"weight", row.weight},
                      {"slots", row.slots},
                      {"packets", row.packets},
                      {"bytes", row.bytes},
                      {"connections", row.connections},
                      {"share", row.share}});
    }
    const std::string text = nlohmann::json{{"ok", true}, {"backends", std::move(list)}}.dump();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * backends.size()));
  state.counters["bytes"] = static_cast<double>(bytes);
}

BENCHMARK(BM_JsonWriter)->Arg(1000)->Arg(65535)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NlohmannDump)->Arg(1000)->Arg(65535)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
