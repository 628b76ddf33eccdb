#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/fleet/etcd_client.h"
#include "berth/fleet/store.h"

namespace berth {

// A fleet version fetched from etcd, whole, for the instance to build and apply.
struct FleetVersionText {
  FleetHead head;
  std::string text;
  // What errors name: "fleet version N (FILE)", the pushed file's name as its lines are counted.
  std::string source;
};

// What the agent knows, for `status`, the metrics and the log.
struct FleetAgentStatus {
  bool etcd_reachable = false;  // the last call to etcd was answered
  bool registered = false;      // this instance's report is under its lease
  bool from_cache = false;      // serving the cached version; etcd not yet heard from
  uint64_t running_version = 0;
  uint64_t head_version = 0;  // the newest head seen; 0 before etcd answered
  uint64_t refused_version = 0;
  std::string refused_why;
  uint64_t versions_applied = 0;
  uint64_t versions_refused = 0;
  uint64_t etcd_errors = 0;
  std::string last_error;
};

// The etcd client's settings for a fleet section: its endpoints and TLS files.
EtcdSettings etcdSettingsFor(const FleetConfig& fleet);

// One instance's part in a fleet (docs/scale-out.md, "A fleet through etcd"), driven by berthd's
// management loop through turn(), which never waits (etcd_client.h):
// - a lease of the fleet section's TTL, kept alive at a third of it, with this instance's report
//   under P/instances/<name> (store.h InstanceReport): the version it serves, when it applied it,
//   each service's table fingerprint, and the last version it refused and why. A name another live
//   instance holds is not taken; the agent says so and tries again;
// - a watch on P/head: each new head's manifest and pieces are fetched and offered to the instance
//   (takeVersion()), which builds it off the loop and says applied() or refused(). Heads only move
//   forward; a head that arrives while an earlier one is still being fetched or built replaces it,
//   so the newest version wins and none is applied after a newer one;
// - whatever fails (etcd down, a compacted watch, an odd value) is retried every retry interval,
//   and the instance keeps serving what it runs.
class FleetAgent {
 public:
  using Log = std::function<void(const std::string&)>;

  // `running`: the version the instance serves at start, from its cache, if any.
  static absl::StatusOr<std::unique_ptr<FleetAgent>> create(const FleetConfig& fleet,
                                                            std::string berth_version,
                                                            std::optional<FleetHead> running,
                                                            Log log);
  ~FleetAgent();
  FleetAgent(const FleetAgent&) = delete;
  FleetAgent& operator=(const FleetAgent&) = delete;

  void turn(absl::Time now);

  // The newest fetched version the instance neither runs nor refused; once.
  std::optional<FleetVersionText> takeVersion();
  // The instance's verdict on a version takeVersion() gave it.
  void applied(const FleetHead& head, int64_t applied_at_ms);
  void refused(const FleetHead& head, const std::string& why);
  // The next turn fetches the head again even if it was refused: a reload asked for it, perhaps
  // after the local cause (ports, descriptors) was mended. The report keeps the refusal until a
  // version is applied.
  void forgetRefusal() { refused_.reset(); }
  // Each service's table fingerprint now, by name (after every publish); reported when changed.
  void setFingerprints(std::map<std::string, std::string> fingerprints);

  FleetAgentStatus status() const { return status_; }
  const std::optional<FleetHead>& running() const { return running_; }

  // At a clean stop: revokes the lease, so that the instance leaves the fleet's status at once and
  // its name is free for a restart. Waits at most `deadline` (berthd is stopping, its loop done).
  void leave(absl::Time deadline);

  static constexpr absl::Duration kRetryInterval = absl::Seconds(1);

 private:
  FleetAgent(const FleetConfig& fleet, std::string berth_version, std::optional<FleetHead> running,
             Log log, std::unique_ptr<EtcdClient> client);
  // A callback (a call's reply or a watch's message) that runs `body(agent, reply)` only while
  // the agent lives.
  template <typename Body>
  EtcdClient::Reply guarded(Body body);
  void keepLease(absl::Time now);
  void claimName();
  void putReport();
  void watchHead(absl::Time now);
  void noteHead(const FleetHead& head);
  void fetch();
  void fetched(const FleetHead& head, const VersionManifest& manifest,
               const std::vector<EtcdKeyValue>& pieces);
  // A call answered: etcd is reachable; or failed: counted, logged on the first of a run.
  void answered();
  void failed(absl::string_view what, const absl::Status& status);
  void loseLease();

  const FleetConfig fleet_;
  const FleetKeys keys_;
  Log log_;
  std::unique_ptr<EtcdClient> client_;
  // Callbacks hold a weak token, so that one arriving after the agent is gone does nothing.
  std::shared_ptr<FleetAgent*> alive_;
  absl::Time now_ = absl::InfinitePast();

  // The lease and the report under it.
  int64_t lease_ = 0;
  int64_t previous_lease_ = 0;  // the lease before a lost one, which may still hold the name
  bool lease_in_flight_ = false;
  absl::Time lease_retry_at_ = absl::InfinitePast();
  absl::Time next_keepalive_ = absl::InfinitePast();
  absl::Time last_keepalive_ = absl::InfinitePast();
  bool claim_in_flight_ = false;
  absl::Time claim_retry_at_ = absl::InfinitePast();
  InstanceReport report_;
  bool report_dirty_ = true;
  bool put_in_flight_ = false;

  // The watch on the head, and the versions it brings.
  enum class WatchState { kIdle, kReading, kWatching };
  WatchState watch_state_ = WatchState::kIdle;
  uint64_t watch_id_ = 0;
  absl::Time watch_retry_at_ = absl::InfinitePast();
  std::optional<FleetHead> newest_;  // the newest head seen
  bool fetch_in_flight_ = false;
  absl::Time fetch_retry_at_ = absl::InfinitePast();
  std::optional<FleetVersionText> offered_;  // fetched, not yet taken
  std::optional<FleetHead> building_;        // taken, no verdict yet
  std::optional<FleetHead> running_;
  std::optional<FleetHead> refused_;

  FleetAgentStatus status_;
};

}  // namespace berth
