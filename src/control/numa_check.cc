#include "berth/control/numa_check.h"

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::vector<std::string> workersOnMainCpus(const LcoreCpus& main,
                                           absl::Span<const LcoreCpus> workers) {
  std::vector<std::string> lines;
  for (const LcoreCpus& worker : workers) {
    std::vector<unsigned> shared;
    for (const unsigned cpu : worker.cpus) {
      if (absl::c_linear_search(main.cpus, cpu)) shared.push_back(cpu);
    }
    if (shared.empty()) continue;
    lines.push_back(absl::StrCat(
        "worker lcore ", worker.lcore, " shares CPU ", absl::StrJoin(shared, ","),
        " with the management lcore ", main.lcore,
        ", whose loop then delays the worker's packets; give the management lcore a CPU of its "
        "own (--lcores 0@0,1@1, or -l 0-1; docs/nics.md)"));
  }
  return lines;
}

}  // namespace berth
