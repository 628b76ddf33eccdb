#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth {

// "Did you mean" for a mistyped command, flag or option: the candidate nearest `word` by edit
// distance (Levenshtein), if one is near enough to be a typo: at most 3 edits, and fewer than
// half of the word's letters, so that "stat" finds "stats" but "foo" finds nothing. Failing
// that, a candidate the word holds as its first or last hyphen-separated words:
// "control-socket" finds "socket".
std::optional<std::string> nearestName(absl::string_view word,
                                       absl::Span<const std::string> candidates);

size_t editDistance(absl::string_view a, absl::string_view b);

}  // namespace berth
