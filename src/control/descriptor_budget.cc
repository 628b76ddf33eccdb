#include "berth/control/descriptor_budget.h"

#include <errno.h>
#include <sys/resource.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "berth/api/control_socket.h"
#include "berth/api/metrics_server.h"

namespace berth {

uint64_t descriptorsNeeded(size_t health_checks) {
  // The control socket and the read-only socket, then the metrics endpoint.
  return kDescriptorReserve + health_checks + 2 * ControlSocket::kMaxClients +
         MetricsServer::kMaxClients;
}

absl::Status raiseDescriptorLimit(uint64_t needed, size_t health_checks) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("descriptors: getrlimit: ", strerror(errno)));
  }
  // RLIM_INFINITY is the largest value, so it passes both comparisons.
  if (limit.rlim_cur >= needed) return absl::OkStatus();
  if (limit.rlim_max < needed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "descriptors: berthd needs ", needed, " (", health_checks,
        " health check(s), the control and metrics connections, and ", kDescriptorReserve,
        " for DPDK and files) but the hard limit on open files (RLIMIT_NOFILE) is ", limit.rlim_max,
        "; raise it (ulimit -Hn, or LimitNOFILE= in a systemd unit)"));
  }
  limit.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("descriptors: raising the soft limit on open files to ",
                                            needed, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace berth
