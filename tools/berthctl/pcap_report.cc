#include "pcap_report.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/maglev/table.h"
#include "berth/net/flow_hash.h"
#include "berth/net/packet_parser.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

constexpr uint32_t kHashBins = 1024;

// The 37 bytes that name a flow, as a map key.
std::string flowId(const FlowKey& flow) {
  std::string id(reinterpret_cast<const char*>(flow.source.data()), 16);
  id.append(reinterpret_cast<const char*>(flow.destination.data()), 16);
  id.append(reinterpret_cast<const char*>(&flow.source_port), 2);
  id.append(reinterpret_cast<const char*>(&flow.destination_port), 2);
  id.push_back(static_cast<char>(flow.protocol));
  return id;
}

struct ChiSquared {
  double statistic = 0;
  uint32_t degrees = 0;
  double p_value = 1;
};

// Pearson's test of `observed` against `expected` counts (equal length, expected > 0).
ChiSquared chiSquared(const std::vector<double>& observed, const std::vector<double>& expected) {
  ChiSquared result;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double difference = observed[i] - expected[i];
    result.statistic += difference * difference / expected[i];
  }
  if (observed.size() < 2) return result;
  result.degrees = static_cast<uint32_t>(observed.size() - 1);
  const boost::math::chi_squared distribution(result.degrees);
  result.p_value = boost::math::cdf(boost::math::complement(distribution, result.statistic));
  return result;
}

struct ServiceFlows {
  const ServiceConfig* service = nullptr;
  Table table;
  absl::flat_hash_map<std::string, uint32_t> flow_index;  // flowId -> index into the vectors
  std::vector<uint32_t> hashes;
  std::vector<uint64_t> packets;
};

void closePcap(pcap_t* handle) { pcap_close(handle); }

struct CaptureCounts {
  uint64_t frames = 0;
  uint64_t skipped = 0;  // not IP, later fragments, ICMP errors, or to no service reported
};

// The service `flow` is addressed to, of those reported; null for none.
ServiceFlows* ownerOf(std::vector<ServiceFlows>& services, const FlowKey& flow, uint16_t port) {
  for (ServiceFlows& candidate : services) {
    const ServiceConfig& service = *candidate.service;
    if (service.vip.family == flow.family && service.vip.bytes == flow.destination &&
        service.port == port &&
        static_cast<uint8_t>(service.protocol == Protocol::kTcp ? 6 : 17) == flow.protocol) {
      return &candidate;
    }
  }
  return nullptr;
}

// Every frame of `capture` counted into the flows of the service it is addressed to.
absl::StatusOr<CaptureCounts> readCapture(const std::string& capture,
                                          std::vector<ServiceFlows>& services) {
  char error[PCAP_ERRBUF_SIZE] = {};
  std::unique_ptr<pcap_t, void (*)(pcap_t*)> handle(pcap_open_offline(capture.c_str(), error),
                                                    closePcap);
  if (handle == nullptr) return absl::InvalidArgumentError(absl::StrCat("--pcap: ", error));
  if (pcap_datalink(handle.get()) != DLT_EN10MB) {
    return absl::InvalidArgumentError(absl::StrCat("--pcap: ", capture,
                                                   " is not an Ethernet capture (link type ",
                                                   pcap_datalink(handle.get()), ")"));
  }
  CaptureCounts counts;
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  int next;
  while ((next = pcap_next_ex(handle.get(), &header, &data)) == 1) {
    ++counts.frames;
    ParsedPacket packet;
    if (parsePacket(data, header->caplen, packet) != ParseError::kNone ||
        packet.type != FrameType::kIp || packet.later_fragment || packet.icmp_error) {
      ++counts.skipped;
      continue;
    }
    const FlowKey& flow = packet.flow;
    const uint16_t port =
        static_cast<uint16_t>((flow.destination_port >> 8) | (flow.destination_port << 8));
    ServiceFlows* owner = ownerOf(services, flow, port);
    if (owner == nullptr) {
      ++counts.skipped;
      continue;
    }
    const auto [it, inserted] =
        owner->flow_index.try_emplace(flowId(flow), static_cast<uint32_t>(owner->hashes.size()));
    if (inserted) {
      owner->hashes.push_back(flowHash(flow, owner->service->hash_fields, kDefaultFlowHashSeed));
      owner->packets.push_back(0);
    }
    ++owner->packets[it->second];
  }
  if (next == -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pcap: ", capture, ": ", pcap_geterr(handle.get())));
  }
  return counts;
}

// One service's flows and packets per backend against its weights, and its flow hashes over
// equal bins of the hash space.
struct ServiceTally {
  std::vector<double> flows;
  std::vector<double> packets;
  double total_flows = 0;
  double total_packets = 0;
  double serving_weight = 0;
  ChiSquared over_backends;
  ChiSquared over_bins;
  bool bins_valid = false;  // enough flows for Pearson's test over the bins
};

ServiceTally tallyService(const ServiceFlows& entry) {
  const Table& table = entry.table;
  const size_t backend_count = table.backends().size();
  ServiceTally tally;
  std::vector<double>& flows = tally.flows;
  std::vector<double>& packets = tally.packets;
  flows.assign(backend_count, 0);
  packets.assign(backend_count, 0);
  std::vector<double> bins(kHashBins, 0);
  for (size_t f = 0; f < entry.hashes.size(); ++f) {
    const uint16_t backend = table.lookup(entry.hashes[f]);
    if (backend != kNoBackend) {
      ++flows[backend];
      packets[backend] += static_cast<double>(entry.packets[f]);
    }
    // The top bits: equal bins of the hash space.
    ++bins[entry.hashes[f] >> 22];
  }
  const double total_flows = tally.total_flows = static_cast<double>(entry.hashes.size());
  for (double count : packets) tally.total_packets += count;
  double& serving_weight = tally.serving_weight;
  for (size_t b = 0; b < backend_count; ++b) {
    if (table.serves(b)) serving_weight += static_cast<double>(table.backends()[b].weight);
  }
  std::vector<double> observed;
  std::vector<double> expected;
  for (size_t b = 0; b < backend_count; ++b) {
    if (!table.serves(b)) continue;
    observed.push_back(flows[b]);
    expected.push_back(total_flows * static_cast<double>(table.backends()[b].weight) /
                       serving_weight);
  }
  const bool enough = total_flows > 0;
  tally.over_backends = enough ? chiSquared(observed, expected) : ChiSquared{};
  tally.over_bins = enough
                        ? chiSquared(bins, std::vector<double>(kHashBins, total_flows / kHashBins))
                        : ChiSquared{};
  // Pearson's test wants about 5 expected per cell; say so where a capture is smaller.
  tally.bins_valid = total_flows >= 5.0 * kHashBins;
  return tally;
}

// One service's part of the report: its JSON object, and its lines appended to `out`.
void reportService(const ServiceFlows& entry, JsonWriter& json, std::string& out) {
  const ServiceConfig& service = *entry.service;
  const Table& table = entry.table;
  const size_t backend_count = table.backends().size();
  const ServiceTally tally = tallyService(entry);
  const std::vector<double>& flows = tally.flows;
  const std::vector<double>& packets = tally.packets;
  const double total_flows = tally.total_flows;
  const double total_packets = tally.total_packets;
  const double serving_weight = tally.serving_weight;
  const ChiSquared& over_backends = tally.over_backends;
  const ChiSquared& over_bins = tally.over_bins;
  const bool bins_valid = tally.bins_valid;
  json.beginObject()
      .key("service")
      .value(service.name)
      .key("hash_fields")
      .value(toString(service.hash_fields))
      .key("flows")
      .value(static_cast<uint64_t>(total_flows))
      .key("packets")
      .value(static_cast<uint64_t>(total_packets))
      .key("backends")
      .beginArray();
  absl::StrAppendFormat(&out, "service %s (%s), hashing %s: %.0f flows, %.0f packets\n",
                        service.name, service.listener(), toString(service.hash_fields),
                        total_flows, total_packets);
  for (size_t b = 0; b < backend_count; ++b) {
    const double weight_share =
        table.serves(b) ? static_cast<double>(table.backends()[b].weight) / serving_weight : 0;
    const double flow_share = total_flows > 0 ? flows[b] / total_flows : 0;
    const double packet_share = total_packets > 0 ? packets[b] / total_packets : 0;
    json.beginObject()
        .key("name")
        .value(table.backends()[b].name)
        .key("weight_share")
        .value(weight_share)
        .key("flows")
        .value(static_cast<uint64_t>(flows[b]))
        .key("flow_share")
        .value(flow_share)
        .key("packets")
        .value(static_cast<uint64_t>(packets[b]))
        .key("packet_share")
        .value(packet_share)
        .endObject();
    absl::StrAppendFormat(&out,
                          "  %-24s weight %6.2f%%  flows %8.0f (%6.2f%%)  packets %10.0f "
                          "(%6.2f%%)%s\n",
                          table.backends()[b].name, 100 * weight_share, flows[b], 100 * flow_share,
                          packets[b], 100 * packet_share, table.serves(b) ? "" : "  (drained)");
  }
  json.endArray();
  auto test = [&](const char* key, const ChiSquared& result) {
    json.key(key)
        .beginObject()
        .key("chi_squared")
        .value(result.statistic)
        .key("degrees_of_freedom")
        .value(result.degrees)
        .key("p_value")
        .value(result.p_value)
        .endObject();
  };
  test("flows_over_backends", over_backends);
  test("hashes_over_bins", over_bins);
  json.key("bins_test_has_enough_flows").value(bins_valid);
  // Bounded load moves new flows by the loads of the moment, which a capture does not hold.
  json.key("bounded_load_modelled").value(false).endObject();
  if (service.bounded_load > 0) {
    absl::StrAppendFormat(&out,
                          "  bounded_load %.2f is not modelled: each flow is counted at the "
                          "table's pick, where berthd may have sent it past a backend at its "
                          "bound\n",
                          service.bounded_load);
  }
  absl::StrAppendFormat(&out,
                        "  flows over backends against weights: chi-squared %.1f, %u degrees "
                        "of freedom, p = %.4f\n"
                        "  flow hashes over %u bins: chi-squared %.1f, %u degrees of freedom, "
                        "p = %.4f%s\n",
                        over_backends.statistic, over_backends.degrees, over_backends.p_value,
                        kHashBins, over_bins.statistic, over_bins.degrees, over_bins.p_value,
                        bins_valid ? "" : " (fewer than 5 flows a bin: a rough figure)");
}

}  // namespace

absl::StatusOr<std::string> pcapReport(const Config& config, const std::string& capture,
                                       const OfflineOptions& options) {
  std::vector<ServiceFlows> services;
  for (const ServiceConfig& service : config.services) {
    if (!options.service.empty() && service.name != options.service) continue;
    BERTH_ASSIGN_OR_RETURN(Table table, buildServingTable(service));
    services.push_back({&service, std::move(table), {}, {}, {}});
  }
  if (services.empty()) {
    return absl::NotFoundError(absl::StrCat("no service named '", options.service, "'"));
  }
  BERTH_ASSIGN_OR_RETURN(const CaptureCounts counts, readCapture(capture, services));
  JsonWriter json;
  json.beginObject().key("capture").value(capture).key("frames").value(counts.frames);
  json.key("skipped").value(counts.skipped).key("services").beginArray();
  std::string out = absl::StrFormat("capture %s: %u frames, %u not to a configured service\n",
                                    capture, counts.frames, counts.skipped);
  for (const ServiceFlows& entry : services) reportService(entry, json, out);
  json.endArray().endObject();
  return options.json ? json.str() + "\n" : out;
}

}  // namespace berth
