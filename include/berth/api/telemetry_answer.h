#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace berth {

// A telemetry command's answer, before it becomes rte_tel_data: a flat dict whose values are
// numbers, strings, or arrays of either (DPDK 22.11's telemetry nests no deeper). Tables go
// column by column, each column an array in the same row order.
using TelemetryValue =
    std::variant<uint64_t, std::string, std::vector<uint64_t>, std::vector<std::string>>;
struct TelemetryAnswer {
  std::vector<std::pair<std::string, TelemetryValue>> entries;
  std::string error;  // non-empty: the command's parameters were wrong
};

// Rows a telemetry table answer carries at most; a longer table continues from `first`.
inline constexpr size_t kTelemetryRows = 64;

}  // namespace berth
