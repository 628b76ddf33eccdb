#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/control/service_state.h"
#include "berth/util/background_thread.h"

namespace berth {

// What a reload builds away from the management loop (docs/architecture.md, "The management
// loop"): the config file parsed and validated, and every service's state with the run-time
// drains kept and every backend healthy. Parsing a 65,535-backend file takes seconds; the loop
// then applies health (it owns the health monitor) and publishes, which is quick.
struct BuiltReload {
  Config config;
  std::vector<ServiceState> services;
  // With a fleet section: the local file's part alone (no services), which later fleet versions
  // are composed with.
  Config local;
};

// What a build reads. A reload re-reads the local file at `path`; a fleet version keeps the
// local part in force (`local`). With a fleet section, the fleet version's text (`fleet_text`,
// named `fleet_source` in errors) is composed with the local part (config/loader.h
// composeFleetConfig); without a version yet, the instance has no services.
struct ReloadSource {
  std::string path;
  std::optional<Config> local;  // with an empty path
  std::optional<std::string> fleet_text;
  std::string fleet_source;
  // In a fleet with table generations: each service's base table from the generation in force.
  GenerationBase generation;
  // What log lines and errors call this build: the path, or the fleet version.
  std::string what() const { return path.empty() ? fleet_source : path; }
};

// Parses what `source` names and builds its services with `drains`. Every error is a refusal
// that says why, an allocation failure included.
absl::StatusOr<BuiltReload> buildReload(const ReloadSource& source, const DrainsByService& drains);

// Runs buildReload on a thread of its own (util/background_thread.h), one build at a time.
// berthd creates it on the management lcore, so a build never runs on a worker's CPU.
class ReloadBuilder {
 public:
  ReloadBuilder() = default;
  // Waits for a build under way, then stops the thread.
  ~ReloadBuilder() = default;
  ReloadBuilder(const ReloadBuilder&) = delete;
  ReloadBuilder& operator=(const ReloadBuilder&) = delete;

  // Starts building; false (and nothing started) while a build is under way or not yet taken.
  bool start(ReloadSource source, DrainsByService drains);
  // The finished build, once; nullopt while none has finished. Never waits.
  std::optional<absl::StatusOr<BuiltReload>> take();

 private:
  std::mutex mutex_;
  bool busy_ = false;  // from start() until take() returns the result
  std::optional<absl::StatusOr<BuiltReload>> result_;
  BackgroundThread thread_{1};  // last: stopped before what its job touches goes
};

}  // namespace berth
