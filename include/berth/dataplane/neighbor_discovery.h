#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "berth/dataplane/forwarding.h"

namespace berth {

// Learning next hops' MACs on a port: what ARP and IPv6 neighbour discovery frames say about
// their sender, and the requests berth sends for a gateway or an l2dsr backend whose MAC the
// config does not give. The neighbour replies berth answers with are in neighbor_reply.h.

// What kind of message claims a neighbour's MAC. Only a reply to berth's own request may teach
// one; an announcement may where the port's config opts in (docs/neighbors.md).
enum class NeighborClaim : uint8_t {
  kRequest,       // an ARP request or a neighbour solicitation, asking about another host
  kReply,         // an ARP reply or a solicited neighbour advertisement
  kAnnouncement,  // a gratuitous ARP (sender = target address) or an unsolicited advertisement
};

// An address and the MAC a frame on a port says it is at.
struct NeighborObservation {
  IpAddress address;
  MacAddress mac;
  NeighborClaim claim = NeighborClaim::kRequest;
  // The frame's Ethernet source is the MAC it claims. A host sends its own ARP from its own MAC;
  // a frame that claims one MAC from another is someone speaking for it.
  bool from_claimed_mac = false;
};

// What a frame claims about a neighbour, or nullopt: an ARP request's or reply's sender, a
// neighbour solicitation's source with its source link-layer option, or a neighbour
// advertisement's target with its target link-layer option. Frames that claim the unspecified
// address, a multicast MAC, or carry a hop limit other than 255 (RFC 4861, 7.1) claim nothing.
std::optional<NeighborObservation> observeNeighbor(const Frame& frame, const ParsedPacket& packet);

// Writes into `out` an ARP request (IPv4 `target`) or a neighbour solicitation to the target's
// solicited-node multicast group (IPv6), from `source` at `source_mac`, untagged. Returns the
// frame's length, or 0 when `capacity` is too small or the families differ.
inline constexpr size_t kNeighborRequestMaxLength = 86;
size_t buildNeighborRequest(uint8_t* out, size_t capacity, const MacAddress& source_mac,
                            const IpAddress& source, const IpAddress& target);

// What workers record about one next hop for the management thread, which decides
// (control/neighbor_cache.h). Shared between threads through the snapshot, without a lock: the
// management thread opens a request's window and reads the answers; workers record them. Only
// frames that claim the next hop's address come here, never data packets.
class alignas(64) NeighborSlot {
 public:
  // Management: a request of berth's went out; forget the last request's answers.
  void openRequest() {
    answer_.store(0, std::memory_order_relaxed);
    known_answered_.store(false, std::memory_order_relaxed);
    asking_.store(true, std::memory_order_release);
  }
  void closeRequest() { asking_.store(false, std::memory_order_relaxed); }
  bool asking() const { return asking_.load(std::memory_order_acquire); }

  // Workers: a reply to berth's request, from the MAC the snapshot already uses, or from another
  // MAC (only the first is kept: whoever answers first cannot be displaced by a flood after it).
  void recordKnownAnswered() {
    if (!known_answered_.load(std::memory_order_relaxed)) {
      known_answered_.store(true, std::memory_order_relaxed);
    }
  }
  // False when another answer was kept before this one (the same MAC again counts as kept).
  bool recordOtherAnswer(const MacAddress& mac) {
    const uint64_t packed = pack(mac);
    uint64_t held = answer_.load(std::memory_order_relaxed);
    if (held == 0 && answer_.compare_exchange_strong(held, packed, std::memory_order_relaxed)) {
      return true;
    }
    return held == packed;
  }
  // Workers, on a port that learns from announcements: the first one since management looked.
  void recordAnnouncement(const MacAddress& mac) {
    uint64_t none = 0;
    if (announced_.load(std::memory_order_relaxed) == 0) {
      announced_.compare_exchange_strong(none, pack(mac), std::memory_order_relaxed);
    }
  }
  // Workers: a frame claimed another MAC for this next hop and was refused. Several workers may
  // count at once, so this one is an atomic add; only refused claims pay for it.
  void countRefused() { refused_.fetch_add(1, std::memory_order_relaxed); }

  // Management: what the workers recorded.
  bool knownAnswered() const { return known_answered_.load(std::memory_order_relaxed); }
  std::optional<MacAddress> otherAnswer() const {
    return unpack(answer_.load(std::memory_order_relaxed));
  }
  std::optional<MacAddress> takeAnnouncement() {
    // Looked at every turn: a load, and the exchange's write only when there is one.
    if (announced_.load(std::memory_order_relaxed) == 0) return std::nullopt;
    return unpack(announced_.exchange(0, std::memory_order_relaxed));
  }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  // A MAC in the low 48 bits, with bit 48 set so that 0 means none.
  static uint64_t pack(const MacAddress& mac) {
    uint64_t packed = uint64_t{1} << 48;
    for (int i = 0; i < 6; ++i) packed |= uint64_t{mac.bytes[i]} << (8 * (5 - i));
    return packed;
  }
  static std::optional<MacAddress> unpack(uint64_t packed) {
    if (packed == 0) return std::nullopt;
    MacAddress mac;
    for (int i = 0; i < 6; ++i) mac.bytes[i] = static_cast<uint8_t>(packed >> (8 * (5 - i)));
    return mac;
  }

  std::atomic<bool> asking_{false};
  std::atomic<bool> known_answered_{false};
  std::atomic<uint64_t> answer_{0};
  std::atomic<uint64_t> announced_{0};
  // On a line of its own: a flood of refused claims must not slow the reads of the line above.
  alignas(64) std::atomic<uint64_t> refused_{0};
};

// A next hop as a snapshot carries it: the MAC to send to, if known, and the slot its workers
// record claims in (null where nobody resolves it, as in tests and offline tools).
struct ResolvingNextHop {
  std::optional<MacAddress> mac;
  std::shared_ptr<NeighborSlot> slot;
};

// A next hop as a port resolves it: the same address behind two ports is two next hops.
using NeighborKey = std::pair<uint16_t, IpAddress>;  // port index, address

// The next hops' MACs a snapshot is built with, by port and address: the management thread's
// neighbour cache keeps one (control/neighbor_cache.h); tests and offline tools fill one by hand.
class NeighborTable {
 public:
  // Records a MAC; true when it is new or changes the MAC known for the next hop.
  bool learn(uint16_t port, const IpAddress& address, const MacAddress& mac);
  void forget(uint16_t port, const IpAddress& address);  // keeps the slot
  void attach(uint16_t port, const IpAddress& address, std::shared_ptr<NeighborSlot> slot);
  void erase(uint16_t port, const IpAddress& address);
  std::optional<MacAddress> find(uint16_t port, const IpAddress& address) const;
  ResolvingNextHop resolving(uint16_t port, const IpAddress& address) const;
  size_t size() const { return hops_.size(); }

 private:
  absl::flat_hash_map<NeighborKey, ResolvingNextHop> hops_;
};

}  // namespace berth
