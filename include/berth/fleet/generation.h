#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/fleet/agreed_health.h"
#include "berth/fleet/store.h"
#include "berth/fleet/stored_table.h"
#include "berth/maglev/table.h"

namespace berth {

// Table generations (docs/scale-out.md, "Table generations"): in a fleet, one elected instance
// makes each new generation of every Maglev table from the previous one (maglev/table.h
// nextGeneration()), the services of the version it runs and the health the fleet agrees on
// (agreed_health.h), and stores it in etcd; every instance serves the stored generation. Pure:
// the keys, the formats and the plan; fleet/agent.h talks to etcd.
//
// Under the fleet's prefix P:
//   P/leader                              the elected instance's name, under its lease
//   P/generation                          the manifest of the generation in force
//   P/tables/<service>/<G>/<k>            a table as generation G stored it, in pieces
//
// A generation names, per service, the backends the fleet sees down and, for a Maglev service,
// the pieces of its table: those of the generation that last changed it, so an unchanged table
// is stored once. Numbers go up by one with every generation, whoever makes it.

// `P/tables/<service>/`'s service part: the name with every byte outside [A-Za-z0-9._-] as %XX.
std::string tableKeyPart(absl::string_view service);

class GenerationKeys {
 public:
  explicit GenerationKeys(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string leader() const;
  std::string generation() const;
  std::string tablesPrefix() const;
  std::string tablePiecesOf(absl::string_view service, uint64_t generation) const;  // trailing /
  std::string tablePiece(absl::string_view service, uint64_t generation, size_t index) const;
  // The generation in a key under tablesPrefix(), with its service part; 0 when it is not one.
  uint64_t generationOfTableKey(absl::string_view key, std::string* service_part) const;

 private:
  std::string prefix_;
};

// One service in a generation's manifest.
struct GenerationService {
  std::string service;
  std::vector<std::string> down;  // the backends the fleet sees down, in name order
  // A Maglev table: the generation that stored it, its pieces, and the whole's size and CRC32-C.
  // Other algorithms store nothing: their table is a pure function of the config and `down`.
  uint64_t stored_in = 0;
  std::vector<VersionPiece> pieces;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;

  friend bool operator==(const GenerationService&, const GenerationService&) = default;
};

struct GenerationManifest {
  uint64_t generation = 0;
  uint64_t config_version = 0;  // the fleet version whose services it was made for
  std::string made_by;          // the elected instance
  int64_t made_at_ms = 0;
  uint32_t quorum = 0;                      // down verdicts that took a backend out
  std::vector<GenerationService> services;  // in the version's order

  const GenerationService* find(absl::string_view service) const;
  friend bool operator==(const GenerationManifest&, const GenerationManifest&) = default;
};
std::string renderGenerationManifest(const GenerationManifest& manifest);
absl::StatusOr<GenerationManifest> parseGenerationManifest(absl::string_view text);

// One service's stored table from its pieces (by key), checked against the manifest's sizes and
// CRC32-Cs, then decoded. DataLoss naming the piece otherwise.
absl::StatusOr<StoredTable> assembleStoredTable(const GenerationService& service,
                                                const std::map<std::string, std::string>& pieces);

// A generation in force: its manifest and each Maglev service's table, by service name.
struct FleetGeneration {
  GenerationManifest manifest;
  std::map<std::string, Table> tables;
};

// The next generation, as the elected instance plans it from `previous` (none before the first),
// `services` (the version it runs) and `agreed`. Per Maglev service: nextGeneration() of the
// previous table with the config's backends (ServiceConfig::hashingBackends(), weight 0 as
// drained) and, failed, those a quorum of the live instances sees down and those no live
// instance has judged yet (a backend without a health check is judged up by every instance that
// runs the version, the elected one among them, so only a quorum takes it out); a service new to
// the fleet, or whose M changed, is built afresh. Per other service, only the down set. nullopt
// when no table and no down set would change: no generation is made for nothing.
struct PlannedGeneration {
  FleetGeneration generation;
  // The tables stored anew, encoded, by service name; their pieces go under this generation.
  std::map<std::string, std::string> encoded;
};
absl::StatusOr<std::optional<PlannedGeneration>> planGeneration(
    const GenerationKeys& keys, const FleetGeneration* previous,
    absl::Span<const ServiceConfig> services, uint64_t config_version, const AgreedHealth& agreed,
    const std::string& made_by, int64_t made_at_ms);

// The table an instance serves for `service` in fleet mode, from the generation in force: the
// stored one when it was made for the service's backends and weights, else (the instance runs a
// version the elected instance has not planned for yet) nextGeneration() of it for the config's
// backends, a backend the generation does not know failed exactly when planGeneration() would
// fail it by `agreed` (the health as this instance sees the fleet agree): what the elected instance
// will store unless health changes meanwhile, so that the version and its generation together move
// the least once.
// nullopt when the generation has no table for the service (a new service, or not Maglev): the
// config's own table then.
absl::StatusOr<std::optional<Table>> generationBaseFor(const FleetGeneration& generation,
                                                       const ServiceConfig& service,
                                                       const AgreedHealth& agreed);

// The file an instance keeps the generation it serves in, so that it starts on it while etcd is
// out of reach: the manifest's line, then each stored table as its length in bytes on a line of
// its own and its encoded bytes. parseGenerationCache() checks each table as a fetch does.
std::string renderGenerationCache(const FleetGeneration& generation);
absl::StatusOr<FleetGeneration> parseGenerationCache(absl::string_view contents);

// Where an instance caches its generation: beside its cached version.
std::string generationCachePath(const FleetConfig& fleet);

// What P/tables/ holds that no generation still needs: the piece prefixes of tables that neither
// `current` nor `previous` names, stored in a generation no later than `current`'s (a later one
// may be a takeover's, still committing). `stored` lists each table's (service part, generation).
std::vector<std::string> unneededTablePrefixes(
    const GenerationKeys& keys, const GenerationManifest& current,
    const GenerationManifest* previous,
    const std::vector<std::pair<std::string, uint64_t>>& stored);

}  // namespace berth
