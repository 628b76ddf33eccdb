#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "berth/dataplane/forwarding.h"

namespace berth {

// Learning next hops' MACs on a port: what ARP and IPv6 neighbour discovery frames say about
// their sender, and the requests berth sends for a gateway or an l2dsr backend whose MAC the
// config does not give. The neighbour replies berth answers with are in neighbor_reply.h.

// An address and the MAC a frame on a port says it is at.
struct NeighborObservation {
  IpAddress address;
  MacAddress mac;
  uint16_t port = 0;  // index into the config's ports
};

// What a frame tells about a neighbour, or nullopt: an ARP request's or reply's sender, a
// neighbour solicitation's source with its source link-layer option, or a neighbour
// advertisement's target with its target link-layer option. Frames that claim the unspecified
// address, a multicast MAC, or carry a hop limit other than 255 (RFC 4861, 7.1) teach nothing.
std::optional<NeighborObservation> observeNeighbor(const Frame& frame, const ParsedPacket& packet);

// Writes into `out` an ARP request (IPv4 `target`) or a neighbour solicitation to the target's
// solicited-node multicast group (IPv6), from `source` at `source_mac`, untagged. Returns the
// frame's length, or 0 when `capacity` is too small or the families differ.
inline constexpr size_t kNeighborRequestMaxLength = 86;
size_t buildNeighborRequest(uint8_t* out, size_t capacity, const MacAddress& source_mac,
                            const IpAddress& source, const IpAddress& target);

// The management thread's view of the MACs it has learned, by address. Not used by workers: the
// snapshot copies what they need.
class NeighborTable {
 public:
  // Records an observation; true when it is new or changes the MAC known for the address.
  bool learn(const IpAddress& address, const MacAddress& mac);
  std::optional<MacAddress> find(const IpAddress& address) const;
  size_t size() const { return macs_.size(); }

 private:
  absl::flat_hash_map<IpAddress, MacAddress> macs_;
};

}  // namespace berth
