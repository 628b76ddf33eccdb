#include "berth/control/neighbor_resolver.h"

#include "absl/strings/str_format.h"

namespace berth {

bool NeighborResolver::turn(absl::Time now, NeighborCache::SendRequest send,
                            const std::vector<PortConfig>& ports) {
  news_.clear();
  const bool changed = cache_.turn(now, send, news_);
  for (const NeighborNews& news : news_) {
    const std::string port = news.hop.port < ports.size() ? ports[news.hop.port].name : "?";
    std::optional<std::string> line =
        log_limit_.admit(now, absl::StrFormat("port '%s': %s", port, describe(news)));
    if (line) log_(*line);
  }
  return changed;
}

std::vector<std::pair<std::string, uint64_t>> NeighborResolver::sums() const {
  std::vector<std::pair<std::string, uint64_t>> sums = cache_.sums();
  sums.emplace_back("neighbor_log_lines_held_back", log_limit_.heldBack());
  return sums;
}

}  // namespace berth
