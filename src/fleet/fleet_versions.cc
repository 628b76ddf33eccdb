#include "berth/fleet/fleet_versions.h"

namespace berth {

std::optional<FleetHead> FleetVersions::toFetch() const {
  if (!newest_ || newest_ == running_ || newest_ == refused_ || newest_ == building_ ||
      (offered_ && offered_->head == *newest_)) {
    return std::nullopt;
  }
  return newest_;
}

void FleetVersions::offer(FleetVersionText version) {
  if (newest_ != version.head) return;  // overtaken while it was fetched
  offered_ = std::move(version);
}

std::optional<FleetVersionText> FleetVersions::take() {
  if (!offered_) return std::nullopt;
  building_ = offered_->head;
  return std::exchange(offered_, std::nullopt);
}

void FleetVersions::applied(const FleetHead& head) {
  if (building_ == head) building_.reset();
  running_ = head;
}

void FleetVersions::refused(const FleetHead& head) {
  if (building_ == head) building_.reset();
  refused_ = head;
}

bool FleetVersions::onItsWay(uint64_t version) const {
  return newest_ && newest_->version >= version && newest_ != refused_ &&
         (!running_ || running_->version < version);
}

}  // namespace berth
