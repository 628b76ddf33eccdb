#include "berth/control/reload_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace berth {

uint64_t ReloadQueue::request() {
  ++requested_;
  if (!underWay()) startFileBuild();
  return requested_;
}

void ReloadQueue::startFileBuild() {
  // A build answers every request made before it began.
  building_request_ = requested_;
  startBuild(target_.fileSource());
}

void ReloadQueue::startBuild(ReloadSource source) {
  build_drains_ = drain_changes_;
  build_.start = absl::Now();
  build_.fleet_version = building_version_.has_value();
  source.generation = target_.generationBase();
  build_.what = source.what();
  build_source_ = source;
  builder_.start(std::move(source), target_.drains());
}

void ReloadQueue::serve(const std::function<std::optional<FleetVersionText>()>& take_version) {
  if (std::optional<absl::StatusOr<BuiltReload>> built = builder_.take()) {
    finish(*std::move(built));
  }
  if (underWay()) return;
  const uint64_t answered = outcomes_.empty() ? 0 : outcomes_.back().request;
  if (requested_ > answered) {
    startFileBuild();
  } else if (std::optional<FleetVersionText> version = take_version()) {
    ReloadSource source = target_.versionSource(*version);
    building_version_ = *std::move(version);
    startBuild(std::move(source));
  }
}

void ReloadQueue::finish(absl::StatusOr<BuiltReload> built) {
  if (built.ok() && drain_changes_ != build_drains_) {
    log_(absl::StrCat(build_.what,
                      ": a drain changed while the new config was being built; building again"));
    startBuild(build_source_);
    return;
  }
  // The fleet hears why a version was refused, without the log line's preamble.
  std::string why = built.ok() ? "" : std::string(built.status().message());
  const absl::Status status =
      built.ok() ? target_.applyReload(*std::move(built)) : target_.refuseReload(why);
  const absl::Time now = absl::Now();
  ++(status.ok() ? history_.applied : history_.refused);
  history_.last_at = now;
  history_.last_what = build_.what;
  // The refusal's reason, without the log line's preamble where the build itself failed.
  history_.last_status = status.ok() || why.empty() ? status : absl::Status(status.code(), why);
  if (status.ok()) history_.last_success_at = now;
  if (building_version_) {
    FleetVersionText version = *std::move(building_version_);
    building_version_.reset();
    target_.versionDone(std::move(version), status, why);
    return;
  }
  outcomes_.push_back({building_request_, status, target_.snapshotGeneration()});
  if (outcomes_.size() > kOutcomesKept) outcomes_.pop_front();
  building_request_ = 0;
}

std::optional<absl::Status> ReloadQueue::outcome(uint64_t request, uint64_t* generation) const {
  for (const Outcome& outcome : outcomes_) {
    if (outcome.request < request) continue;
    if (generation != nullptr) *generation = outcome.generation;
    return outcome.status;
  }
  return std::nullopt;
}

}  // namespace berth
