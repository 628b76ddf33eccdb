#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/pipeline.h"
#include "berth/net/flow_hash.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_worker.h"

namespace berth {

// The pipeline with one worker's connection table, driven by the tests of the pipeline with
// conntrack and with flow sync: a TCP service "web" on 198.18.100.1:80 whose backends web-N are
// at 198.18.N.2.

inline const MacAddress kPortMac =
    *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's destination

// The config with backends web-1 .. web-N, each given weight; `drain` sets the service's policy.
inline std::string configWith(const std::map<int, int>& weights, const std::string& drain = "") {
  std::string yaml = R"(
dataplane:
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
)";
  if (!drain.empty()) absl::StrAppend(&yaml, "    drain: ", drain, "\n");
  absl::StrAppend(&yaml, "    backends:\n");
  for (const auto& [number, weight] : weights) {
    absl::StrAppend(&yaml, "      - { name: web-", number, ", address: 198.18.", number,
                    ".2, weight: ", weight, " }\n");
  }
  return yaml;
}

// A worker's state with its own connection table; snapshots are built against one CounterIds,
// as the management thread keeps it across rebuilds.
class ConntrackHarness {
  // First, so that `state` below can refer to the worker's.
  BackendLoads loads_;
  TestWorker worker_{&loads_};

 public:
  // What the management thread publishes: `active` flows on each named backend of "web" from
  // every worker, this one's included, and their total over the serving ones.
  void publishLoads(const std::map<std::string, uint32_t>& active) {
    uint32_t total = 0;
    for (const auto& [name, count] : active) {
      loads_.active[*ids_.findBackend("web", name)] = count;
      total += count;
    }
    loads_.serving_total[*ids_.findService("web")] = total;
    loads_.generation.fetch_add(1);
  }

  // A snapshot of `yaml`, with the named backends unhealthy.
  void use(const std::string& yaml, const std::vector<std::string>& unhealthy = {}) {
    absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    tables_ = *buildServiceTables(config_);
    if (!unhealthy.empty()) {
      std::vector<bool> healthy(tables_[0].backends().size(), true);
      for (const std::string& name : unhealthy) healthy[*tables_[0].indexOf(name)] = false;
      tables_[0] = *withHealth(tables_[0], healthy);
    }
    const MacAddress macs[] = {kPortMac};
    snapshot_ = *buildSnapshot(config_, tables_, macs, {}, ids_, ++generation_);
  }

  // The backend address a TCP packet from source port `port` with `flags` went to, or "" if
  // dropped.
  std::string send(uint16_t port, uint8_t flags = kTcpAck) {
    return sendFrom(kClient, port, flags);
  }
  std::string sendFrom(const IpAddress& client, uint16_t port, uint8_t flags) {
    Bytes frame =
        concat({ethernet(kEtherTypeIpv4), ipv4(client, kVip, kProtocolTcp, 20), tcp(port, 80)});
    frame[14 + 20 + 13] = flags;
    return deliver(frame);
  }

  std::string deliver(const Bytes& frame) {
    ReceivedFrame received(frame);
    if (processFrame(*snapshot_, 0, received.frame, state) != Verdict::kTransmit) return "";
    const Bytes sent = received.sent();
    IpAddress outer;
    std::copy(sent.begin() + 30, sent.begin() + 34, outer.bytes.begin());
    return outer.toString();
  }

  // Where the Maglev table alone sends port `port`'s flow in the current snapshot.
  std::string tablePick(uint16_t port) {
    const FlowKey flow = FlowKey::make(kClient, kVip, port, 80, kProtocolTcp);
    const Table& table = snapshot_->service(0).table;
    const uint16_t pick =
        table.lookup(flowHash(flow, HashFields::kFiveTuple, kDefaultFlowHashSeed));
    return snapshot_->backend(snapshot_->service(0).first_backend + pick).address.toString();
  }

  // Where berthctl explain says port `port`'s next packet goes: from the snapshot and this
  // worker's entry for the flow, as berthd puts them together.
  std::string explain(uint16_t port) {
    const FlowKey flow = FlowKey::make(kClient, kVip, port, 80, kProtocolTcp);
    std::optional<TrackedConnection> tracked;
    const std::optional<uint32_t> service = snapshot_->findService(flow);
    if (service) {
      const Connection* entry = worker_.table.peek(connectionKeyOf(*snapshot_, *service, flow));
      if (entry != nullptr) {
        tracked = TrackedConnection{0, *entry, worker_.table.expired(*entry, state.now_ms),
                                    state.now_ms - entry->last_seen_ms, std::nullopt};
      }
    }
    const FlowExplanation explanation = explainFlow(*snapshot_, flow, tracked, true, &loads_);
    last_explanation_ = explanation.reason;
    if (explanation.next_backend == kNoBackendIndex) return "";
    return snapshot_->backend(explanation.next_backend).address.toString();
  }

  uint64_t count(ConntrackEvent event) const {
    return worker_.counters.conntrack.values[static_cast<size_t>(event)].read();
  }

  // The connections this worker's table holds for a backend of "web", and for the service.
  uint64_t connectionsOf(const std::string& backend) const {
    return worker_.backends[*ids_.findBackend("web", backend)].connections.read();
  }
  uint64_t serviceConnections() const {
    return worker_.services[*ids_.findService("web")].connections.read();
  }

  const CounterIds& ids() const { return ids_; }
  const Snapshot& snapshot() const { return *snapshot_; }
  ConnectionTable& table() { return worker_.table; }

  WorkerState& state = worker_.state;
  std::string last_explanation_;

 private:
  CounterIds ids_;
  Config config_;
  std::vector<Table> tables_;
  std::unique_ptr<const Snapshot> snapshot_;
  uint64_t generation_ = 0;
};

}  // namespace berth
