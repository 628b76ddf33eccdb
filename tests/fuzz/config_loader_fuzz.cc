// libFuzzer target for the config loader: any text must come back as a Config or as an error
// that names a place, never as an escaped exception or a crash.

#include <cstddef>
#include <cstdint>
#include <string>

#include "berth/config/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<berth::Config> config = berth::parseConfig(text, "fuzz.yaml");
  if (!config.ok() && config.status().message().rfind("fuzz.yaml:", 0) != 0) __builtin_trap();
  return 0;
}
