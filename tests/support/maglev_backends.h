#pragma once

#include <cstddef>
#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/table.h"

namespace berth {

// `count` backends of weight 1 named backend-00000, backend-00001, ...: already in name order,
// as configs usually are. Shared by the Maglev tests and benchmarks.
inline std::vector<Backend> equalBackends(size_t count) {
  std::vector<Backend> backends;
  backends.reserve(count);
  for (size_t i = 0; i < count; ++i) backends.push_back({absl::StrFormat("backend-%05d", i), 1});
  return backends;
}

}  // namespace berth
