#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace berth {

// Whether each worker lcore sits on the NUMA socket of the ports it polls. A worker across the
// socket interconnect from its NIC reads every descriptor and frame from remote memory, which
// costs a worker on a 100 GbE port a large share of its packet rate. Pure over socket ids, so
// the control plane passes what DPDK says (rte_eth_dev_socket_id, rte_lcore_to_socket_id) and
// the tests pass made-up ones.

struct PortOnSocket {
  std::string name;
  int socket = -1;      // -1: the device does not say (vdevs); never a mismatch
  uint16_t queues = 0;  // worker w polls queue w while w < queues
};

struct WorkerOnSocket {
  unsigned lcore = 0;
  int socket = -1;
};

// One line per (port, worker) on different sockets, naming both, in port then worker order.
std::vector<std::string> crossSocketPolling(absl::Span<const PortOnSocket> ports,
                                            absl::Span<const WorkerOnSocket> workers);

// Whether a worker lcore may run on a CPU of the management (main) lcore. The management loop and
// the exception path's thread wake every millisecond; beside a busy-polling worker they delay
// its packets, and the worker keeps that CPU's kernel work from running (docs/nics.md).
struct LcoreCpus {
  unsigned lcore = 0;
  std::vector<unsigned> cpus;  // the CPUs the lcore's thread may run on
};

// One line per worker that shares a CPU with the main lcore, naming both and the CPUs.
std::vector<std::string> workersOnMainCpus(const LcoreCpus& main,
                                           absl::Span<const LcoreCpus> workers);

}  // namespace berth
