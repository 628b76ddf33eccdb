#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/fleet/agreed_health.h"
#include "berth/fleet/etcd_client.h"
#include "berth/fleet/fleet_versions.h"
#include "berth/fleet/generation.h"
#include "berth/fleet/instance_roster.h"
#include "berth/fleet/lease_clock.h"
#include "berth/fleet/store.h"
#include "berth/util/background_thread.h"

namespace berth {

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
  // Table generations: the elected instance (empty while none is), whether it is this one, the
  // newest generation stored, and those it made.
  std::string leader;
  bool elected = false;
  uint64_t generation_head = 0;
  uint64_t generations_made = 0;
  std::string generation_error;  // why the last generation could not be fetched or made
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
// - table generations (fleet/generation.h): every kViewInterval it reads the elected instance,
//   the generation in force and every live report in one read; stands for election under its
//   lease when no instance is elected; fetches each newer generation and offers it decoded
//   (takeGeneration()); and, elected, plans the next generation from its services and the
//   verdicts the reports agree on, and stores it;
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
  void forgetRefusal() { versions_.forgetRefusal(); }
  // Each service's table fingerprint now, by name (after every publish); reported when changed.
  void setFingerprints(std::map<std::string, std::string> fingerprints);
  // This instance's flow sync endpoint, which the other instances send to (docs/scale-out.md).
  void setSyncEndpoint(std::string endpoint);

  // Table generations (fleet/generation.h).
  // This instance's own probe verdicts, per service and backend (after every health change), and
  // the backends it took out on its own while etcd was out of reach: reported under its lease.
  void setVerdicts(std::map<std::string, std::map<std::string, bool>> up);
  void setFailSafe(std::vector<std::string> removed);
  // The services this instance runs and the fleet version they came in: what it plans the next
  // generation from while it is the elected instance.
  void setServices(std::shared_ptr<const std::vector<ServiceConfig>> services, uint64_t version);
  // The newest generation fetched and decoded that the instance has not taken yet; once. One
  // made for a newer version than the instance runs waits while that version is on its way
  // (fetched or being built), so that the two apply in order.
  std::shared_ptr<const FleetGeneration> takeGeneration();
  // The instance serves generation `number` now: reported.
  void generationApplied(uint64_t number);
  // The health the live instances' reports agree on, with those of instances that left less
  // than kDepartedHold ago, as last read (empty before).
  const AgreedHealth& agreedHealth() const { return roster_.agreed(); }
  // The live instances' reports, as last read.
  const std::vector<InstanceReport>& instanceReports() const { return roster_.reports(); }
  // How often the agent reads the leader, the generation and the instances' reports.
  static constexpr absl::Duration kViewInterval = absl::Milliseconds(500);
  // How long an instance that left still counts with its last verdicts (fleet/instance_roster.h).
  static constexpr absl::Duration kDepartedHold = InstanceRoster::kDepartedHold;

  FleetAgentStatus status() const { return status_; }
  const std::optional<FleetHead>& running() const { return versions_.running(); }

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
  void fetch(const FleetHead& head);
  void fetched(const FleetHead& head, const VersionManifest& manifest,
               const std::vector<EtcdKeyValue>& pieces);
  // A call answered: etcd is reachable; or failed: counted, logged on the first of a run.
  void answered();
  void failed(absl::string_view what, const absl::Status& status);
  void loseLease();

  // Generations (agent_generations.cc): each turn reads the fleet's leader, generation and
  // reports together; stands for election when no instance is elected; fetches a newer
  // generation's tables; and, elected, plans and stores the next generation when its inputs
  // change. Decoding and planning run on background_.
  void turnGenerations(absl::Time now);
  void viewFleet();
  void viewed(const EtcdClient::Json& reply);
  void campaign();
  void fetchGeneration(const GenerationManifest& manifest);
  void decodeGeneration(GenerationManifest manifest, std::map<std::string, std::string> pieces);
  void collectBackground();
  void planNext();
  void storeGeneration(PlannedGeneration planned);
  void stageNext(std::shared_ptr<const PlannedGeneration> planned,
                 std::vector<std::vector<std::pair<std::string, std::string>>> batches,
                 size_t next);
  void commitGeneration(std::shared_ptr<const PlannedGeneration> planned);
  void dropUnneededTables(const GenerationManifest& committed,
                          std::optional<GenerationManifest> previous);
  void generationFailed(absl::string_view what, const absl::Status& status);
  EtcdCompare leaderCompare() const;

  const FleetConfig fleet_;
  const FleetKeys keys_;
  const GenerationKeys generation_keys_;
  Log log_;
  std::unique_ptr<EtcdClient> client_;
  // Callbacks hold a weak token, so that one arriving after the agent is gone does nothing.
  std::shared_ptr<FleetAgent*> alive_;
  absl::Time now_ = absl::InfinitePast();

  // A call to etcd made one at a time, and not again before `not_before` (after a failure, the
  // retry interval; for the view, its interval).
  struct Attempt {
    bool in_flight = false;
    absl::Time not_before = absl::InfinitePast();
    bool due(absl::Time now) const { return !in_flight && now >= not_before; }
  };

  // The lease, the name claimed under it, and the report put under it.
  LeaseClock lease_;
  Attempt claim_;
  struct OwnReport {
    InstanceReport report;
    bool dirty = true;
    bool put_in_flight = false;
  } own_;

  // The watch on the head, and the versions it brings.
  enum class WatchState { kIdle, kReading, kWatching };
  struct HeadWatch {
    WatchState state = WatchState::kIdle;
    uint64_t id = 0;
    absl::Time not_before = absl::InfinitePast();
  } watch_;
  FleetVersions versions_;
  Attempt fetch_;

  // Generations: the view of the fleet (leader, generation, reports), the election, the
  // generation stored in etcd and the one this instance holds.
  Attempt view_;
  InstanceRoster roster_;
  struct Leadership {
    int64_t revision = 0;  // the leader key's create revision while this instance leads
    bool campaign_in_flight = false;
  } leadership_;
  struct StoredGeneration {
    std::optional<GenerationManifest> manifest;  // the newest generation in etcd
    int64_t revision = 0;                        // its key's mod revision; 0 when absent
  } stored_;
  struct HeldGenerations {
    std::shared_ptr<const FleetGeneration> current;  // decoded, held
    std::shared_ptr<const FleetGeneration> offered;  // not yet taken by the instance
    uint64_t fetching = 0;    // the generation being fetched or decoded; 0 for none
    uint64_t unreadable = 0;  // a stored generation that could not be read: planned past
    absl::Time not_before = absl::InfinitePast();
  } generations_;
  // What the elected instance plans from: its services, their fleet version, and a count of
  // setServices() calls.
  struct ServicesToPlan {
    std::shared_ptr<const std::vector<ServiceConfig>> list;
    uint64_t version = 0;
    uint64_t serial = 0;
  } services_;
  // What the last plan was made from, so that only a change plans again.
  struct PlanInputs {
    uint64_t generation = 0;
    uint64_t services = 0;  // services_.serial
    std::map<std::string, std::set<std::string>> down;
    std::map<std::string, std::set<std::string>> judged;
    friend bool operator==(const PlanInputs&, const PlanInputs&) = default;
  };
  std::optional<PlanInputs> planned_from_;
  Attempt plan_;  // in flight: planning on background_, or storing
  // Results of background_'s jobs, taken by collectBackground().
  struct BackgroundResults {
    std::mutex mutex;
    std::optional<absl::StatusOr<FleetGeneration>> decoded;
    std::optional<absl::StatusOr<std::optional<PlannedGeneration>>> planned;
  } results_;

  FleetAgentStatus status_;
  // Last: stopped before what its jobs touch goes.
  std::unique_ptr<BackgroundThread> background_ = std::make_unique<BackgroundThread>(2);
};

template <typename Body>
EtcdClient::Reply FleetAgent::guarded(Body body) {
  return [weak = std::weak_ptr<FleetAgent*>(alive_),
          body = std::move(body)](absl::StatusOr<EtcdClient::Json> reply) mutable {
    if (const std::shared_ptr<FleetAgent*> agent = weak.lock()) body(**agent, std::move(reply));
  };
}

}  // namespace berth
