#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "berth/dataplane/token_bucket.h"

namespace berth {

// Lets at most `per_second` log lines a second through, in bursts of as many, so that a flood of
// hostile frames cannot turn into a flood of log lines. The first line let through after some
// were held back says how many.
class LineLimiter {
 public:
  explicit LineLimiter(uint32_t per_second) : per_second_(per_second) {}

  // The line to log, or nullopt when it is held back.
  std::optional<std::string> admit(absl::Time now, std::string line);
  uint64_t heldBack() const { return held_back_total_; }

 private:
  uint32_t per_second_;
  TokenBucket tokens_;
  uint64_t held_back_ = 0;
  uint64_t held_back_total_ = 0;
};

}  // namespace berth
