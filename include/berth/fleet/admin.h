#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/fleet/agreed_health.h"
#include "berth/fleet/etcd_client.h"
#include "berth/fleet/generation.h"
#include "berth/fleet/store.h"

namespace berth {

// What `berthctl fleet` does against etcd (docs/scale-out.md, "A fleet through etcd"): push a
// version, and read the fleet's status. Both run on the client's callbacks; the caller turns it.

// A validated fleet version to push: its text as read, the name errors give it, and its services'
// names and first lines (from the loader), which decide its pieces.
struct PushRequest {
  std::string text;
  std::string source;
  std::vector<std::pair<std::string, int>> service_lines;
  std::string pushed_by;
  uint32_t keep_versions = 10;
};

struct PushOutcome {
  uint64_t version = 0;
  std::string push_id;
  int64_t revision = 0;  // the store's revision with the version in it
  // What retention did or could not do; the push stands either way.
  std::vector<std::string> notes;
};

// Pushes `request` as the fleet's next version:
//   1. reads the head (version N at revision R);
//   2. stores the text's pieces under P/pieces/<a new push id>/, in transactions within etcd's
//      limits;
//   3. in one transaction that holds only if the head is still at R, puts the manifest of N+1
//      and the head. Another push in between makes it fail: the pieces are deleted, and the
//      outcome is Aborted, naming the version that won;
//   4. deletes what retention plans (store.h planRetention) and compacts older revisions.
// `done` is called once.
void pushVersion(EtcdClient& client, const FleetKeys& keys, PushRequest request,
                 std::function<void(absl::StatusOr<PushOutcome>)> done);

// The fleet as etcd holds it at one revision: the head, its manifest, and every live instance's
// report (instances whose report cannot be read are listed by key in `unreadable`).
// With them, the table generation in force, the elected instance, and the health the
// instances' verdicts agree on with `health_quorum` (agreed_health.h; 0 for a majority).
struct FleetStatus {
  int64_t revision = 0;
  std::optional<FleetHead> head;
  std::optional<VersionManifest> manifest;
  std::vector<InstanceReport> instances;
  std::vector<std::string> unreadable;
  std::string leader;
  std::optional<GenerationManifest> generation;
  AgreedHealth health;

  FleetAgreement agreement() const;
};
void readFleetStatus(EtcdClient& client, const FleetKeys& keys,
                     std::function<void(absl::StatusOr<FleetStatus>)> done,
                     uint32_t health_quorum = 0);

// `berthctl fleet status` as text: the head, one line per instance, each service's fingerprint per
// instance, and whether they agree (compareInstances).
std::string renderFleetStatus(const FleetStatus& status);
// The same as JSON.
std::string renderFleetStatusJson(const FleetStatus& status);

}  // namespace berth
