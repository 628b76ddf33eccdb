#include "berth/control/reload_builder.h"

#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

absl::StatusOr<BuiltReload> build(const std::string& path, const DrainsByService& drains) {
  BERTH_ASSIGN_OR_RETURN(Config config, loadConfigFile(path));
  // Every backend healthy: the management loop applies the health monitor's verdicts.
  BERTH_ASSIGN_OR_RETURN(
      std::vector<ServiceState> services,
      createServiceStates(
          config.services,
          [&](size_t s) { return std::vector<bool>(config.services[s].backends.size(), true); },
          drains));
  return BuiltReload{std::move(config), std::move(services)};
}

}  // namespace

absl::StatusOr<BuiltReload> buildReload(const std::string& path, const DrainsByService& drains) {
  // The control plane's containers allocate; running out of memory refuses this reload and
  // leaves the running config serving.
  try {
    return build(path, drains);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory while parsing and building ", path));
  }
}

ReloadBuilder::ReloadBuilder() : thread_([this] { run(); }) {}

ReloadBuilder::~ReloadBuilder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool ReloadBuilder::start(std::string path, DrainsByService drains) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_) return false;
    busy_ = true;
    job_.emplace(std::move(path), std::move(drains));
  }
  wake_.notify_one();
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

void ReloadBuilder::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || job_.has_value(); });
    if (stopping_) return;
    auto [path, drains] = std::move(*job_);
    job_.reset();
    lock.unlock();
    absl::StatusOr<BuiltReload> built = buildReload(path, drains);
    lock.lock();
    result_ = std::move(built);
  }
}

}  // namespace berth
