// berthd's config reload (SIGHUP): the new file is validated in full, and every table, the health
// monitor and the snapshot are built from it, before anything that serves traffic changes. Any
// error leaves the running config serving and is logged with its field and line.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/config/loader.h"
#include "berth/control/control_plane.h"
#include "berth/control/descriptor_budget.h"

namespace berth {

absl::Status ControlPlane::reload() {
  const absl::Time start = absl::Now();
  auto refuse = [&](absl::string_view why) {
    const std::string message = absl::StrCat("reload of ", config_path_,
                                             " refused, the running config keeps serving: ", why);
    logLine(message);
    return absl::FailedPreconditionError(message);
  };
  absl::StatusOr<Config> next = loadConfigFile(config_path_);
  if (!next.ok()) return refuse(next.status().message());
  if (const std::vector<std::string> changed = sectionsNeedingRestart(config_, *next);
      !changed.empty()) {
    return refuse(absl::StrCat(absl::StrJoin(changed, ", "),
                               " changed: ports, lcores, connection tables and the metrics "
                               "endpoint are set up at start, so this change needs a restart of "
                               "berthd"));
  }
  for (const std::string& warning : next->warnings) logLine(absl::StrCat("warning: ", warning));

  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor =
      HealthMonitor::create(*next, healthClock(), healthJitter(), health_.get());
  if (!monitor.ok()) return refuse(absl::StrCat("health: ", monitor.status().message()));
  if (absl::Status descriptors = ensureDescriptorsFor((*monitor)->checkCount());
      !descriptors.ok()) {
    return refuse(descriptors.message());
  }
  // Drains made at run time stay, for the backends the new file still has.
  absl::StatusOr<std::vector<ServiceState>> services = createServiceStates(
      next->services, [&](size_t s) { return (*monitor)->healthy(s); }, services_);
  if (!services.ok()) return refuse(services.status().message());
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      snapshotFor(next->dataplane, *services, generation_ + 1);
  if (!snapshot.ok()) return refuse(snapshot.status().message());

  // Everything is built: switch over. Connections keep their backends by stable id.
  size_t backends = 0;
  for (const ServiceConfig& service : next->services) backends += service.backends.size();
  config_ = *std::move(next);
  services_ = *std::move(services);
  health_ = *std::move(monitor);
  ++generation_;
  published_token_ = publisher_->publish(*std::move(snapshot));
  logLine(absl::StrFormat("reload of %s applied: %u service(s), %u backend(s); snapshot %u",
                          config_path_, config_.services.size(), backends, generation_));
  reportWhenInForce(start, "the reload began");
  return absl::OkStatus();
}

}  // namespace berth
