#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/net/flow_key.h"
#include "berth/net/ip_address.h"

namespace berth {

// How a port spreads what it receives over its queues: what berth reads back from the NIC (or,
// for a port without RSS of its own such as memif, what the config declares its peer spreads
// with). A packet's queue is reta[toeplitz(key, input) & (reta.size() - 1)], where the input
// holds the ports only for the protocols and families listed as hashing them (rss_hf).
struct RssSpread {
  std::vector<uint8_t> key;    // at least 40 bytes; empty: no RSS, every packet to queue 0
  std::vector<uint16_t> reta;  // the queue of each entry; a power of two of entries
  bool tcp4_ports = true;      // whether the hash covers TCP's ports over IPv4
  bool udp4_ports = true;
  bool tcp6_ports = true;
  bool udp6_ports = true;
};

// The choice of a Full-NAT local port whose reply the NIC brings back to the worker that owns
// the connection (docs/architecture.md, "Connection table"): no table shared between workers, no
// lock, no handing of packets from core to core. Built once per egress port and pool range with
// the port's spread; immutable, so every worker reads it from the snapshot.
//
// A reply runs backend -> local address, from the backend's port to the local port. Toeplitz is
// linear (net/toeplitz.h), so its hash is the hash of everything but the local port (the base,
// once per connection) XOR the hash of the local port alone, whose bits in the redirection
// table's index this keeps per port of the range (its class). A port then sends the reply to
// reta[(base ^ class) & mask]: the search for a worker's port is a table read per candidate,
// and a worker's share of the range, with any key, any table and any number of queues, is a sum
// over the table's entries.
//
// Where the NIC hashes no ports for the reply's protocol (UDP on many NICs), the local port
// changes nothing: every port of a (local address, backend) pair goes to one queue, and the
// worker must find a local address whose pair is its own, or refuse the connection.
class ReplySteering {
 public:
  // The steering of a port range [first_port, last_port] (host byte order) under `spread`.
  // Fails, naming the fault, on a key too short for IPv6 or a table that is not a power of two.
  static absl::StatusOr<ReplySteering> build(const RssSpread& spread, uint16_t first_port,
                                             uint16_t last_port);
  // The spread of a port without local ports, for queueOfFlow() alone: a port whose clients'
  // ICMP errors may need their session's worker.
  static absl::StatusOr<ReplySteering> withoutLocalPorts(const RssSpread& spread);

  // The queue the NIC puts a packet of `flow` on: an ICMP error about a session carries the
  // session's tuple, which names the worker that holds it, whatever queue the error itself came
  // in on (the NIC hashes an error on its own addresses). One Toeplitz hash.
  uint16_t queueOfFlow(const FlowKey& flow) const;

  // The reply's hash without its local port: the backend as source, the local address as
  // destination, the backend's port as source port (where the protocol's ports are hashed).
  // `backend_port` in host byte order. One Toeplitz hash: once per new connection.
  uint32_t baseOf(const IpAddress& backend, uint16_t backend_port, const IpAddress& local,
                  uint8_t protocol) const;

  // The queue a reply of `base` comes in on, to `local_port` (host order, within the range).
  uint16_t queueOf(uint32_t base, uint16_t local_port, IpFamily family, uint8_t protocol) const {
    return reta_[(base ^ classOf(local_port, family, protocol)) & mask_];
  }

  // The first port from `from` on (wrapping round the range) whose reply of `base` comes to
  // `queue`, after looking at no more than `limit` ports; 0 when none is.
  uint16_t nextPortFor(uint32_t base, uint16_t queue, IpFamily family, uint8_t protocol,
                       uint16_t from, uint32_t limit) const;

  // How many of the range's ports send a reply of `base` to `queue`: a worker's share of one
  // (local address, backend) pair. A sum over the redirection table: hundreds of additions.
  uint32_t shareOf(uint32_t base, uint16_t queue, IpFamily family, uint8_t protocol) const;

  uint16_t firstPort() const { return first_port_; }
  uint16_t lastPort() const { return last_port_; }
  uint32_t rangeSize() const { return uint32_t{last_port_} - first_port_ + 1; }
  // Queues the redirection table names: the workers that can own connections on this port.
  const std::vector<uint16_t>& reta() const { return reta_; }

 private:
  static absl::StatusOr<ReplySteering> make(const RssSpread& spread, uint16_t first_port,
                                            uint16_t last_port);
  bool hashesPorts(IpFamily family, uint8_t protocol) const;
  uint32_t classOf(uint16_t local_port, IpFamily family, uint8_t protocol) const {
    if (!hashesPorts(family, protocol)) return 0;
    const std::vector<uint16_t>& classes = family == IpFamily::kIpv4 ? classes_v4_ : classes_v6_;
    return classes[local_port - first_port_];
  }

  RssSpread spread_;
  std::vector<uint16_t> reta_;
  uint32_t mask_ = 0;
  uint16_t first_port_ = 0;
  uint16_t last_port_ = 0;
  // Per port of the range, the redirection-table bits of the hash of the port alone at the
  // destination port's place in an IPv4 and an IPv6 input; and how many ports have each class.
  std::vector<uint16_t> classes_v4_;
  std::vector<uint16_t> classes_v6_;
  std::vector<uint32_t> class_counts_v4_;
  std::vector<uint32_t> class_counts_v6_;
};

}  // namespace berth
