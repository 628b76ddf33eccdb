#include "berth/control/line_limiter.h"

#include "absl/strings/str_cat.h"

namespace berth {

std::optional<std::string> LineLimiter::admit(absl::Time now, std::string line) {
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

}  // namespace berth
