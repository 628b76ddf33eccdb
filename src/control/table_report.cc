#include "berth/control/table_report.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/control/service_state.h"
#include "berth/maglev/analysis.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

// The parts of each form, in order.
enum JsonPart { kJsonHeader, kJsonBackends, kJsonEntries, kJsonDone };
enum TextPart { kTextHeader, kTextBackends, kTextSlots, kTextDone };

}  // namespace

std::string weightText(int64_t configured, int64_t effective, bool unhealthy, bool drained) {
  // A drain is the operator's word and outlasts health, as `backends` shows it.
  return absl::StrCat("weight ", configured, ", in use ", effective,
                      drained     ? " (drained)"
                      : unhealthy ? " (unhealthy)"
                                  : "");
}

TableRenderer::TableRenderer(const ServiceConfig& service, Table table, std::string note,
                             bool summary)
    : table_(std::move(table)), counts_(table_.slotCounts()), summary_(summary) {
  // Addresses by name once, not by a search per backend: a service may have 65,535 backends.
  absl::flat_hash_map<absl::string_view, const BackendConfig*> by_name;
  for (const BackendConfig& backend : service.backends) by_name.emplace(backend.name, &backend);
  addresses_.reserve(table_.backends().size());
  weights_.reserve(table_.backends().size());
  for (const Backend& backend : table_.backends()) {
    const auto found = by_name.find(backend.name);
    addresses_.push_back(found == by_name.end() ? "" : found->second->address.toString());
    weights_.push_back(found == by_name.end() ? backend.weight : found->second->weight);
  }
  const std::string fingerprint = fingerprintText(serviceFingerprint(service, table_));
  JsonWriter json;
  json.beginObject().key("service").value(service.name).key("table_size").value(table_.size());
  json.key("listener").value(service.listener());
  json.key("forwarding").value(toString(service.forwarding));
  json.key("algorithm").value(toString(table_.algorithm()));
  json.key("fingerprint").value(fingerprint);
  json.key("hash_fields").value(toString(service.hash_fields));
  json.key("backends").beginArray();
  header_json_ = json.str();
  header_text_ = absl::StrFormat(
      "service %s (%s): %s, M=%u, %u backends%s, fingerprint %s\nbackend slots per backend:\n",
      service.name, service.listener(), toString(table_.algorithm()), table_.size(),
      table_.backends().size(), note, fingerprint);
  text_backends_.resize(table_.backends().size());
  for (size_t b = 0; b < text_backends_.size(); ++b) text_backends_[b] = b;
  if (!summary_) return;
  const BalanceStats balance = balanceOf(table_);
  header_text_ = absl::StrCat(
      header_text_.substr(0, header_text_.find('\n') + 1),
      absl::StrFormat("%u serving; slots per backend min %u, max %u; over its weight's share "
                      "min %.4f, max %.4f\n",
                      balance.serving, balance.min_slots, balance.max_slots, balance.min_over_ideal,
                      balance.max_over_ideal));
  if (text_backends_.size() <= kSummaryBackends) {
    header_text_ += "backend slots per backend:\n";
    return;
  }
  // The most over and the most under their weight's share, serving backends first.
  std::vector<double> over(table_.backends().size(), 0.0);
  double serving_weight = 0;
  for (size_t b = 0; b < over.size(); ++b) {
    if (table_.serves(b)) serving_weight += static_cast<double>(table_.backends()[b].weight);
  }
  for (size_t b = 0; b < over.size(); ++b) {
    over[b] = table_.serves(b) && serving_weight > 0
                  ? counts_[b] * serving_weight /
                        (static_cast<double>(table_.size()) * table_.backends()[b].weight)
                  : -1.0;
  }
  std::vector<size_t> order = text_backends_;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return over[a] > over[b]; });
  const size_t half = kSummaryBackends / 2;
  size_t serving = 0;
  while (serving < order.size() && over[order[serving]] >= 0) ++serving;
  // The first and the last `half` of the serving backends, without showing one twice.
  const size_t head = std::min(half, serving);
  const size_t tail = std::max(head, serving - head);
  text_backends_.assign(order.begin(), order.begin() + head);
  text_backends_.insert(text_backends_.end(), order.begin() + tail, order.begin() + serving);
  header_text_ += absl::StrFormat(
      "the %u backends most over and under their weight's share, of %u (%u not serving):\n",
      text_backends_.size(), order.size(), order.size() - serving);
  summary_tail_ = "(without --summary: every backend, and the backend of every slot)\n";
}

void TableRenderer::appendBackendJson(std::string& out, size_t b) const {
  JsonWriter json;
  json.beginObject()
      .key("name")
      .value(table_.backends()[b].name)
      .key("address")
      .value(addresses_[b])
      .key("weight")
      .value(weights_[b])
      .key("effective_weight")
      .value(effectiveWeight(b))
      .key("healthy")
      .value(static_cast<bool>(table_.healthy()[b]))
      .key("drained")
      .value(static_cast<bool>(table_.drained()[b]))
      .key("slots")
      .value(counts_[b])
      .endObject();
  if (b > 0) out += ',';
  out += json.str();
}

int64_t TableRenderer::effectiveWeight(size_t b) const {
  return table_.healthy()[b] && !table_.drained()[b] ? weights_[b] : 0;
}

void TableRenderer::appendBackendLine(std::string& out, size_t b) const {
  absl::StrAppendFormat(
      &out, "  %-24s %8u  %7.3f%%  %s\n", table_.backends()[b].name, counts_[b],
      100.0 * counts_[b] / table_.size(),
      weightText(weights_[b], effectiveWeight(b), !table_.healthy()[b], table_.drained()[b]));
}

void TableRenderer::appendSlotLine(std::string& out, uint32_t slot) const {
  const uint16_t entry = table_.entries()[slot];
  absl::StrAppend(&out, slot, " ", entry == kNoBackend ? "-" : table_.backends()[entry].name, "\n");
}

bool TableRenderer::nextJson(std::string& out, size_t budget) {
  const size_t limit = out.size() + budget;
  while (json_.part != kJsonDone && out.size() < limit) {
    if (json_.part == kJsonHeader) {
      out += header_json_;
      json_ = {kJsonBackends, 0};
      continue;
    }
    if (json_.part == kJsonBackends) {
      if (json_.index < table_.backends().size()) {
        appendBackendJson(out, json_.index++);
        continue;
      }
      if (summary_) {
        out += "],\"summary\":true}";
        json_ = {kJsonDone, 0};
        continue;
      }
      out += "],\"entries\":[";
      json_ = {kJsonEntries, 0};
      continue;
    }
    if (json_.index < table_.size()) {
      if (json_.index > 0) out += ',';
      const uint16_t entry = table_.entries()[json_.index++];
      if (entry == kNoBackend) {
        out += "null";
      } else {
        absl::StrAppend(&out, entry);
      }
      continue;
    }
    out += "]}";
    json_ = {kJsonDone, 0};
  }
  return json_.part != kJsonDone;
}

bool TableRenderer::nextText(std::string& out, size_t budget) {
  const size_t limit = out.size() + budget;
  while (text_.part != kTextDone && out.size() < limit) {
    switch (text_.part) {
      case kTextHeader:
        out += header_text_;
        text_ = {kTextBackends, 0};
        break;
      case kTextBackends:
        if (text_.index < text_backends_.size()) {
          appendBackendLine(out, text_backends_[text_.index++]);
        } else if (summary_) {
          out += summary_tail_;
          text_ = {kTextDone, 0};
        } else {
          out += "slot backend\n";
          text_ = {kTextSlots, 0};
        }
        break;
      default:
        if (text_.index < table_.size()) {
          appendSlotLine(out, static_cast<uint32_t>(text_.index++));
        } else {
          text_ = {kTextDone, 0};
        }
    }
  }
  return text_.part != kTextDone;
}

std::string tableText(const ServiceConfig& service, const Table& table, absl::string_view note,
                      bool summary) {
  TableRenderer renderer(service, table, std::string(note), summary);
  std::string out;
  while (renderer.nextText(out, SIZE_MAX / 2)) {
  }
  return out;
}

std::string tableJson(const ServiceConfig& service, const Table& table, bool summary) {
  TableRenderer renderer(service, table, "", summary);
  std::string out;
  while (renderer.nextJson(out, SIZE_MAX / 2)) {
  }
  return out;
}

namespace {

class TableReply : public ReplyStream {
 public:
  TableReply(const ServiceConfig& service, Table table, uint64_t generation, std::string note,
             bool summary)
      : renderer_(service, std::move(table), std::move(note), summary), generation_(generation) {}

  Progress next(std::string& out, size_t budget) override {
    switch (part_) {
      case Part::kStart:
        absl::StrAppend(&out, "{\"ok\":true,\"snapshot_generation\":", generation_, ",\"table\":");
        part_ = Part::kJson;
        return Progress::kMore;
      case Part::kJson:
        if (!renderer_.nextJson(out, budget)) {
          out += ",\"text\":\"";
          part_ = Part::kText;
        }
        return Progress::kMore;
      case Part::kText: {
        // The text is a JSON string: each piece is escaped as it comes.
        std::string piece;
        const bool more = renderer_.nextText(piece, budget);
        appendJsonEscaped(out, piece);
        if (more) return Progress::kMore;
        out += "\"}";
        return Progress::kDone;
      }
    }
    return Progress::kDone;
  }

 private:
  enum class Part { kStart, kJson, kText };
  TableRenderer renderer_;
  uint64_t generation_;
  Part part_ = Part::kStart;
};

}  // namespace

std::unique_ptr<ReplyStream> tableReplyStream(const ServiceConfig& service, Table table,
                                              uint64_t generation, std::string note, bool summary) {
  return std::make_unique<TableReply>(service, std::move(table), generation, std::move(note),
                                      summary);
}

}  // namespace berth
