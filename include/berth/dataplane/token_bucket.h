#pragma once

#include <algorithm>
#include <cstdint>

namespace berth {

// A token bucket on the worker's millisecond clock, for the datapath's rate limits (connection
// inserts, ICMP error replies). Tokens are kept in thousandths, so a rate under 1,000 a second
// still refills between milliseconds. One writer, its worker; no allocation, no lock. The rate
// and burst are given at each take(), so a reload that changes them applies at once.
class TokenBucket {
 public:
  // Refills `per_second` tokens a second up to `burst`, then spends one if there is one. The
  // bucket starts full. The clock may wrap (49 days): only differences are used.
  bool take(uint32_t now_ms, uint32_t per_second, uint32_t burst) {
    const uint64_t cap = uint64_t{burst} * kScale;
    if (!started_) {
      started_ = true;
      millitokens_ = cap;
    } else {
      const uint64_t elapsed_ms = static_cast<uint32_t>(now_ms - last_ms_);
      millitokens_ = std::min(cap, millitokens_ + elapsed_ms * per_second);
    }
    last_ms_ = now_ms;
    if (millitokens_ < kScale) return false;
    millitokens_ -= kScale;
    return true;
  }

 private:
  static constexpr uint64_t kScale = 1000;  // thousandths of a token: per_second per ms

  uint64_t millitokens_ = 0;
  uint32_t last_ms_ = 0;
  bool started_ = false;
};

}  // namespace berth
