#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace berth {

// When the fleet agent grants, renews or gives up its etcd lease: renewed at a third of its TTL,
// counted lost once unrenewed for a whole TTL (etcd has let it go, and the report under it), and
// a failed grant or renewal asked again after the retry interval. Pure: the agent makes the
// calls and reports their outcome.
class LeaseClock {
 public:
  enum class Step {
    kNothing,
    kGrant,      // ask for a lease, then granted() or grantFailed()
    kKeepAlive,  // renew it, then renewed(), renewFailed() or lost()
    kExpired,    // unrenewed for a whole TTL: lost()
  };

  LeaseClock(absl::Duration ttl, absl::Duration retry) : ttl_(ttl), retry_(retry) {}

  Step next(absl::Time now) const;
  // A call of next()'s step is under way; no other step until its outcome.
  void asked() { in_flight_ = true; }
  void granted(int64_t id, absl::Time now);
  void grantFailed(absl::Time now);
  void renewed(absl::Time now);
  void renewFailed(absl::Time now);
  // The lease is gone (expired, or etcd no longer has it): the next step grants a new one. It is
  // kept as previous(), which may still hold this instance's name until etcd expires it.
  void lost();
  // Revoked at a clean stop.
  void revoked() { id_ = 0; }

  // The lease; 0 for none.
  int64_t id() const { return id_; }
  int64_t previous() const { return previous_; }

 private:
  absl::Duration ttl_;
  absl::Duration retry_;
  int64_t id_ = 0;
  int64_t previous_ = 0;
  bool in_flight_ = false;
  absl::Time retry_at_ = absl::InfinitePast();
  absl::Time next_keepalive_ = absl::InfinitePast();
  absl::Time last_keepalive_ = absl::InfinitePast();
};

}  // namespace berth
