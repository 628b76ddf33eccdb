#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "berth/net/crc32c.h"
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
  // Two 8-byte compares for the address: the defaulted operator calls memcmp.
  friend bool operator==(const ServiceKey& a, const ServiceKey& b) {
    uint64_t a_words[2];
    uint64_t b_words[2];
    std::memcpy(a_words, a.address.data(), 16);
    std::memcpy(b_words, b.address.data(), 16);
    return ((a_words[0] ^ b_words[0]) | (a_words[1] ^ b_words[1])) == 0 && a.port == b.port &&
           a.protocol == b.protocol && a.family == b.family;
  }
  template <typename H>
  friend H AbslHashValue(H state, const ServiceKey& key) {
    return H::combine(std::move(state), key.address, key.port, key.protocol, key.family);
  }
};

// The hash of a ServiceKey: CRC32-C over its bytes, three crc32 instructions. absl's default
// mixing hash costs several times that, and a key chosen by clients (they pick the VIP and port
// they send to, nothing else) needs no protection from flooding one bucket beyond the handful of
// services a config holds.
struct ServiceKeyHash {
  size_t operator()(const ServiceKey& key) const {
    uint64_t words[2];
    std::memcpy(words, key.address.data(), 16);
    const uint64_t rest = uint64_t{key.port} | uint64_t{key.protocol} << 16 |
                          uint64_t{static_cast<uint8_t>(key.family)} << 24;
    const uint32_t low = crc32cU64(crc32cU64(crc32cU64(0, words[0]), words[1]), rest);
    // flat_hash_map takes 7 control bits from the low end and the bucket from the rest.
    return size_t{low} << 32 | crc32cU32(low, 0x9E3779B9u);
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
  absl::flat_hash_map<ServiceKey, uint32_t, ServiceKeyHash> services_;
};

}  // namespace berth
