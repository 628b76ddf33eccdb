#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// How a fleet keeps its config versions in etcd (docs/scale-out.md, "A fleet through etcd"). Pure:
// the keys, the values' formats and the plans; fleet/push.h and fleet/agent.h talk to etcd.
//
// Under the fleet's prefix P:
//   P/head                    {"version":N,"push":"<push id>"}: the version in force
//   P/versions/<N>            the manifest of version N (N in 20 digits, so keys sort by number)
//   P/pieces/<push id>/<k>    the pushed text in pieces, in order (k in 6 digits)
//   P/instances/<name>        each live instance's report, under its lease
//
// A version's text is kept byte for byte, so that every error an instance reports names a line of
// the file that was pushed. It is cut into one piece per service (from the start of the line the
// service begins on) and one for what comes before the first; a piece over kMaxPieceBytes is cut
// further. etcd refuses requests over 1.5 MiB by default, so no value comes near that.
inline constexpr size_t kMaxPieceBytes = 512 * 1024;

class FleetKeys {
 public:
  // `prefix`: the fleet section's prefix ("/berth"), without a trailing slash.
  explicit FleetKeys(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string head() const;
  std::string versionsPrefix() const;
  std::string version(uint64_t number) const;
  std::string piecesPrefix() const;
  std::string piecesOf(absl::string_view push_id) const;  // with the trailing slash
  std::string piece(absl::string_view push_id, size_t index) const;
  std::string instancesPrefix() const;
  std::string instance(absl::string_view name) const;
  // The version number in a key under versionsPrefix(); 0 when it is not one.
  uint64_t versionOfKey(absl::string_view key) const;
  // The push id of a key under piecesPrefix(); empty when it is not one.
  std::string pushOfPieceKey(absl::string_view key) const;

 private:
  std::string prefix_;
};

// P/head's value.
struct FleetHead {
  uint64_t version = 0;
  std::string push_id;

  friend bool operator==(const FleetHead&, const FleetHead&) = default;
};
std::string renderHead(const FleetHead& head);
absl::StatusOr<FleetHead> parseHead(absl::string_view text);

struct VersionPiece {
  std::string key;
  std::string service;  // the service the piece begins, or empty for what precedes them
  uint64_t bytes = 0;
  uint32_t crc32c = 0;

  friend bool operator==(const VersionPiece&, const VersionPiece&) = default;
};

// P/versions/<N>'s value: who pushed what, and the pieces to read.
struct VersionManifest {
  uint64_t version = 0;
  std::string push_id;
  std::string pushed_by;     // user@host of the push
  int64_t pushed_at_ms = 0;  // Unix time
  std::string source;        // the pushed file's name, as errors name it
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole text
  std::vector<std::string> services;
  std::vector<VersionPiece> pieces;

  friend bool operator==(const VersionManifest&, const VersionManifest&) = default;
};
std::string renderManifest(const VersionManifest& manifest);
absl::StatusOr<VersionManifest> parseManifest(absl::string_view text);

// A piece of a version's text before it is stored.
struct TextPiece {
  std::string service;
  absl::string_view text;
};
// `text` cut as above: `service_lines` are the services' names and 1-based first lines in text
// order (as the loader reports them). The pieces concatenate to `text`.
std::vector<TextPiece> splitVersionText(
    absl::string_view text, const std::vector<std::pair<std::string, int>>& service_lines,
    size_t max_piece_bytes = kMaxPieceBytes);

// The manifest for `text` cut into `pieces` (their keys under `push_id`).
VersionManifest manifestFor(const FleetKeys& keys, uint64_t version, const std::string& push_id,
                            absl::string_view text, const std::vector<TextPiece>& pieces);

// The bytes `named` lists, concatenated from `pieces` (by key), each checked against its size
// and CRC32-C and the whole against `bytes` and `crc32c`. DataLoss starting with `what` (and
// naming the piece) otherwise.
absl::StatusOr<std::string> assemblePieces(const std::vector<VersionPiece>& named, uint64_t bytes,
                                           uint32_t crc32c,
                                           const std::map<std::string, std::string>& pieces,
                                           absl::string_view what);

// The version's text from its pieces (by key), each checked against the manifest's size and
// CRC32-C, and the whole against the manifest's. DataLoss naming the piece otherwise.
absl::StatusOr<std::string> assembleVersionText(const VersionManifest& manifest,
                                                const std::map<std::string, std::string>& pieces);

// The pieces' puts grouped into transactions within etcd's default limits: at most
// kMaxOpsPerTxn operations and kMaxTxnPayloadBytes of base64 per request.
inline constexpr size_t kMaxOpsPerTxn = 100;
inline constexpr size_t kMaxTxnPayloadBytes = 1024 * 1024;
std::vector<std::vector<size_t>> stagingBatches(const std::vector<TextPiece>& pieces);

// What a push that made version `head` must delete, keeping `keep` versions: the manifests of
// older versions (their keys), and the piece prefixes of every push no kept manifest names.
// `versions` are the manifests there now (key and the push it names); `staged` are the push ids
// with pieces stored and the lowest create revision among them; a push whose pieces were created
// after `replaced_revision` (the head this push replaced) may still be committing, and is left.
struct StoredVersion {
  uint64_t version = 0;
  std::string push_id;
  int64_t create_revision = 0;
};
struct StagedPush {
  std::string push_id;
  int64_t first_create_revision = 0;
};
struct RetentionPlan {
  std::vector<std::string> delete_keys;      // manifests
  std::vector<std::string> delete_prefixes;  // pieces of pushes no kept version names
  // The revision to compact at: the oldest kept manifest's, so that history older than every
  // kept version goes; 0 for none.
  int64_t compact_revision = 0;
};
RetentionPlan planRetention(const FleetKeys& keys, uint64_t head, uint32_t keep,
                            const std::vector<StoredVersion>& versions,
                            const std::vector<StagedPush>& staged, int64_t replaced_revision);

// What an instance reports under P/instances/<name> while its lease lives.
struct InstanceReport {
  std::string name;
  std::string berth_version;
  uint64_t version = 0;  // the fleet version it serves; 0 for none yet
  std::string push_id;
  int64_t applied_at_ms = 0;
  bool from_cache = false;  // serving the cached version, etcd not yet heard from since start
  // Each service's table fingerprint (control/service_state.h fingerprintText()), by name.
  std::map<std::string, std::string> fingerprints;
  uint64_t refused_version = 0;  // the last version it could not apply, if newer than `version`
  std::string refused_why;
  // Table generations (fleet/generation.h): the one it serves (0 for none), its own probes'
  // verdicts (per service, per backend, up or not), and the backends it took out on its own while
  // etcd was out of reach ("service/backend"), which the fleet shows as a divergence.
  uint64_t generation = 0;
  std::map<std::string, std::map<std::string, bool>> health;
  std::vector<std::string> fail_safe;
  // Its flow sync endpoint (sync.listen, ADDRESS:PORT), where the other instances send their
  // off-table flows (docs/scale-out.md); empty without sync.
  std::string sync;

  friend bool operator==(const InstanceReport&, const InstanceReport&) = default;
};
std::string renderInstanceReport(const InstanceReport& report);
absl::StatusOr<InstanceReport> parseInstanceReport(absl::string_view text);

// Whether the instances agree with each other and with the head: every one serves `head` (and,
// unless `generation` is 0, that table generation), took nothing out on its own (fail-safe), and
// every service has one fingerprint. Each disagreement is a line saying who differs.
struct FleetAgreement {
  bool agree = true;
  std::vector<std::string> disagreements;
};
FleetAgreement compareInstances(uint64_t head, const std::vector<InstanceReport>& instances,
                                uint64_t generation = 0);

// The file an instance keeps its last applied version in: the pushed text unchanged, then one
// comment line with the version and push id, so that the file is itself a valid version (and
// line numbers in errors stay those of the push).
std::string renderVersionCache(const FleetHead& head, absl::string_view text);
struct CachedVersion {
  FleetHead head;
  std::string text;
};
absl::StatusOr<CachedVersion> parseVersionCache(absl::string_view contents);

}  // namespace berth
