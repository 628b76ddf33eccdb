#pragma once

#include "absl/time/time.h"

namespace berth {

// How a stop with BGP announcements ends (docs/scale-out.md, "a graceful stop"). On SIGINT or
// SIGTERM, `announce` says "stopping" at once and berthd goes on forwarding: routers still send
// it flows until BIRD's withdrawal has reached them. berth-announcer reports back (`announce
// --announced 0`) once BIRD holds none of the routes; from then on berthd forwards
// `forward_after_withdrawal` more, the time routers get to take the UPDATE into their FIBs.
// Counting from the announcer's report rather than from the signal keeps the announcer's poll
// interval and a slow `birdc configure` out of that time. Without a report within
// `confirmation_limit` of the stop (no announcer, or one that is stuck), berthd stops anyway, so
// a stop is bounded. One exists from the stop on. Pure: the caller brings the clock.
class StopWithdrawal {
 public:
  StopWithdrawal(absl::Time stop_asked, absl::Duration forward_after_withdrawal,
                 absl::Duration confirmation_limit)
      : stop_asked_(stop_asked),
        forward_after_withdrawal_(forward_after_withdrawal),
        confirmation_limit_(confirmation_limit) {}

  // An announcer reported that BIRD holds none of the routes. Only the first report counts: the
  // announcer repeats it every round.
  void withdrawalConfirmed(absl::Time now) {
    if (!confirmed()) confirmed_at_ = now;
  }

  bool confirmed() const { return confirmed_at_ != absl::InfiniteFuture(); }
  // When the workers may stop: the report plus forward_after_withdrawal, or without a report,
  // the stop plus confirmation_limit.
  absl::Time forwardUntil() const {
    return confirmed() ? confirmed_at_ + forward_after_withdrawal_
                       : stop_asked_ + confirmation_limit_;
  }
  bool done(absl::Time now) const { return now >= forwardUntil(); }

  absl::Duration forwardAfterWithdrawal() const { return forward_after_withdrawal_; }
  absl::Duration confirmationLimit() const { return confirmation_limit_; }

 private:
  absl::Time stop_asked_;
  absl::Duration forward_after_withdrawal_;
  absl::Duration confirmation_limit_;
  absl::Time confirmed_at_ = absl::InfiniteFuture();
};

}  // namespace berth
