#pragma once

#include <cstddef>

#include "absl/strings/string_view.h"

namespace berth {

// Enumerations whose values are counters, declared from one X-macro list of (enumerator,
// "counter_name") pairs, so that an enum and its names cannot drift apart:
//
//   #define BERTH_COLORS(X) X(kRed, "red") X(kBlue, "blue")
//   enum class Color : uint8_t { BERTH_COLORS(BERTH_ENUMERATOR) kCount };
//   absl::string_view toString(Color color) {
//     static constexpr absl::string_view kNames[] = {BERTH_COLORS(BERTH_ENUMERATOR_NAME)};
//     return nameIn(kNames, color);
//   }
#define BERTH_ENUMERATOR(name, text) name,
#define BERTH_ENUMERATOR_NAME(name, text) text,

// names[value], or "unknown" for a value past the list.
template <size_t N, typename Enum>
constexpr absl::string_view nameIn(const absl::string_view (&names)[N], Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : "unknown";
}

}  // namespace berth
