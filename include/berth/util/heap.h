#pragma once

#include <cstddef>

namespace berth {

// Tells glibc's allocator to keep freed memory for reuse instead of handing it back to the
// kernel. Every table build allocates its entries (128 KiB at M = 65537), and the management
// thread frees the previous snapshot's after each RCU grace period; with the defaults each new
// table is fresh memory that costs a page fault per 4 KiB, about 0.2 ms per table on a virtual
// machine. Call once at start-up, before threads start. berthctl and the benchmarks call it too,
// so their figures are the ones the daemon sees.
void retainFreedHeapMemory();

// `bytes` of zeroed memory for a table looked up at random (the connection tables, the peers'
// flows): from 2 MiB up, aligned to 2 MiB, rounded up to whole 2 MiB pages and advised onto
// transparent huge pages, without which each lookup is a TLB miss as well as a cache miss;
// below, cache-line aligned. Null when there is no memory. Free it with std::free.
void* allocateZeroedTable(size_t bytes);

}  // namespace berth
