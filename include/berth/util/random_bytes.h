#pragma once

#include <cstddef>

#include "absl/status/status.h"

namespace berth {

// Fills `length` bytes from the kernel's CSPRNG (getrandom(2)): for the secrets that keep a
// sender from aiming traffic, the RSS key and the connection table's bucket hash. An error
// names the reason.
absl::Status fillRandom(void* data, size_t length);

}  // namespace berth
