#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// Full-NAT's pools as the workers can use them (docs/fullnat.md): for each local address and
// each backend of a fullnat service whose traffic leaves through the address's port, the local
// ports the address lends the pair, and how many of them each worker can take: those whose
// replies the port's RSS brings to the worker's queue (worker w receives on queue w). A worker
// refuses a new connection to the backend (nat_ports_exhausted) once it holds its share of
// every local address.
struct NatPoolRow {
  std::string port;     // the egress port
  std::string address;  // the local address
  std::string service;
  std::string backend;
  uint32_t ports = 0;                  // the pair's capacity: the address's port range
  std::vector<uint32_t> worker_ports;  // by worker
};

// The pools of `snapshot`, built from `dataplane`'s ports and `services` (in the snapshot's
// order), for `workers` workers: at most `max_rows` rows, in the order of the services,
// their backends, the egress ports and the local addresses; `omitted` counts the rest. Pure.
// A worker's share of a pair depends only on the bits of the pair's reply hash that index the
// redirection table, so each port's shares are counted once per table entry and looked up per
// pair (`cache` keeps them between calls, for the same steering).
class NatPools {
 public:
  std::vector<NatPoolRow> rows(const Snapshot& snapshot, const DataplaneConfig& dataplane,
                               absl::Span<const ServiceConfig* const> services, uint16_t workers,
                               size_t max_rows, size_t& omitted);

 private:
  // Per (steering, family, protocol): for each value of a reply hash's table bits, each queue's
  // share of the range. The key holds its steering, so that no other can take its address.
  struct Key {
    std::shared_ptr<const ReplySteering> steering;
    IpFamily family;
    uint8_t protocol;
    uint16_t workers;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H state, const Key& key) {
      return H::combine(std::move(state), key.steering, key.family, key.protocol, key.workers);
    }
  };
  const std::vector<uint32_t>& sharesFor(const Key& key);

  absl::flat_hash_map<Key, std::vector<uint32_t>> shares_;  // [bits * workers + worker]
};

}  // namespace berth
