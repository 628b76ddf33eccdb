#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace berth {

// How config reloads have ended, file and fleet version alike (control/reload_queue.h keeps it),
// for `status` and the metrics: a refusal that SIGHUP or `systemctl reload` asked for would
// otherwise be only in the log.
struct ReloadHistory {
  uint64_t applied = 0;
  uint64_t refused = 0;
  // The last reload that ended, if any did: when, what it read, and a refusal's reason.
  absl::Time last_at = absl::InfinitePast();
  std::string last_what;
  absl::Status last_status;
  // When the config in force went into force: berthd's start until a reload applies.
  absl::Time last_success_at = absl::InfinitePast();

  bool anyEnded() const { return applied + refused > 0; }
  // Whether the last reload applied; true before any, since the start config is in force.
  bool lastSucceeded() const { return last_status.ok(); }
};

}  // namespace berth
