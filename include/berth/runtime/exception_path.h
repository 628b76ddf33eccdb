#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/token_bucket.h"
#include "berth/runtime/kernel_interface.h"
#include "berth/runtime/worker.h"

namespace berth {

// The exception path (docs/exception-path.md): the thread between the ports' kernel interfaces
// and the workers. It runs off the worker lcores, on the management thread's CPUs, so the
// kernel's traffic never costs a worker more than the classification and a ring enqueue.
//
// Towards the kernel: each worker queues a port's frames that are not berth's on one ring per
// ExceptionClass; this thread drains them, polices each (port, class) with a token bucket at the
// configured rate, and writes what passes to the port's interface. A flood in one class fills
// that class's ring and spends that class's tokens only: BGP keeps its own.
// From the kernel: it reads the interface's frames into mbufs of the port's pool and queues them
// on the ring of the worker that serves the port's queue 0, which sends them with its own.
class ExceptionPath {
 public:
  struct Port {
    uint32_t port_index = 0;  // in the config and the snapshot
    PortConfig config;        // a change needs a restart (sectionsNeedingRestart)
    MacAddress mac;
    rte_mempool* pool = nullptr;  // the port's: the kernel's frames go out in its mbufs
    Worker* sender = nullptr;     // the worker that serves the port's queue 0
  };

  // The kernel interface of each of `ports` made and set up; the thread not yet started.
  // `workers` are every worker, whose kernel queues the thread drains. Errors name the port.
  static absl::StatusOr<std::unique_ptr<ExceptionPath>> create(std::vector<Port> ports,
                                                               std::vector<Worker*> workers);
  ~ExceptionPath();  // stops the thread, frees what it holds, removes the interfaces
  ExceptionPath(const ExceptionPath&) = delete;
  ExceptionPath& operator=(const ExceptionPath&) = delete;

  void start();
  // Stops and joins the thread; call before the workers are destroyed.
  void stop();

  // The thread's counters, summed over ports, for stats and metrics:
  //   kernel_<class>_passed, kernel_<class>_policed, kernel_<class>_refused (the interface's
  //   queue was full), from_kernel, from_kernel_dropped (no mbuf, or the worker's queue full).
  std::vector<std::pair<std::string, uint64_t>> counters() const;
  // "berth0 (tap) on p0", one per port, for status.
  std::vector<std::string> describe() const;

 private:
  struct PortState;
  explicit ExceptionPath(std::vector<Worker*> workers);
  void run();
  // One turn over every ring and interface; false when there was nothing to do.
  bool serveOnce(uint32_t now_ms);
  PortState* portOf(uint16_t port_index);

  std::vector<Worker*> workers_;
  std::vector<std::unique_ptr<PortState>> ports_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace berth
