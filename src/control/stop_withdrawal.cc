#include "berth/control/stop_withdrawal.h"

namespace berth {

void StopWithdrawal::stopAsked(absl::Time now) {
  if (!stopping()) stop_asked_ = now;
}

void StopWithdrawal::withdrawalConfirmed(absl::Time now) {
  if (stopping() && !confirmed()) confirmed_at_ = now;
}

absl::Time StopWithdrawal::forwardUntil() const {
  if (!stopping()) return absl::InfiniteFuture();
  if (confirmed()) return confirmed_at_ + forward_after_withdrawal_;
  return stop_asked_ + confirmation_limit_;
}

}  // namespace berth
