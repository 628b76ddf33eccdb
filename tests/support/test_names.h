#pragma once

#include <cctype>
#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace berth {

// A gtest parameter name from a fixture's description: its letters and digits, at most
// `longest` of them (gtest allows nothing else in a name).
inline std::string testNameOf(absl::string_view description, size_t longest = 128) {
  std::string name;
  for (char c : description) {
    if (name.size() == longest) break;
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  }
  return name;
}

}  // namespace berth
