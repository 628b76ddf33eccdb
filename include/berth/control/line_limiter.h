#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
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
  std::optional<std::string> admit(absl::Time now, std::string line) {
    // The bucket's millisecond clock may wrap; it only takes differences.
    if (!tokens_.take(static_cast<uint32_t>(absl::ToUnixMillis(now)), per_second_, per_second_)) {
      ++held_back_;
      ++held_back_total_;
      return std::nullopt;
    }
    if (held_back_ > 0) {
      absl::StrAppend(&line, " (", held_back_, " similar line(s) held back before this one)");
      held_back_ = 0;
    }
    return line;
  }
  uint64_t heldBack() const { return held_back_total_; }

 private:
  uint32_t per_second_;
  TokenBucket tokens_;
  uint64_t held_back_ = 0;
  uint64_t held_back_total_ = 0;
};

}  // namespace berth
