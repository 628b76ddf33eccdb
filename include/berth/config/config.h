#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "berth/maglev/table.h"
#include "berth/net/flow_hash.h"
#include "berth/net/ip_address.h"

namespace berth {

// The validated configuration model. Only the loader creates one, and only after every check has
// passed, so code that holds a Config can trust all of it. Line numbers point into the YAML
// source for messages that the control plane emits later (say, a health check that never rises).

enum class Protocol : uint8_t { kTcp = 6, kUdp = 17 };
absl::string_view toString(Protocol protocol);

struct BackendConfig {
  std::string name;
  IpAddress address;
  int64_t weight = 1;  // 0 drains the backend: no new flows, established ones finish
  int line = 0;
};

struct ServiceConfig {
  std::string name;
  IpAddress vip;
  uint16_t port = 0;
  Protocol protocol = Protocol::kTcp;
  uint32_t table_size = kDefaultTableSize;
  HashFields hash_fields = HashFields::kFiveTuple;
  std::vector<BackendConfig> backends;
  int line = 0;

  // The backends as the Maglev build takes them.
  std::vector<Backend> maglevBackends() const;
};

struct Config {
  std::vector<ServiceConfig> services;
  // Advice that does not stop the config from loading, each naming its field and line.
  std::vector<std::string> warnings;

  // The service with this name, or nullptr.
  const ServiceConfig* findService(absl::string_view name) const;
};

}  // namespace berth
