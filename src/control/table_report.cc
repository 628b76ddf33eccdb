#include "berth/control/table_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/maglev/analysis.h"

namespace berth {
namespace {

std::string addressOf(const ServiceConfig& service, const std::string& backend_name) {
  for (const BackendConfig& backend : service.backends) {
    if (backend.name == backend_name) return backend.address.toString();
  }
  return "";
}

}  // namespace

std::string tableText(const ServiceConfig& service, const Table& table, absl::string_view note) {
  const std::vector<uint32_t> counts = table.slotCounts();
  std::string out =
      absl::StrFormat("service %s (%s): %s, M=%u, %u backends%s, fingerprint %016x\n", service.name,
                      service.listener(), toString(table.algorithm()), table.size(),
                      table.backends().size(), note, fingerprintOf(table));
  absl::StrAppend(&out, "backend slots per backend:\n");
  for (size_t i = 0; i < table.backends().size(); ++i) {
    absl::StrAppendFormat(&out, "  %-24s %8u  %7.3f%%  weight %d%s\n", table.backends()[i].name,
                          counts[i], 100.0 * counts[i] / table.size(), table.backends()[i].weight,
                          table.healthy()[i] ? "" : "  (unhealthy)");
  }
  absl::StrAppend(&out, "slot backend\n");
  for (uint32_t slot = 0; slot < table.size(); ++slot) {
    const uint16_t entry = table.entries()[slot];
    absl::StrAppendFormat(&out, "%u %s\n", slot,
                          entry == kNoBackend ? "-" : table.backends()[entry].name);
  }
  return out;
}

void writeTableJson(JsonWriter& json, const ServiceConfig& service, const Table& table) {
  const std::vector<uint32_t> counts = table.slotCounts();
  json.beginObject().key("service").value(service.name).key("table_size").value(table.size());
  json.key("listener").value(service.listener());
  json.key("forwarding").value(toString(service.forwarding));
  json.key("algorithm").value(toString(table.algorithm()));
  json.key("fingerprint").value(absl::StrFormat("%016x", fingerprintOf(table)));
  json.key("hash_fields").value(toString(service.hash_fields));
  json.key("backends").beginArray();
  for (size_t i = 0; i < table.backends().size(); ++i) {
    json.beginObject()
        .key("name")
        .value(table.backends()[i].name)
        .key("address")
        .value(addressOf(service, table.backends()[i].name))
        .key("weight")
        .value(table.backends()[i].weight)
        .key("healthy")
        .value(static_cast<bool>(table.healthy()[i]))
        .key("slots")
        .value(counts[i])
        .endObject();
  }
  json.endArray().key("entries").beginArray();
  for (uint16_t entry : table.entries()) {
    if (entry == kNoBackend) {
      json.null();
    } else {
      json.value(static_cast<unsigned>(entry));
    }
  }
  json.endArray().endObject();
}

}  // namespace berth
