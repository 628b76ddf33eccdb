#include "berth/util/did_you_mean.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace berth {

size_t editDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearestName(absl::string_view word,
                                       absl::Span<const std::string> candidates) {
  const size_t limit = std::min<size_t>(3, (word.size() + 1) / 2);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = editDistance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best) return best;
  // A word that adds a qualifier to a candidate's name: berthd's --control-socket for berthctl's
  // --socket.
  for (const std::string& candidate : candidates) {
    if (absl::EndsWith(word, absl::StrCat("-", candidate)) ||
        absl::StartsWith(word, absl::StrCat(candidate, "-"))) {
      return candidate;
    }
  }
  return std::nullopt;
}

}  // namespace berth
