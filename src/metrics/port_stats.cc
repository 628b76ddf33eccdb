#include "berth/metrics/port_stats.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace berth {

PortRates portRates(const PortStatsReading* previous, const PortStatsReading& latest) {
  PortRates rates;
  rates.per_port.resize(latest.ports.size());
  if (previous == nullptr) return rates;
  const double seconds = absl::ToDoubleSeconds(latest.at - previous->at);
  if (!(seconds > 0)) return rates;
  rates.interval_s = seconds;
  for (size_t p = 0; p < latest.ports.size(); ++p) {
    const PortStats& now = latest.ports[p];
    const PortStats* before = nullptr;
    for (const PortStats& candidate : previous->ports) {
      if (candidate.port == now.port) before = &candidate;
    }
    if (before == nullptr) continue;
    for (size_t t = 0; t < kPortTotalCount; ++t) {
      if (now.totals[t] < before->totals[t]) continue;
      rates.per_port[p][t] = static_cast<double>(now.totals[t] - before->totals[t]) / seconds;
    }
  }
  return rates;
}

namespace {

std::string linkText(const PortLink& link) {
  if (!link.up) return "down";
  return absl::StrCat(
      "up ", link.speed_mbps == 0 ? "(speed unknown)" : absl::StrCat(link.speed_mbps, " Mbit/s"),
      link.full_duplex ? " full-duplex" : " half-duplex", link.autoneg ? " autoneg" : "");
}

void writeQueues(JsonWriter& json, const char* key, const std::vector<PortQueueCounts>& queues) {
  json.key(key).beginArray();
  for (const PortQueueCounts& queue : queues) {
    json.beginObject()
        .key("packets")
        .value(queue.packets)
        .key("bytes")
        .value(queue.bytes)
        .key("errors")
        .value(queue.errors)
        .endObject();
  }
  json.endArray();
}

}  // namespace

void writePortsJson(JsonWriter& json, const PortStatsReading& reading, const PortRates& rates,
                    absl::Time now) {
  json.key("ports_read_s_ago")
      .value(reading.at == absl::InfinitePast() ? -1.0 : absl::ToDoubleSeconds(now - reading.at));
  json.key("ports").beginArray();
  for (size_t p = 0; p < reading.ports.size(); ++p) {
    const PortStats& port = reading.ports[p];
    json.beginObject().key("port").value(port.port).key("driver").value(port.driver);
    json.key("drops_reported").value(port.drops_reported);
    if (!port.error.empty()) json.key("error").value(port.error);
    json.key("link")
        .beginObject()
        .key("up")
        .value(port.link.up)
        .key("speed_mbps")
        .value(uint64_t{port.link.speed_mbps})
        .key("full_duplex")
        .value(port.link.full_duplex)
        .key("autoneg")
        .value(port.link.autoneg)
        .endObject();
    json.key("totals").beginObject();
    for (size_t t = 0; t < kPortTotalCount; ++t) json.key(kPortTotalNames[t]).value(port.totals[t]);
    json.endObject();
    json.key("per_second").beginObject();
    for (size_t t = 0; t < kPortTotalCount; ++t) {
      json.key(kPortTotalNames[t]).value(p < rates.per_port.size() ? rates.per_port[p][t] : 0.0);
    }
    json.endObject();
    writeQueues(json, "rx_queues", port.rx_queues);
    writeQueues(json, "tx_queues", port.tx_queues);
    json.key("xstats").beginObject();
    for (const auto& [name, value] : port.xstats) json.key(name).value(value);
    json.endObject().endObject();
  }
  json.endArray();
}

std::string portsText(const PortStatsReading& reading, const PortRates& rates, absl::Time now) {
  if (reading.ports.empty()) return "";
  std::string text = absl::StrFormat(
      "ports (read %.1f s ago; rates over %.1f s):\n",
      reading.at == absl::InfinitePast() ? 0.0 : absl::ToDoubleSeconds(now - reading.at),
      rates.interval_s);
  for (size_t p = 0; p < reading.ports.size(); ++p) {
    const PortStats& port = reading.ports[p];
    absl::StrAppendFormat(&text, "  port %s (%s): link %s\n", port.port, port.driver,
                          linkText(port.link));
    if (!port.error.empty()) absl::StrAppend(&text, "    not read: ", port.error, "\n");
    for (size_t t = 0; t < kPortTotalCount; ++t) {
      if (t == kPortImissed && !port.drops_reported) {
        absl::StrAppendFormat(&text, "    %-40s not reported: %s counts no frames it drops\n",
                              kPortTotalNames[t], port.driver);
        continue;
      }
      const double rate = p < rates.per_port.size() ? rates.per_port[p][t] : 0.0;
      absl::StrAppendFormat(&text, "    %-40s %u (%.0f/s)\n", kPortTotalNames[t], port.totals[t],
                            rate);
    }
    auto queues = [&](const char* kind, const std::vector<PortQueueCounts>& counts) {
      for (size_t q = 0; q < counts.size(); ++q) {
        absl::StrAppendFormat(&text, "    %s queue %-31u packets %u bytes %u errors %u\n", kind, q,
                              counts[q].packets, counts[q].bytes, counts[q].errors);
      }
    };
    queues("rx", port.rx_queues);
    queues("tx", port.tx_queues);
    size_t zero = 0;
    for (const auto& [name, value] : port.xstats) {
      if (value == 0) {
        ++zero;
        continue;
      }
      absl::StrAppendFormat(&text, "    xstat %-34s %u\n", name, value);
    }
    if (zero > 0) absl::StrAppendFormat(&text, "    (%u xstats at 0 not shown)\n", zero);
  }
  return text;
}

struct PortStatsSampler::Pending {
  std::atomic<bool> ready{false};
  PortStatsReading reading;
};

PortStatsSampler::PortStatsSampler(Read read, absl::Duration interval)
    : read_(std::move(read)), interval_(interval) {}

PortStatsSampler::~PortStatsSampler() = default;

void PortStatsSampler::turn(absl::Time now) {
  if (pending_ != nullptr && pending_->ready.load(std::memory_order_acquire)) {
    previous_ = std::move(latest_);
    latest_ = std::make_shared<const PortStatsReading>(std::move(pending_->reading));
    pending_.reset();
  }
  if (now - started_ < interval_) return;
  if (pending_ != nullptr) {
    ++late_;
    return;
  }
  auto pending = std::make_shared<Pending>();
  const bool posted = thread_.post([this, pending] {
    const absl::Time start = absl::Now();
    pending->reading = read_();
    pending->reading.at = start;
    pending->reading.took = absl::Now() - start;
    pending->ready.store(true, std::memory_order_release);
  });
  if (!posted) return;
  pending_ = std::move(pending);
  started_ = now;
}

PortRates PortStatsSampler::rates() const {
  if (latest_ == nullptr) return PortRates();
  return portRates(previous_.get(), *latest_);
}

}  // namespace berth
