#include "berth/util/heap.h"

#include <malloc.h>

namespace berth {

void retainFreedHeapMemory() {
  // Allocations below 64 MiB come from the heap, not from mmap, and the heap top is never
  // trimmed below 512 MiB of free space, so freed tables are reused in place.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace berth
