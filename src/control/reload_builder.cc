#include "berth/control/reload_builder.h"

#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

absl::StatusOr<Config> localOf(const ReloadSource& source) {
  if (source.path.empty()) {
    if (!source.local) return absl::InvalidArgumentError("a build needs a file or a local config");
    return *source.local;
  }
  return loadConfigFile(source.path);
}

absl::StatusOr<BuiltReload> build(const ReloadSource& source, const DrainsByService& drains) {
  BERTH_ASSIGN_OR_RETURN(Config local, localOf(source));
  Config config = local;
  if (local.fleet && source.fleet_text) {
    BERTH_ASSIGN_OR_RETURN(config,
                           composeFleetConfig(local, *source.fleet_text, source.fleet_source));
  }
  // Every backend healthy: the management loop applies the health monitor's verdicts.
  BERTH_ASSIGN_OR_RETURN(std::vector<ServiceState> services,
                         createServiceStates(config.services, drains, source.generation));
  return BuiltReload{std::move(config), std::move(services), std::move(local)};
}

}  // namespace

absl::StatusOr<BuiltReload> buildReload(const ReloadSource& source, const DrainsByService& drains) {
  // The control plane's containers allocate; running out of memory refuses this reload and
  // leaves the running config serving.
  try {
    return build(source, drains);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory while parsing and building ", source.what()));
  }
}

bool ReloadBuilder::start(ReloadSource source, DrainsByService drains) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_) return false;
    busy_ = true;
  }
  thread_.post([this, source = std::move(source), drains = std::move(drains)] {
    absl::StatusOr<BuiltReload> built = buildReload(source, drains);
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(built);
  });
  return true;
}

std::optional<absl::StatusOr<BuiltReload>> ReloadBuilder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!result_) return std::nullopt;
  std::optional<absl::StatusOr<BuiltReload>> result = std::move(result_);
  result_.reset();
  busy_ = false;
  return result;
}

}  // namespace berth
