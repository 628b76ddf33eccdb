#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "berth/dataplane/counters.h"

namespace berth {

// The counter `name` among summed counters (sumCounters()), or a test failure when none has it.
inline uint64_t counterNamed(const std::vector<std::pair<std::string, uint64_t>>& totals,
                             const std::string& name) {
  for (const auto& [counter, value] : totals) {
    if (counter == name) return value;
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

// One worker's counter `name`.
inline uint64_t counterNamed(const WorkerCounters& counters, const std::string& name) {
  const WorkerCounters* workers[] = {&counters};
  return counterNamed(sumCounters(workers), name);
}

}  // namespace berth
