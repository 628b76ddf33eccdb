#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

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

// (VIP, port, protocol) to a service's index, built with the snapshot and only read by workers:
// an open-addressed table of its own, at most half full, probed linearly from the slot its
// CRC32-C hash picks (three crc32 instructions) with no lock and no allocation. A lookup compares
// the packet's fields with a slot's as two 8-byte words and one 4-byte word, and stops at the first
// empty slot; it cost a third of the instructions of absl::flat_hash_map's, whose generic probing
// and key construction dominated. Clients choose only what they look up, never what is stored, so
// the clusters a lookup walks are the config's own, a handful of services at most.
class ServiceMap {
 public:
  ServiceMap() : slots_(kMinSlots), mask_(kMinSlots - 1) {}

  // False when the key is already present (the config loader rejects that first).
  bool insert(const ServiceKey& key, uint32_t service);

  std::optional<uint32_t> find(const FlowKey& flow) const {
    return find(flow.destination, packedRest(flow.destination_port, flow.protocol, flow.family));
  }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kMinSlots = 8;
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t address[2] = {0, 0};
    uint32_t rest = 0;  // packedRest()
    uint32_t service = kEmpty;
  };

  // The port (network byte order), protocol and family in one word.
  static uint32_t packedRest(uint16_t port, uint8_t protocol, IpFamily family) {
    return uint32_t{port} | uint32_t{protocol} << 16 | uint32_t{static_cast<uint8_t>(family)} << 24;
  }
  size_t slotOf(const uint64_t (&address)[2], uint32_t rest) const {
    return crc32cU32(crc32cU64(crc32cU64(0, address[0]), address[1]), rest) & mask_;
  }
  std::optional<uint32_t> find(const std::array<uint8_t, 16>& destination, uint32_t rest) const {
    uint64_t address[2];
    std::memcpy(address, destination.data(), 16);
    for (size_t i = slotOf(address, rest);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.service == kEmpty) return std::nullopt;
      if (((slot.address[0] ^ address[0]) | (slot.address[1] ^ address[1])) == 0 &&
          slot.rest == rest) {
        return slot.service;
      }
    }
  }
  void place(const Slot& slot);

  std::vector<Slot> slots_;
  size_t mask_;
  size_t size_ = 0;
};

}  // namespace berth
