#pragma once

#include <cstdint>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/net/crc32c.h"
#include "berth/net/flow_key.h"

namespace berth {

// Which fields of the 5-tuple a service hashes. Non-first IP fragments carry no ports, so a
// service that must keep fragments with their flow uses kThreeTuple for all of its packets.
enum class HashFields : uint8_t {
  kFiveTuple,   // source, destination, source port, destination port, protocol
  kThreeTuple,  // source, destination, protocol
  kSourceOnly,  // source address: every flow of a client lands on one backend
};

// Config spellings: "5-tuple", "3-tuple", "source".
absl::string_view toString(HashFields fields);
absl::StatusOr<HashFields> parseHashFields(absl::string_view text);

// The seed every berth instance uses unless configured otherwise. Instances behind one ECMP
// router must agree on it, or they send a flow to different backends.
inline constexpr uint32_t kDefaultFlowHashSeed = 0xbe27f10d;

// The flow hash: CRC32-C (see crc32c.h) with `seed` as the initial value, over these bytes in
// this order, all in network byte order as on the wire:
//
//   IPv4 (13 bytes): source address (4) | destination address (4) | source port (2) |
//                    destination port (2) | protocol (1)
//   IPv6 (37 bytes): source address (16) | destination address (16) | source port (2) |
//                    destination port (2) | protocol (1)
//
// Fields the service does not hash are fed as zero bytes: kThreeTuple zeroes both ports;
// kSourceOnly zeroes the destination address, both ports and the protocol. The result depends on
// nothing but these bytes and the seed: not the NIC, its RSS key, the CPU or the process.
// It equals rte_hash_crc(bytes, length, seed), and tests pin both.
//
// Cost: 3 crc32 instructions for IPv4 and 6 for IPv6, about 3 ns with the table read.
inline uint32_t flowHash(const FlowKey& key, HashFields fields, uint32_t seed) {
  const uint32_t port_mask = fields == HashFields::kFiveTuple ? ~0u : 0u;
  const uint64_t destination_mask = fields == HashFields::kSourceOnly ? 0 : ~uint64_t{0};
  uint32_t ports;
  std::memcpy(&ports, &key.source_port, sizeof(ports));
  const uint8_t protocol = static_cast<uint8_t>(key.protocol & destination_mask);

  uint32_t crc = seed;
  if (key.family == IpFamily::kIpv4) {
    uint32_t source;
    uint32_t destination;
    std::memcpy(&source, key.source.data(), 4);
    std::memcpy(&destination, key.destination.data(), 4);
    crc = crc32cU64(crc, source | ((uint64_t{destination} << 32) & destination_mask));
  } else {
    uint64_t words[4];
    std::memcpy(words, key.source.data(), 16);
    std::memcpy(words + 2, key.destination.data(), 16);
    crc = crc32cU64(crc, words[0]);
    crc = crc32cU64(crc, words[1]);
    crc = crc32cU64(crc, words[2] & destination_mask);
    crc = crc32cU64(crc, words[3] & destination_mask);
  }
  crc = crc32cU32(crc, ports & port_mask);
  return crc32cU8(crc, protocol);
}

}  // namespace berth
