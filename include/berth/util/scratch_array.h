#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace berth {

// N elements of T that start uninitialized: per-burst scratch that is written before it is read.
// A plain `T array[N]` of a type with default member initializers is zeroed on every call, which
// for the pipeline's per-frame state was a 3 KiB memset per burst, 90 instructions a packet.
// T must be an implicit-lifetime type (an aggregate, or trivially constructible) and trivially
// destructible, so storage of the right size and alignment holds its objects as soon as a caller
// writes them.
template <typename T, size_t N>
class ScratchArray {
  static_assert(std::is_aggregate_v<T> || std::is_trivially_default_constructible_v<T>,
                "only an implicit-lifetime type may start uninitialized");
  static_assert(std::is_trivially_destructible_v<T>, "nothing is destroyed");

 public:
  T* data() { return std::launder(reinterpret_cast<T*>(storage_)); }
  T& operator[](size_t i) { return data()[i]; }

 private:
  alignas(T) unsigned char storage_[sizeof(T) * N];
};

}  // namespace berth
