#include "berth/util/heap.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace berth {

void retainFreedHeapMemory() {
  // Allocations below 64 MiB come from the heap, not from mmap, and the heap top is never
  // trimmed below 512 MiB of free space, so freed tables are reused in place.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void* allocateZeroedTable(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  constexpr size_t kCacheLine = 64;
  const size_t alignment = bytes >= kHugePage ? kHugePage : kCacheLine;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* memory = std::aligned_alloc(alignment, rounded);
  if (memory == nullptr) return nullptr;
  if (alignment == kHugePage) madvise(memory, rounded, MADV_HUGEPAGE);
  std::memset(memory, 0, rounded);
  return memory;
}

}  // namespace berth
