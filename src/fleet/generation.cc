#include "berth/fleet/generation.h"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "berth/net/crc32c.h"
#include "berth/util/status_macros.h"
#include "fleet/json_fields.h"

namespace berth {
namespace {

using fleet_json::beginValue;
using fleet_json::crcOf;
using fleet_json::Json;
using fleet_json::parseObject;
using fleet_json::readNames;
using fleet_json::readPieces;
using fleet_json::writePieces;

std::string twentyDigits(uint64_t number) { return absl::StrFormat("%020u", number); }

}  // namespace

std::string tableKeyPart(absl::string_view service) {
  std::string part;
  for (char c : service) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '.' || c == '_' || c == '-') {
      part.push_back(c);
    } else {
      absl::StrAppend(&part, absl::StrFormat("%%%02X", byte));
    }
  }
  return part;
}

std::string GenerationKeys::leader() const { return absl::StrCat(prefix_, "/leader"); }
std::string GenerationKeys::generation() const { return absl::StrCat(prefix_, "/generation"); }
std::string GenerationKeys::tablesPrefix() const { return absl::StrCat(prefix_, "/tables/"); }
std::string GenerationKeys::tablePiecesOf(absl::string_view service, uint64_t generation) const {
  return absl::StrCat(tablesPrefix(), tableKeyPart(service), "/", twentyDigits(generation), "/");
}
std::string GenerationKeys::tablePiece(absl::string_view service, uint64_t generation,
                                       size_t index) const {
  return absl::StrCat(tablePiecesOf(service, generation), absl::StrFormat("%06u", index));
}

uint64_t GenerationKeys::generationOfTableKey(absl::string_view key,
                                              std::string* service_part) const {
  if (!absl::ConsumePrefix(&key, tablesPrefix())) return 0;
  const size_t slash = key.find('/');
  if (slash == absl::string_view::npos) return 0;
  const absl::string_view part = key.substr(0, slash);
  const absl::string_view rest = key.substr(slash + 1);
  uint64_t generation = 0;
  if (rest.size() < 20 || !absl::SimpleAtoi(rest.substr(0, 20), &generation)) return 0;
  if (service_part != nullptr) *service_part = std::string(part);
  return generation;
}

const GenerationService* GenerationManifest::find(absl::string_view service) const {
  for (const GenerationService& entry : services) {
    if (entry.service == service) return &entry;
  }
  return nullptr;
}

std::string renderGenerationManifest(const GenerationManifest& manifest) {
  JsonWriter json;
  beginValue(json).key("generation").value(manifest.generation);
  json.key("config_version").value(manifest.config_version);
  json.key("made_by").value(manifest.made_by).key("made_at_ms").value(manifest.made_at_ms);
  json.key("quorum").value(manifest.quorum);
  json.key("services").beginArray();
  for (const GenerationService& service : manifest.services) {
    json.beginObject().key("service").value(service.service).key("down").strings(service.down);
    json.key("stored_in").value(service.stored_in);
    writePieces(json, service.pieces, /*with_service=*/false);
    json.key("bytes").value(service.bytes).key("crc32c").value(service.crc32c).endObject();
  }
  return json.endArray().endObject().str();
}

absl::StatusOr<GenerationManifest> parseGenerationManifest(absl::string_view text) {
  constexpr absl::string_view kWhat = "the fleet's generation";
  BERTH_ASSIGN_OR_RETURN(const Json json, parseObject(text, kWhat));
  GenerationManifest manifest;
  BERTH_FIELD(manifest.generation, uint64_t, json, "generation", kWhat);
  BERTH_FIELD(manifest.config_version, uint64_t, json, "config_version", kWhat);
  BERTH_FIELD(manifest.made_by, std::string, json, "made_by", kWhat);
  BERTH_FIELD(manifest.made_at_ms, int64_t, json, "made_at_ms", kWhat);
  BERTH_FIELD(manifest.quorum, uint32_t, json, "quorum", kWhat);
  const auto services = json.find("services");
  if (services == json.end() || !services->is_array()) {
    return absl::DataLossError("the fleet's generation has no services");
  }
  for (const Json& entry : *services) {
    if (!entry.is_object()) return absl::DataLossError("the fleet's generation: a service");
    GenerationService service;
    BERTH_FIELD(service.service, std::string, entry, "service", kWhat);
    BERTH_FIELD(service.stored_in, uint64_t, entry, "stored_in", kWhat);
    BERTH_FIELD(service.bytes, uint64_t, entry, "bytes", kWhat);
    BERTH_FIELD(service.crc32c, uint32_t, entry, "crc32c", kWhat);
    BERTH_RETURN_IF_ERROR(readNames(entry, "down", kWhat, service.down));
    BERTH_RETURN_IF_ERROR(readPieces(entry, kWhat, &service.service, service.pieces));
    manifest.services.push_back(std::move(service));
  }
  return manifest;
}

absl::StatusOr<StoredTable> assembleStoredTable(const GenerationService& service,
                                                const std::map<std::string, std::string>& pieces) {
  absl::StatusOr<std::string> bytes =
      assemblePieces(service.pieces, service.bytes, service.crc32c, pieces,
                     absl::StrCat("the table of service '", service.service, "'"));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<StoredTable> table = decodeStoredTable(*bytes);
  if (table.ok() && table->service != service.service) {
    return absl::DataLossError(absl::StrCat("the table stored for service '", service.service,
                                            "' is service '", table->service, "'s"));
  }
  return table;
}

namespace {

// The config's side of a service's table: its backends with the weights a table hashes with, and
// those weight 0 drains.
struct ConfigTableInputs {
  std::vector<Backend> backends;  // in name order
  std::vector<std::string> drained;
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<std::string> unchecked;  // without a health check: always up
};

ConfigTableInputs inputsOf(const ServiceConfig& service) {
  ConfigTableInputs inputs;
  inputs.backends = service.hashingBackends();
  std::sort(inputs.backends.begin(), inputs.backends.end(),
            [](const Backend& a, const Backend& b) { return a.name < b.name; });
  for (const BackendConfig& backend : service.backends) {
    if (backend.weight == 0) inputs.drained.push_back(backend.name);
    if (backend.health.type == HealthCheckType::kNone) inputs.unchecked.insert(backend.name);
    inputs.names.insert(backend.name);
  }
  std::sort(inputs.drained.begin(), inputs.drained.end());
  return inputs;
}

// The service's backends the elected instance's plan takes out, in name order: those a quorum
// sees down, and those no live instance has judged yet, a backend without a check counting as
// judged up (generation.h planGeneration()).
std::vector<std::string> downAmong(const AgreedHealth& agreed, const std::string& service,
                                   const ConfigTableInputs& inputs) {
  const auto down = agreed.down.find(service);
  const auto judged = agreed.judged.find(service);
  std::vector<std::string> kept;
  for (const Backend& backend : inputs.backends) {
    const bool quorum_down = down != agreed.down.end() && down->second.count(backend.name) != 0;
    const bool unjudged =
        !inputs.unchecked.contains(backend.name) &&
        (judged == agreed.judged.end() || judged->second.count(backend.name) == 0);
    if (quorum_down || unjudged) kept.push_back(backend.name);
  }
  return kept;
}

bool madeFor(const Table& table, const ConfigTableInputs& inputs, uint32_t table_size) {
  if (table.size() != table_size || table.backends().size() != inputs.backends.size()) {
    return false;
  }
  for (size_t b = 0; b < inputs.backends.size(); ++b) {
    const Backend& have = table.backends()[b];
    if (have.name != inputs.backends[b].name || have.weight != inputs.backends[b].weight) {
      return false;
    }
    const bool drained =
        std::binary_search(inputs.drained.begin(), inputs.drained.end(), have.name);
    if (table.drained()[b] != drained) return false;
  }
  return true;
}

absl::Status inService(const std::string& service, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("service '", service, "': ", status.message()));
}

std::vector<std::string> failedOf(const Table& table) {
  std::vector<std::string> failed;
  for (size_t b = 0; b < table.backends().size(); ++b) {
    if (!table.healthy()[b]) failed.push_back(table.backends()[b].name);
  }
  return failed;
}

}  // namespace

absl::StatusOr<std::optional<PlannedGeneration>> planGeneration(
    const GenerationKeys& keys, const FleetGeneration* previous,
    absl::Span<const ServiceConfig> services, uint64_t config_version, const AgreedHealth& agreed,
    const std::string& made_by, int64_t made_at_ms) {
  PlannedGeneration planned;
  GenerationManifest& manifest = planned.generation.manifest;
  manifest.generation = previous != nullptr ? previous->manifest.generation + 1 : 1;
  manifest.config_version = config_version;
  manifest.made_by = made_by;
  manifest.made_at_ms = made_at_ms;
  manifest.quorum = agreed.quorum;
  bool changed = previous == nullptr || previous->manifest.services.size() != services.size();
  for (size_t s = 0; s < services.size(); ++s) {
    if (!changed && previous->manifest.services[s].service != services[s].name) changed = true;
    const ServiceConfig& service = services[s];
    const ConfigTableInputs inputs = inputsOf(service);
    GenerationService entry;
    entry.service = service.name;
    entry.down = downAmong(agreed, service.name, inputs);
    const GenerationService* was =
        previous != nullptr ? previous->manifest.find(service.name) : nullptr;
    changed |= was == nullptr || was->down != entry.down;
    if (service.algorithm != Algorithm::kMaglev) {
      manifest.services.push_back(std::move(entry));
      continue;
    }
    const Table* previous_table = nullptr;
    if (previous != nullptr) {
      const auto found = previous->tables.find(service.name);
      if (found != previous->tables.end() && found->second.size() == service.table_size) {
        previous_table = &found->second;
      }
    }
    absl::StatusOr<Table> from = previous_table != nullptr
                                     ? absl::StatusOr<Table>(*previous_table)
                                     : build(inputs.backends, service.table_size);
    if (!from.ok()) {
      return inService(service.name, from.status());
    }
    absl::StatusOr<Table> next = nextGeneration(*from, inputs.backends, entry.down, inputs.drained);
    if (!next.ok()) {
      return inService(service.name, next.status());
    }
    StoredTable stored = storedTableOf(service.name, *next);
    const bool same_table = previous_table != nullptr && was != nullptr && was->stored_in != 0 &&
                            storedTableOf(service.name, *previous_table) == stored;
    if (same_table) {
      entry.stored_in = was->stored_in;
      entry.pieces = was->pieces;
      entry.bytes = was->bytes;
      entry.crc32c = was->crc32c;
    } else {
      changed = true;
      std::string encoded = encodeStoredTable(stored);
      entry.stored_in = manifest.generation;
      entry.bytes = encoded.size();
      entry.crc32c = crcOf(encoded);
      for (size_t at = 0, k = 0; at < encoded.size(); at += kMaxPieceBytes, ++k) {
        const absl::string_view piece = absl::string_view(encoded).substr(at, kMaxPieceBytes);
        entry.pieces.push_back(VersionPiece{keys.tablePiece(service.name, manifest.generation, k),
                                            service.name, piece.size(), crcOf(piece)});
      }
      planned.encoded.emplace(service.name, std::move(encoded));
    }
    planned.generation.tables.emplace(service.name, *std::move(next));
    manifest.services.push_back(std::move(entry));
  }
  if (!changed) return std::optional<PlannedGeneration>();
  return std::optional<PlannedGeneration>(std::move(planned));
}

absl::StatusOr<std::optional<Table>> generationBaseFor(const FleetGeneration& generation,
                                                       const ServiceConfig& service,
                                                       const AgreedHealth& agreed) {
  if (service.algorithm != Algorithm::kMaglev) return std::optional<Table>();
  const auto found = generation.tables.find(service.name);
  if (found == generation.tables.end() || found->second.size() != service.table_size) {
    return std::optional<Table>();
  }
  const ConfigTableInputs inputs = inputsOf(service);
  if (madeFor(found->second, inputs, service.table_size))
    return std::optional<Table>(found->second);
  // The step the elected instance's next plan takes: backends the generation knows keep its
  // verdicts, and one it does not know yet comes in exactly when the plan will take it in, so
  // that the version and its generation move the least once between them.
  std::vector<std::string> failed;
  for (std::string& name : failedOf(found->second)) {
    if (inputs.names.contains(name)) failed.push_back(std::move(name));
  }
  for (std::string& name : downAmong(agreed, service.name, inputs)) {
    if (!found->second.indexOf(name).ok()) failed.push_back(std::move(name));
  }
  absl::StatusOr<Table> next =
      nextGeneration(found->second, inputs.backends, failed, inputs.drained);
  if (!next.ok()) {
    return inService(service.name, next.status());
  }
  return std::optional<Table>(*std::move(next));
}

std::string generationCachePath(const FleetConfig& fleet) {
  return absl::StrCat(fleet.cache, ".generation");
}

std::string renderGenerationCache(const FleetGeneration& generation) {
  std::string contents = renderGenerationManifest(generation.manifest);
  contents.push_back('\n');
  for (const GenerationService& service : generation.manifest.services) {
    const auto table = generation.tables.find(service.service);
    if (service.stored_in == 0 || table == generation.tables.end()) continue;
    const std::string encoded = encodeStoredTable(storedTableOf(service.service, table->second));
    absl::StrAppend(&contents, encoded.size(), "\n", encoded);
  }
  return contents;
}

absl::StatusOr<FleetGeneration> parseGenerationCache(absl::string_view contents) {
  const size_t newline = contents.find('\n');
  if (newline == absl::string_view::npos) {
    return absl::DataLossError("it does not start with a generation's manifest");
  }
  FleetGeneration generation;
  absl::StatusOr<GenerationManifest> manifest =
      parseGenerationManifest(contents.substr(0, newline));
  if (!manifest.ok()) return manifest.status();
  generation.manifest = *std::move(manifest);
  absl::string_view rest = contents.substr(newline + 1);
  for (const GenerationService& service : generation.manifest.services) {
    if (service.stored_in == 0) continue;
    const size_t end = rest.find('\n');
    uint64_t bytes = 0;
    if (end == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, end), &bytes) ||
        bytes > rest.size() - end - 1) {
      return absl::DataLossError(
          absl::StrCat("the table of service '", service.service, "' is cut short"));
    }
    const absl::string_view encoded = rest.substr(end + 1, bytes);
    rest.remove_prefix(end + 1 + bytes);
    if (encoded.size() != service.bytes || crcOf(encoded) != service.crc32c) {
      return absl::DataLossError(
          absl::StrCat("the table of service '", service.service, "' fails its CRC32-C"));
    }
    absl::StatusOr<StoredTable> stored = decodeStoredTable(encoded);
    if (!stored.ok()) return stored.status();
    absl::StatusOr<Table> table = tableOf(*stored);
    if (!table.ok()) return table.status();
    generation.tables.emplace(service.service, *std::move(table));
  }
  if (!rest.empty()) return absl::DataLossError("it holds more than the generation's tables");
  return generation;
}

std::vector<std::string> unneededTablePrefixes(
    const GenerationKeys& keys, const GenerationManifest& current,
    const GenerationManifest* previous,
    const std::vector<std::pair<std::string, uint64_t>>& stored) {
  std::set<std::pair<std::string, uint64_t>> needed;
  for (const GenerationManifest* manifest : {&current, previous}) {
    if (manifest == nullptr) continue;
    for (const GenerationService& service : manifest->services) {
      if (service.stored_in != 0) needed.emplace(tableKeyPart(service.service), service.stored_in);
    }
  }
  std::set<std::string> prefixes;
  for (const auto& [part, generation] : stored) {
    if (generation > current.generation || needed.count({part, generation}) != 0) continue;
    prefixes.insert(absl::StrCat(keys.tablesPrefix(), part, "/", twentyDigits(generation), "/"));
  }
  return {prefixes.begin(), prefixes.end()};
}

}  // namespace berth
