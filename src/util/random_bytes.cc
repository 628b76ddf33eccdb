#include "berth/util/random_bytes.h"

#include <errno.h>
#include <sys/random.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace berth {

absl::Status fillRandom(void* data, size_t length) {
  auto* bytes = static_cast<uint8_t*>(data);
  size_t filled = 0;
  while (filled < length) {
    const ssize_t got = getrandom(bytes + filled, length - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    filled += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace berth
