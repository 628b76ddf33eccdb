#include "berth/control/descriptor_budget.h"

#include <errno.h>
#include <sys/resource.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace berth {

uint64_t descriptorsNeeded(size_t health_checks, size_t endpoints, size_t connections_each) {
  return kDescriptorReserve + health_checks + endpoints * connections_each;
}

absl::Status ensureDescriptors(uint64_t needed, size_t health_checks) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("descriptors: getrlimit: ", strerror(errno)));
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= needed) return absl::OkStatus();
  if (limit.rlim_cur == RLIM_INFINITY) return absl::OkStatus();
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "descriptors: berthd needs ", needed, " (", health_checks,
        " health check(s), the control and metrics connections, and ", kDescriptorReserve,
        " for DPDK and files) but the hard limit on open files (RLIMIT_NOFILE) is ",
        limit.rlim_max, "; raise it (ulimit -Hn, or LimitNOFILE= in a systemd unit)"));
  }
  limit.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("descriptors: raising the soft limit on open files to ",
                                            needed, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace berth
