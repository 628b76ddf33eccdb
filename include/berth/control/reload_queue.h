#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/control/reload_builder.h"
#include "berth/control/reload_history.h"
#include "berth/fleet/agent.h"

namespace berth {

// What the reload subsystem needs of the management loop: the sources of a build, and the apply
// or refusal of a finished one. The loop implements it.
class ReloadTarget {
 public:
  virtual ~ReloadTarget() = default;
  // A reload of the local file, composed with the fleet version in force.
  virtual ReloadSource fileSource() const = 0;
  // Fleet version `version`, composed with the local file's part in force.
  virtual ReloadSource versionSource(const FleetVersionText& version) const = 0;
  // Each service's base table from the table generation in force, asked at each build's start.
  virtual GenerationBase generationBase() const = 0;
  // The run-time drains in force, which a build keeps.
  virtual DrainsByService drains() const = 0;
  // Applies a finished build, or refuses it with its reason (logged); a refusal is the status.
  virtual absl::Status applyReload(BuiltReload built) = 0;
  virtual absl::Status refuseReload(absl::string_view why) = 0;
  // The outcome of fleet version `version`: `why` is a refusal's reason without the log's
  // preamble.
  virtual void versionDone(FleetVersionText version, const absl::Status& status,
                           const std::string& why) = 0;
  // The snapshot in force, which a reload's reply names.
  virtual uint64_t snapshotGeneration() const = 0;
};

// The reload subsystem of the management loop (docs/architecture.md, "The management loop"): the
// builder's thread (control/reload_builder.h), the reloads asked for (SIGHUP, `berthctl reload`)
// and the fleet versions offered, one build at a time, and how each request ended. A request
// starts a build, or, while one runs, is answered by the next, which begins after it; between
// reloads, the fleet's newest version is built. A build that a drain overtook is built again, so
// that no drain is lost. Never waits.
class ReloadQueue {
 public:
  using Log = std::function<void(const std::string&)>;
  // The builder's thread starts here: berthd makes the queue on its management lcore.
  ReloadQueue(ReloadTarget& target, Log log) : target_(target), log_(std::move(log)) {}

  // A reload asked for: its number. Starts a build unless one is under way.
  uint64_t request();
  // A drain or undrain changed the tables: a build under way is built again once it finishes.
  void drainChanged() { ++drain_changes_; }
  // Each turn: a finished build applied (or refused), then the next build started: a reload
  // asked for, else the version `take_version` offers.
  void serve(const std::function<std::optional<FleetVersionText>()>& take_version);
  // How request `request` ended, once a build begun after it has: its status, and the snapshot
  // then. nullopt while it waits.
  std::optional<absl::Status> outcome(uint64_t request, uint64_t* generation) const;

  // The build under way, for the log lines and refusals of its apply.
  struct Build {
    std::string what;  // the file's path or "fleet version N (...)"
    absl::Time start;
    bool fleet_version = false;
  };
  const Build& building() const { return build_; }
  static constexpr size_t kOutcomesKept = 16;

  const ReloadHistory& history() const { return history_; }
  // The config berthd started with went into force at `at`.
  void startedAt(absl::Time at) { history_.last_success_at = at; }

 private:
  bool underWay() const { return building_request_ != 0 || building_version_.has_value(); }
  void startFileBuild();
  void startBuild(ReloadSource source);
  void finish(absl::StatusOr<BuiltReload> built);

  ReloadTarget& target_;
  Log log_;
  ReloadBuilder builder_;
  uint64_t requested_ = 0;         // the latest request's number
  uint64_t building_request_ = 0;  // the request the build under way answers, or 0
  std::optional<FleetVersionText> building_version_;  // the fleet version being built
  Build build_;
  ReloadSource build_source_;   // what the build under way reads, to build again after a drain
  uint64_t drain_changes_ = 0;  // drains and undrains so far
  uint64_t build_drains_ = 0;   // drain_changes_ when the build under way began
  struct Outcome {
    uint64_t request;
    absl::Status status;
    uint64_t generation;
  };
  std::deque<Outcome> outcomes_;
  ReloadHistory history_;
};

}  // namespace berth
