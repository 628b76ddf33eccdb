#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace berth {

// Whether the workers still make progress, judged the way the RCU publisher already needs them
// to: every probe interval the management thread starts a grace period (rte_rcu_qsbr_start) and
// then checks it without waiting. Once every worker has passed a quiescent state the period is
// over and the next one starts; a period still open after `threshold` means some worker is stuck
// (a hung PMD, a livelock, a lost CPU), and berthd withdraws its BGP routes until it ends. Pure:
// the clock and the RCU calls come from the caller, so tests drive it by hand.
class StallWatch {
 public:
  StallWatch(absl::Duration probe_interval, absl::Duration threshold)
      : probe_interval_(probe_interval), threshold_(threshold) {}

  // What the caller must do next.
  enum class Step {
    kNothing,
    kStartGracePeriod,  // start one and report its token with started()
    kCheck,             // check the open one without waiting and report with checked()
  };
  Step next(absl::Time now) const {
    if (open_) return Step::kCheck;
    return now - opened_at_ >= probe_interval_ ? Step::kStartGracePeriod : Step::kNothing;
  }
  void started(uint64_t token, absl::Time now) {
    token_ = token;
    opened_at_ = now;
    open_ = true;
  }
  // `all_passed`: every worker passed a quiescent state since the period started.
  void checked(bool all_passed, absl::Time now) {
    if (all_passed) {
      open_ = false;
      stalled_ = false;
    } else if (now - opened_at_ > threshold_) {
      stalled_ = true;
    }
  }

  uint64_t token() const { return token_; }
  bool stalled() const { return stalled_; }
  // How long the open grace period has lasted; zero when none is open.
  absl::Duration openFor(absl::Time now) const {
    return open_ ? now - opened_at_ : absl::ZeroDuration();
  }

 private:
  absl::Duration probe_interval_;
  absl::Duration threshold_;
  uint64_t token_ = 0;
  absl::Time opened_at_ = absl::InfinitePast();
  bool open_ = false;
  bool stalled_ = false;
};

}  // namespace berth
