// libFuzzer target for the control socket's request parser: any bytes come back as a request or
// as an error that starts "request:", never as a crash or a read past the input.

#include <cstddef>
#include <cstdint>
#include <string>

#include "berth/api/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan sees any read past the end.
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<berth::ControlRequest> request = berth::parseControlRequest(text);
  if (!request.ok() && request.status().message().rfind("request:", 0) != 0) __builtin_trap();
  return 0;
}
