#include "berth/runtime/unmap_guard.h"

#include <rte_cycles.h>
#include <rte_interrupts.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdio>

namespace berth {
namespace {

std::atomic<rte_rcu_qsbr*> guarded_workers{nullptr};

// Workers pass a quiescent state every loop, microseconds apart. A worker silent for this long
// is stuck; the unmap then goes ahead rather than also stopping the interrupt thread, which
// serves every port's link events and alarms.
constexpr uint64_t kGraceLimitMicroseconds = 1'000'000;
constexpr unsigned kPollMicroseconds = 20;

void waitForWorkersIfInterruptThread() {
  rte_rcu_qsbr* workers = guarded_workers.load(std::memory_order_acquire);
  if (workers == nullptr || !rte_thread_is_intr()) return;
  const uint64_t token = rte_rcu_qsbr_start(workers);
  for (uint64_t waited = 0; rte_rcu_qsbr_check(workers, token, false) != 1;
       waited += kPollMicroseconds) {
    if (waited >= kGraceLimitMicroseconds) {
      std::fprintf(stderr,
                   "%s: warning: a port's peer disconnected and a worker passed no quiescent "
                   "state within 1 s; the port's shared memory is unmapped anyway\n",
                   program_invocation_short_name);
      return;
    }
    rte_delay_us_sleep(kPollMicroseconds);
  }
}

}  // namespace

void guardInterruptThreadUnmaps(rte_rcu_qsbr* workers) {
  guarded_workers.store(workers, std::memory_order_release);
}

}  // namespace berth

// The interposer: berthd's executable exports this definition (meson: --export-dynamic-symbol),
// so the PMDs DPDK loads as plugins bind their munmap calls to it instead of libc's.
extern "C" int munmap(void* address, size_t length) noexcept {
  berth::waitForWorkersIfInterruptThread();
  return static_cast<int>(syscall(SYS_munmap, address, length));
}
