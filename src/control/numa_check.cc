#include "berth/control/numa_check.h"

#include "absl/strings/str_cat.h"

namespace berth {

std::vector<std::string> crossSocketPolling(absl::Span<const PortOnSocket> ports,
                                            absl::Span<const WorkerOnSocket> workers) {
  std::vector<std::string> lines;
  for (const PortOnSocket& port : ports) {
    if (port.socket < 0) continue;
    for (size_t w = 0; w < workers.size() && w < port.queues; ++w) {
      const WorkerOnSocket& worker = workers[w];
      if (worker.socket < 0 || worker.socket == port.socket) continue;
      lines.push_back(absl::StrCat("port '", port.name, "' is on NUMA socket ", port.socket,
                                   ", but worker lcore ", worker.lcore, ", which polls its queue ",
                                   w, ", is on socket ", worker.socket,
                                   "; choose worker lcores on the port's socket"));
    }
  }
  return lines;
}

}  // namespace berth
