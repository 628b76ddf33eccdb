#include "berth/fleet/stored_table.h"

#include <algorithm>
#include <bit>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "berth/net/crc32c.h"
#include "berth/util/status_macros.h"
#include "fleet/json_fields.h"

namespace berth {

using fleet_json::crcOf;
using fleet_json::Json;
using fleet_json::kFormat;
using fleet_json::parseObject;
using fleet_json::readNames;

namespace {

// Bits per packed entry: enough for every index and for `count` itself, which stands for
// kNoBackend.
uint32_t bitsFor(size_t count) { return std::max<uint32_t>(1, std::bit_width(count)); }

}  // namespace

StoredTable storedTableOf(absl::string_view service, const Table& table) {
  StoredTable stored;
  stored.service = std::string(service);
  stored.backends.assign(table.backends().begin(), table.backends().end());
  for (size_t b = 0; b < stored.backends.size(); ++b) {
    if (!table.healthy()[b]) stored.failed.push_back(stored.backends[b].name);
    if (table.drained()[b]) stored.drained.push_back(stored.backends[b].name);
  }
  stored.entries.assign(table.entries().begin(), table.entries().end());
  return stored;
}

absl::StatusOr<Table> tableOf(const StoredTable& stored) {
  absl::StatusOr<Table> table =
      restoreGeneration(stored.backends, stored.entries, stored.failed, stored.drained);
  if (!table.ok()) {
    return absl::DataLossError(absl::StrCat("the stored table of service '", stored.service,
                                            "': ", table.status().message()));
  }
  return table;
}

std::string encodeStoredTable(const StoredTable& table) {
  const size_t count = table.backends.size();
  const uint32_t bits = bitsFor(count);
  std::string packed((table.entries.size() * bits + 7) / 8, '\0');
  uint64_t at = 0;
  for (uint16_t entry : table.entries) {
    const uint32_t value = entry == kNoBackend ? static_cast<uint32_t>(count) : entry;
    for (uint32_t bit = 0; bit < bits; ++bit, ++at) {
      if ((value >> bit) & 1U) packed[at / 8] = static_cast<char>(packed[at / 8] | (1 << (at % 8)));
    }
  }
  // The header's keys in the order every berth has written them, so that a table re-encoded
  // for the cache is byte for byte what the elected instance stored and its CRC checks out.
  JsonWriter json;
  json.beginObject().key("backends").beginArray();
  for (const Backend& backend : table.backends) {
    json.beginArray().value(backend.name).value(backend.weight).endArray();
  }
  json.endArray().key("bits").value(bits).key("crc32c").value(crcOf(packed));
  json.key("drained").strings(table.drained).key("failed").strings(table.failed);
  json.key("format").value(kFormat).key("service").value(table.service);
  json.key("table_size").value(static_cast<uint64_t>(table.entries.size())).endObject();
  std::string text = json.str();
  text.push_back('\n');
  text += packed;
  return text;
}

absl::StatusOr<StoredTable> decodeStoredTable(absl::string_view bytes) {
  const size_t newline = bytes.find('\n');
  if (newline == absl::string_view::npos) {
    return absl::DataLossError("a stored table without its header line");
  }
  constexpr absl::string_view kWhat = "a stored table";
  BERTH_ASSIGN_OR_RETURN(const Json json, parseObject(bytes.substr(0, newline), kWhat));
  StoredTable table;
  uint32_t table_size = 0;
  uint32_t bits = 0;
  uint32_t crc = 0;
  BERTH_FIELD(table.service, std::string, json, "service", kWhat);
  BERTH_FIELD(table_size, uint32_t, json, "table_size", kWhat);
  BERTH_FIELD(bits, uint32_t, json, "bits", kWhat);
  BERTH_FIELD(crc, uint32_t, json, "crc32c", kWhat);
  const std::string what = absl::StrCat("the stored table of service '", table.service, "'");
  const auto backends = json.find("backends");
  if (backends == json.end() || !backends->is_array() || backends->size() > kMaxBackends) {
    return absl::DataLossError(absl::StrCat(what, " has no valid backend list"));
  }
  for (const Json& backend : *backends) {
    if (!backend.is_array() || backend.size() != 2 || !backend[0].is_string() ||
        !backend[1].is_number_integer()) {
      return absl::DataLossError(absl::StrCat(what, ": a backend is not [name, weight]"));
    }
    table.backends.push_back({backend[0].get<std::string>(), backend[1].get<int64_t>()});
  }
  BERTH_RETURN_IF_ERROR(readNames(json, "failed", what, table.failed));
  BERTH_RETURN_IF_ERROR(readNames(json, "drained", what, table.drained));
  const size_t count = table.backends.size();
  if (table_size == 0 || table_size > kMaxTableSize) {
    return absl::DataLossError(absl::StrCat(what, " has table_size ", table_size));
  }
  if (bits != bitsFor(count)) {
    return absl::DataLossError(
        absl::StrCat(what, " has ", bits, " bits an entry for ", count, " backends"));
  }
  const absl::string_view packed = bytes.substr(newline + 1);
  if (packed.size() != (uint64_t{table_size} * bits + 7) / 8) {
    return absl::DataLossError(absl::StrCat(what, " holds ", packed.size(),
                                            " bytes of entries, not ",
                                            (uint64_t{table_size} * bits + 7) / 8));
  }
  if (crcOf(packed) != crc) {
    return absl::DataLossError(absl::StrCat(what, ": its entries fail their CRC32-C"));
  }
  table.entries.resize(table_size);
  uint64_t at = 0;
  for (uint16_t& entry : table.entries) {
    uint32_t value = 0;
    for (uint32_t bit = 0; bit < bits; ++bit, ++at) {
      value |= static_cast<uint32_t>((static_cast<unsigned char>(packed[at / 8]) >> (at % 8)) & 1U)
               << bit;
    }
    if (value > count) {
      return absl::DataLossError(
          absl::StrCat(what, ": an entry names backend ", value, " of ", count));
    }
    entry = value == count ? kNoBackend : static_cast<uint16_t>(value);
  }
  return table;
}

}  // namespace berth
