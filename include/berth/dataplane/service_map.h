#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "berth/net/flow_key.h"

namespace berth {

// Where a packet's service is found: its destination address, destination port and protocol,
// exactly as the parser lifts them off the wire (network byte order), so a lookup builds its
// key by copying, never converting.
struct ServiceKey {
  std::array<uint8_t, 16> address{};
  uint16_t port = 0;  // network byte order
  uint8_t protocol = 0;
  IpFamily family = IpFamily::kIpv4;

  static ServiceKey of(const FlowKey& flow) {
    return {flow.destination, flow.destination_port, flow.protocol, flow.family};
  }
  friend bool operator==(const ServiceKey&, const ServiceKey&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const ServiceKey& key) {
    return H::combine(std::move(state), key.address, key.port, key.protocol, key.family);
  }
};

// (VIP, port, protocol) to a service's index, built with the snapshot and only read by workers:
// a lookup hashes the key and probes an open-addressed table, with no lock and no allocation.
class ServiceMap {
 public:
  // False when the key is already present (the config loader rejects that first).
  bool insert(const ServiceKey& key, uint32_t service) {
    return services_.emplace(key, service).second;
  }
  std::optional<uint32_t> find(const FlowKey& flow) const {
    auto it = services_.find(ServiceKey::of(flow));
    if (it == services_.end()) return std::nullopt;
    return it->second;
  }
  size_t size() const { return services_.size(); }

 private:
  absl::flat_hash_map<ServiceKey, uint32_t> services_;
};

}  // namespace berth
