#include "berth/runtime/exception_path.h"

#include <poll.h>
#include <rte_ether.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

constexpr uint16_t kBurst = 32;
// How long the thread sleeps in poll(2) when a turn found nothing: the most a frame for the
// kernel waits on an idle path. The kernel's own frames wake it at once (tap).
constexpr int kIdleWaitMs = 1;

// A tenth of a second of the class's rate passes at once, and at least 16 frames: a BGP update
// burst or a ping's few echoes are not cut.
uint32_t burstOf(uint32_t per_second) { return std::max<uint32_t>(16, per_second / 10); }

// A port's kernel interface is the port's alone, so it gets the port's frames without the tag
// that chose the port (its VLAN's, or a priority tag on an untagged port); a QinQ frame keeps its
// inner tag. The outer tag may be 802.1ad, as the pipeline takes it, which rte_vlan_strip()
// does not strip.
void untagForKernel(rte_mbuf* mbuf) {
  if (rte_pktmbuf_data_len(mbuf) < RTE_ETHER_HDR_LEN + sizeof(rte_vlan_hdr)) return;
  auto* ethernet = rte_pktmbuf_mtod(mbuf, rte_ether_hdr*);
  const uint16_t ether_type = rte_be_to_cpu_16(ethernet->ether_type);
  if (ether_type != RTE_ETHER_TYPE_VLAN && ether_type != RTE_ETHER_TYPE_QINQ) return;
  std::memmove(rte_pktmbuf_mtod_offset(mbuf, uint8_t*, sizeof(rte_vlan_hdr)), ethernet,
               2 * RTE_ETHER_ADDR_LEN);
  rte_pktmbuf_adj(mbuf, sizeof(rte_vlan_hdr));
}

}  // namespace

struct ExceptionPath::PortState {
  Port port;
  std::unique_ptr<KernelInterface> interface;
  std::array<TokenBucket, kExceptionClassCount> buckets;
  // Written by the thread only, read relaxed by the management thread.
  std::array<Counter, kExceptionClassCount> passed;
  std::array<Counter, kExceptionClassCount> policed;
  std::array<Counter, kExceptionClassCount> refused;
  Counter from_kernel;
  Counter from_kernel_dropped;
  // Frames for the interface, per class, written in bursts.
  std::array<std::array<rte_mbuf*, kBurst>, kExceptionClassCount> pending;
  std::array<uint16_t, kExceptionClassCount> pending_count{};

  void flush(size_t c) {
    const uint16_t count = pending_count[c];
    if (count == 0) return;
    const uint16_t taken = interface->toKernel(pending[c].data(), count);
    passed[c].add(taken);
    refused[c].add(count - taken);
    pending_count[c] = 0;
  }
};

ExceptionPath::ExceptionPath(std::vector<Worker*> workers) : workers_(std::move(workers)) {}

absl::StatusOr<std::unique_ptr<ExceptionPath>> ExceptionPath::create(std::vector<Port> ports,
                                                                     std::vector<Worker*> workers) {
  std::unique_ptr<ExceptionPath> path(new ExceptionPath(std::move(workers)));
  for (Port& port : ports) {
    absl::StatusOr<std::unique_ptr<KernelInterface>> interface =
        openKernelInterface(port.config, port.mac);
    if (!interface.ok()) return interface.status();
    auto state = std::make_unique<PortState>();
    state->port = port;
    state->interface = *std::move(interface);
    path->ports_.push_back(std::move(state));
  }
  return path;
}

ExceptionPath::~ExceptionPath() { stop(); }

void ExceptionPath::start() {
  if (thread_.joinable() || ports_.empty()) return;
  stop_.store(false);
  thread_ = std::thread([this] { run(); });
}

void ExceptionPath::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

ExceptionPath::PortState* ExceptionPath::portOf(uint16_t port_index) {
  for (const std::unique_ptr<PortState>& state : ports_) {
    if (state->port.port_index == port_index) return state.get();
  }
  return nullptr;
}

bool ExceptionPath::serveOnce(uint32_t now_ms) {
  bool busy = false;
  rte_mbuf* frames[kBurst];
  // Towards the kernel: each worker's rings, each class policed per port.
  for (Worker* worker : workers_) {
    for (size_t c = 0; c < kExceptionClassCount; ++c) {
      rte_ring* ring = worker->toKernelQueue(static_cast<ExceptionClass>(c));
      if (ring == nullptr) continue;
      const unsigned count =
          rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(frames), kBurst, nullptr);
      busy |= count > 0;
      for (unsigned i = 0; i < count; ++i) {
        PortState* state = portOf(frames[i]->port);
        if (state == nullptr) {
          rte_pktmbuf_free(frames[i]);
          continue;
        }
        const uint32_t rate = state->port.config.exception->per_second[c];
        if (!state->buckets[c].take(now_ms, rate, burstOf(rate))) {
          state->policed[c].add(1);
          rte_pktmbuf_free(frames[i]);
          continue;
        }
        untagForKernel(frames[i]);
        state->pending[c][state->pending_count[c]++] = frames[i];
        if (state->pending_count[c] == kBurst) state->flush(c);
      }
    }
  }
  // BGP's first: the class order is the order of priority.
  for (const std::unique_ptr<PortState>& state : ports_) {
    for (size_t c = 0; c < kExceptionClassCount; ++c) state->flush(c);
  }
  // From the kernel: into the serving worker's queue.
  for (const std::unique_ptr<PortState>& state : ports_) {
    const uint16_t count = state->interface->fromKernel(state->port.pool, frames, kBurst);
    if (count == 0) continue;
    busy = true;
    // On a VLAN port the kernel's frames leave with the port's tag.
    const uint16_t vlan = state->port.config.vlan;
    uint16_t tagged = 0;
    for (uint16_t i = 0; i < count; ++i) {
      frames[i]->port = static_cast<uint16_t>(state->port.port_index);
      frames[i]->vlan_tci = vlan;
      if (vlan != 0 && rte_vlan_insert(&frames[i]) != 0) {
        state->from_kernel_dropped.add(1);
        rte_pktmbuf_free(frames[i]);
        continue;
      }
      frames[tagged++] = frames[i];
    }
    rte_ring* ring = state->port.sender->fromKernelQueue();
    const unsigned queued =
        rte_ring_sp_enqueue_burst(ring, reinterpret_cast<void**>(frames), tagged, nullptr);
    state->from_kernel.add(queued);
    if (queued < tagged) {
      state->from_kernel_dropped.add(tagged - queued);
      rte_pktmbuf_free_bulk(frames + queued, tagged - queued);
    }
  }
  return busy;
}

void ExceptionPath::run() {
  std::vector<pollfd> readable;
  bool every_interface_waitable = true;
  for (const std::unique_ptr<PortState>& state : ports_) {
    const int fd = state->interface->readableFd();
    if (fd < 0) {
      every_interface_waitable = false;
    } else {
      readable.push_back({fd, POLLIN, 0});
    }
  }
  const auto start = std::chrono::steady_clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    const auto now_ms = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::steady_clock::now() - start)
                                                  .count());
    if (serveOnce(now_ms)) continue;
    if (every_interface_waitable) {
      poll(readable.data(), readable.size(), kIdleWaitMs);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

std::vector<std::pair<std::string, uint64_t>> ExceptionPath::counters() const {
  std::vector<std::pair<std::string, uint64_t>> totals;
  auto sum = [&](std::string name, auto member) {
    uint64_t total = 0;
    for (const std::unique_ptr<PortState>& state : ports_) total += member(*state).read();
    totals.emplace_back(std::move(name), total);
  };
  for (size_t c = 0; c < kExceptionClassCount; ++c) {
    const absl::string_view name = toString(static_cast<ExceptionClass>(c));
    sum(absl::StrCat("kernel_", name, "_passed"),
        [c](const PortState& s) -> const Counter& { return s.passed[c]; });
    sum(absl::StrCat("kernel_", name, "_policed"),
        [c](const PortState& s) -> const Counter& { return s.policed[c]; });
    sum(absl::StrCat("kernel_", name, "_refused"),
        [c](const PortState& s) -> const Counter& { return s.refused[c]; });
  }
  sum("from_kernel", [](const PortState& s) -> const Counter& { return s.from_kernel; });
  sum("from_kernel_dropped",
      [](const PortState& s) -> const Counter& { return s.from_kernel_dropped; });
  return totals;
}

std::vector<std::string> ExceptionPath::describe() const {
  std::vector<std::string> lines;
  for (const std::unique_ptr<PortState>& state : ports_) {
    lines.push_back(absl::StrCat(state->interface->name(), " (",
                                 toString(state->port.config.exception->kind), ") on ",
                                 state->port.config.name));
  }
  return lines;
}

}  // namespace berth
