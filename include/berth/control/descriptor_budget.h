#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace berth {

// berthd's file descriptors: the control socket, the read-only socket and the metrics endpoint
// may each hold their connection cap, each health check a socket, and DPDK, the EAL's files and
// the log take a reserve. That is more than the usual soft limit of 1,024 once any check is
// configured, so berthd raises the limit at start (docs/architecture.md, "The management loop").
inline constexpr uint64_t kDescriptorReserve = 256;

uint64_t descriptorsNeeded(size_t health_checks);

// Raises RLIMIT_NOFILE's soft limit to `needed` when it is lower. FailedPrecondition, naming the
// hard limit and what needs the descriptors, when the hard limit is lower than `needed`.
absl::Status raiseDescriptorLimit(uint64_t needed, size_t health_checks);

// The same for what `health_checks` checks and the endpoints need.
inline absl::Status ensureDescriptorsFor(size_t health_checks) {
  return raiseDescriptorLimit(descriptorsNeeded(health_checks), health_checks);
}

}  // namespace berth
