#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace berth {

// berthd's file descriptors: each of its endpoints (the control socket, the read-only socket and
// the metrics endpoint) may hold its connection cap, each health check a socket, and DPDK, the
// EAL's files and the log take a reserve. The default soft limit of 1,024 covers that only for a
// few hundred checks, so berthd raises it at start (docs/architecture.md, "The management loop").
inline constexpr uint64_t kDescriptorReserve = 256;
// The control socket, the read-only socket and the metrics endpoint.
inline constexpr size_t kControlEndpoints = 3;

uint64_t descriptorsNeeded(size_t health_checks, size_t endpoints, size_t connections_each);

// Raises RLIMIT_NOFILE's soft limit to `needed` when it is lower. FailedPrecondition, naming the
// hard limit and what needs the descriptors, when the hard limit is lower than `needed`.
absl::Status ensureDescriptors(uint64_t needed, size_t health_checks);

}  // namespace berth
