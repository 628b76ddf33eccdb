#pragma once

#include <rte_rcu_qsbr.h>

namespace berth {

// DPDK 22.11's memif PMD handles a peer's disconnect on the EAL interrupt thread: it clears the
// port's "connected" flag and then unmaps the peer's shared rings and buffers at once, while a
// worker may be inside rte_eth_rx_burst or rte_eth_tx_burst on that port, past the flag check
// and reading the memory being unmapped. A peer that restarts (berthgen between runs, a
// container's memif client) would crash berthd with SIGSEGV now and then.
//
// berthd and berthgen close the window the RCU way: each interposes munmap, and an unmap by the
// EAL interrupt thread first waits for one grace period of the workers' QSBR variable. Workers
// report a quiescent state only between bursts, so when the wait ends every burst that began
// before the flag was cleared has returned, and every later one sees the flag and reads nothing.
// Unmaps from any other thread, and all of them while no workers run, go straight through.

// Arms the guard with the workers' QSBR variable; nullptr disarms it. Disarm before freeing it.
void guardInterruptThreadUnmaps(rte_rcu_qsbr* workers);

}  // namespace berth
