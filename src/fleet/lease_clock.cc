#include "berth/fleet/lease_clock.h"

namespace berth {

LeaseClock::Step LeaseClock::next(absl::Time now) const {
  if (in_flight_) return Step::kNothing;
  if (id_ == 0) return now < retry_at_ ? Step::kNothing : Step::kGrant;
  if (now - last_keepalive_ > ttl_) return Step::kExpired;
  return now < next_keepalive_ ? Step::kNothing : Step::kKeepAlive;
}

void LeaseClock::granted(int64_t id, absl::Time now) {
  in_flight_ = false;
  id_ = id;
  renewed(now);
}

void LeaseClock::grantFailed(absl::Time now) {
  in_flight_ = false;
  retry_at_ = now + retry_;
}

void LeaseClock::renewed(absl::Time now) {
  in_flight_ = false;
  last_keepalive_ = now;
  next_keepalive_ = now + ttl_ / 3;
}

void LeaseClock::renewFailed(absl::Time now) {
  in_flight_ = false;
  next_keepalive_ = now + retry_;
}

void LeaseClock::lost() {
  in_flight_ = false;
  if (id_ != 0) previous_ = id_;
  id_ = 0;
}

}  // namespace berth
