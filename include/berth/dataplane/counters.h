#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/net/packet_parser.h"
#include "berth/util/named_enum.h"

namespace berth {

// Every reason the pipeline drops a frame that parsed, each with its counter's name. (Parse
// failures have their own list, BERTH_PARSE_ERRORS.) Katran and VPP's lb plugin count every drop
// this way and never log one.
#define BERTH_DROP_REASONS(X)                                                                      \
  X(kOtherEtherType, "other_ethertype")        /* neither IP nor ARP */                            \
  X(kNotForUs, "not_for_us")                   /* another MAC, or an address berth does not own */ \
  X(kVlanNotConfigured, "vlan_not_configured") /* a tag (or none) no port on the device has */     \
  X(kNoService, "no_service")                  /* no service at (VIP, port, protocol) */           \
  X(kNoBackend, "no_backend")                  /* the service's table has no backend there */      \
  X(kLaterFragment, "later_fragment")          /* no ports, and the service hashes 5-tuples */     \
  X(kTooBigFragmentable, "too_big_fragmentable") /* over the MTU, DF clear: not fragmented */      \
  X(kTooBigNoReply, "too_big_no_reply") /* over the MTU, and no room for the ICMP reply */         \
  X(kTooBigNotAnswerable, "too_big_not_answerable") /* over the MTU; no ICMP error may answer */   \
  X(kTooBigRateLimited, "too_big_rate_limited")     /* over the MTU; past the ICMP reply limit */  \
  X(kNoHeadroom, "no_headroom")                  /* no room in the mbuf for the outer headers */   \
  X(kNextHopUnresolved, "next_hop_unresolved")   /* gateway or backend MAC not known yet */        \
  X(kNeighborNotAnswered, "arp_nd_not_answered") /* ARP or ND that asks nothing of berth */        \
  X(kTxRingFull, "tx_ring_full")                 /* the NIC's TX queue refused the burst */        \
  X(kMultiSegment, "multi_segment")              /* a chained mbuf; berth's pools never chain */   \
  X(kPortDown, "port_down")                      /* its memif port was down or still connecting */ \
  X(kKernelQueueFull, "kernel_queue_full") /* for the kernel interface; its class's queue full */  \
  X(kNoEgressQueue, "no_egress_queue") /* the worker has no TX queue on the egress port's device   \
                                        */                                                         \
  X(kNatFragment, "nat_fragment") /* a fragment of a fullnat service's or a reply's datagram */    \
  X(kNatNotTranslatable, "nat_icmp_not_translatable") /* an ICMP error too short or not TCP/UDP */

enum class DropReason : uint8_t { BERTH_DROP_REASONS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
absl::string_view toString(DropReason reason);

// A counter with one writer, its worker lcore. The writer's add() is a plain load, add and store
// (no locked instruction: nobody else writes), and readers on other threads load it relaxed. The
// atomic type only keeps that well-defined in C++; on x86 it compiles to ordinary moves.
class Counter {
 public:
  void add(uint64_t amount) {
    value_.store(value_.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
  // Takes back what add() counted too early (a TX burst the NIC then refused).
  void subtract(uint64_t amount) {
    value_.store(value_.load(std::memory_order_relaxed) - amount, std::memory_order_relaxed);
  }
  // For gauges kept in a Counter, such as a timestamp.
  void set(uint64_t value) { value_.store(value, std::memory_order_relaxed); }
  uint64_t read() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// What the per-core connection table counts (conntrack.h), each with its counter's name.
#define BERTH_CONNTRACK_EVENTS(X)                                                                  \
  X(kHit, "hits")                      /* a live connection found */                               \
  X(kMiss, "misses")                   /* none found: the table picks */                           \
  X(kInsert, "inserts")                /* a new connection recorded */                             \
  X(kEviction, "evictions")            /* a live connection pushed out of a full bucket (LRU) */   \
  X(kExpiry, "expiries")               /* a connection reclaimed after its timeout */              \
  X(kRepick, "repicks")                /* its backend gone or unhealthy: picked again */           \
  X(kInsertSkipped, "inserts_skipped") /* over the insert rate limit: forwarded, not recorded */   \
  X(kTableFull, "table_full")          /* an insert while every way of the table was taken */      \
  X(kBoundedLoadFallback, "bounded_load_fallbacks") /* new, past its pick at its load bound */     \
  X(kUnconfirmedInsert, "unconfirmed_inserts")      /* first packet not a SYN, or a UDP flow's */  \
  X(kConfirmation, "confirmations")                /* an unconfirmed connection's second packet */ \
  X(kUnconfirmedEviction, "evictions_unconfirmed") /* evictions of unconfirmed or opening */       \
  X(kSyncExport, "sync_exports") /* news for the peers about a connection off its table's pick */  \
  X(kSyncRingFull, "sync_ring_full") /* news the ring to the management thread had no room for */  \
  X(kSyncAdoption, "sync_adoptions") /* a miss sent to the backend a peer's record names */

enum class ConntrackEvent : uint8_t { BERTH_CONNTRACK_EVENTS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kConntrackEventCount = static_cast<size_t>(ConntrackEvent::kCount);
absl::string_view toString(ConntrackEvent event);

struct ConntrackCounters {
  std::array<Counter, kConntrackEventCount> values;
};

// What a worker's Full-NAT sessions count (nat_sessions.h), each with its counter's name.
#define BERTH_NAT_EVENTS(X)                                                                        \
  X(kOpened, "opened")                  /* a session made: a local address and port taken */       \
  X(kClosed, "closed")                  /* a session ended (closed, or idle past its timeout) */   \
  X(kReleased, "released")              /* a local port free again, its reuse hold over */         \
  X(kPortsExhausted, "ports_exhausted") /* new, and this worker's share of every address taken */  \
  X(kPortSearchLimit, "port_search_limit") /* new; free ports left but none in the search limit */ \
  X(kTableFull, "table_full")        /* new, and every session of the worker's table in use */     \
  X(kIndexFull, "index_full")        /* new, and both its client buckets full (rare as sized) */   \
  X(kSpacesFull, "port_spaces_full") /* new, for a pair beyond the (address, backend) room */      \
  X(kReopened, "reopened")           /* a SYN on a closing session: it ends, a new one starts */   \
  X(kReplyNoSession, "reply_no_session")   /* to a local address, matching no live session */      \
  X(kClientNoSession, "client_no_session") /* TCP other than a SYN, of no session: dropped */      \
  X(kIcmpNoSession, "icmp_no_session")     /* an ICMP error about a flow of no session here */     \
  X(kIcmpHandedOff, "icmp_handed_off") /* an ICMP error about another worker's session, sent it */ \
  X(kIcmpHandOffFull, "icmp_hand_off_full") /* the same, but that worker's ring full: dropped */   \
  X(kNoLocalAddress, "no_local_address") /* new; the egress port has no address of its version */  \
  X(kBackendGone, "backend_gone") /* a session's backend left or failed: the session ended */      \
  X(kProxyHeaderSent, "proxy_header_sent")   /* a PROXY header put in a client's segment */        \
  X(kProxyHeaderAlone, "proxy_header_alone") /* it and the data exceeded the MTU: it went alone */ \
  X(kProxyHeaderLost, "proxy_header_lost") /* the backend acknowledged up to the header's start */ \
  X(kProxySynData, "proxy_syn_data_dropped") /* a SYN's data (Fast Open) dropped: before header */ \
  X(kNat64ToIpv4, "translated_to_ipv4")      /* NAT64: a client's IPv6 packet sent on as IPv4 */   \
  X(kNat64ToIpv6, "translated_to_ipv6")      /* NAT64: a backend's IPv4 packet sent on as IPv6 */  \
  X(kNat64Icmp, "icmp_translated")           /* NAT64: an ICMP error turned ICMPv6 or ICMPv4 */
enum class NatEvent : uint8_t { BERTH_NAT_EVENTS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kNatEventCount = static_cast<size_t>(NatEvent::kCount);
absl::string_view toString(NatEvent event);
struct NatCounters {
  std::array<Counter, kNatEventCount> values;
  void count(NatEvent event) { values[static_cast<size_t>(event)].add(1); }
  uint64_t read(NatEvent event) const { return values[static_cast<size_t>(event)].read(); }
};

// Why a worker refused an ARP or ND frame's claim that a next hop is at another MAC than the one
// in use (docs/neighbors.md), each with its counter's name.
#define BERTH_NEIGHBOR_REFUSALS(X)                                                                 \
  X(kUnsolicited, "unsolicited") /* a reply no request of berth's waits for, or not to berth */    \
  X(kSourceMismatch, "source_mismatch") /* the Ethernet source is not the MAC claimed */           \
  X(kAnnouncement, "announcement") /* gratuitous ARP or unsolicited NA, not learned on the port */ \
  X(kNotAReply, "not_a_reply")     /* a request or solicitation claiming the next hop's address */ \
  X(kLateAnswer, "late_answer")    /* another MAC's reply after a request already has one */

enum class NeighborRefusal : uint8_t { BERTH_NEIGHBOR_REFUSALS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kNeighborRefusalCount = static_cast<size_t>(NeighborRefusal::kCount);
absl::string_view toString(NeighborRefusal refusal);

// One worker's counters, in a cache line of its own so workers never share one.
struct alignas(64) WorkerCounters {
  Counter rx_packets;
  Counter rx_bytes;
  Counter tx_packets;
  Counter tx_bytes;
  Counter arp_nd_replies;
  Counter icmp_too_big_replies;
  std::array<Counter, kParseErrorCount> parse_errors;
  std::array<Counter, kDropReasonCount> drops;
  ConntrackCounters conntrack;
  NatCounters nat;  // Full-NAT sessions (docs/fullnat.md)
  std::array<Counter, kNeighborRefusalCount> neighbor_refusals;
  // Frames queued for the port's kernel interface, per ExceptionClass (docs/exception-path.md).
  std::array<Counter, kExceptionClassCount> to_kernel;
  // Idle sleeps (DataplaneConfig::idle), and the microseconds they took, wake-ups included.
  Counter idle_sleeps;
  Counter idle_sleep_us;

  void count(ParseError error) { parse_errors[static_cast<size_t>(error)].add(1); }
  void count(DropReason reason) { drops[static_cast<size_t>(reason)].add(1); }
  void count(NeighborRefusal refusal) { neighbor_refusals[static_cast<size_t>(refusal)].add(1); }
};

// Packets and bytes of one service or one backend, on one worker, and the connections this
// worker's connection table holds for it (a gauge: the table adds and takes back).
struct TrafficCounter {
  Counter packets;
  Counter bytes;
  Counter connections;  // a gauge: tracked now
  Counter opened;       // connections recorded so far: the new-connection rate's source
  void add(uint64_t length) {
    packets.add(1);
    bytes.add(length);
  }
};

// Room the workers' per-service and per-backend arrays (counters and loads) are sized for; the
// ids CounterIds (snapshot.h) hands out stay below them.
inline constexpr uint32_t kCounterServiceSlots = 4096;
inline constexpr uint32_t kCounterBackendSlots = 65536;

// One worker's per-service and per-backend counters, indexed by the stable ids of CounterIds
// (snapshot.h), so they survive snapshot swaps. Allocated once, at start, on the worker's socket
// by the caller that owns the memory.
struct TrafficCounters {
  TrafficCounter* services = nullptr;  // kCounterServiceSlots entries
  TrafficCounter* backends = nullptr;  // kCounterBackendSlots entries
};

// Active-flow counts for bounded-load services (boundedLoadChoice, maglev/consistent_hash.h). The
// management thread sums the workers' per-backend connection gauges every kLoadPublishIntervalMs
// and stores them here; workers read them with relaxed loads when a new flow of such a service
// arrives. Indexed by the stable ids of CounterIds, so they outlive snapshot swaps.
//
// Staleness: a worker sees the others' new flows up to one interval (plus one of its loops)
// late, so a backend can pass its bound by what the other workers send it in that time. Its own
// new flows it counts at once (WorkerLoads), so a single worker never passes a bound.
inline constexpr uint32_t kLoadPublishIntervalMs = 100;

struct BackendLoads {
  // Bumped after each publication: workers drop their own counts from before it, which the
  // published gauges now include.
  std::atomic<uint32_t> generation{0};
  std::array<std::atomic<uint32_t>, kCounterBackendSlots> active{};
  // Per service: the active flows of its serving backends (healthy, weight above 0) together.
  std::array<std::atomic<uint32_t>, kCounterServiceSlots> serving_total{};
};

// One worker's view: the published counts plus the new flows it has placed since the last
// publication it saw. Written and read by its worker only.
class WorkerLoads {
 public:
  explicit WorkerLoads(const BackendLoads* shared)
      : shared_(shared), backends_(kCounterBackendSlots), services_(kCounterServiceSlots) {}

  // Reads the publication generation once per choice, so that one choice sees one generation.
  uint32_t generation() const { return shared_->generation.load(std::memory_order_acquire); }
  uint32_t backend(uint32_t id, uint32_t generation) const {
    return shared_->active[id].load(std::memory_order_relaxed) + own(backends_[id], generation);
  }
  uint32_t servingTotal(uint32_t service, uint32_t generation) const {
    return shared_->serving_total[service].load(std::memory_order_relaxed) +
           own(services_[service], generation);
  }
  // A new flow placed on `backend` of `service`.
  void add(uint32_t service, uint32_t backend, uint32_t generation) {
    bump(services_[service], generation);
    bump(backends_[backend], generation);
  }

 private:
  struct Own {
    uint32_t generation = 0;
    uint32_t added = 0;
  };
  static uint32_t own(const Own& own, uint32_t generation) {
    return own.generation == generation ? own.added : 0;
  }
  static void bump(Own& own, uint32_t generation) {
    if (own.generation != generation) own = {generation, 0};
    ++own.added;
  }

  const BackendLoads* shared_;
  std::vector<Own> backends_;
  std::vector<Own> services_;
};

// The sum over workers, as the management thread reports it: (name, value) in a fixed order,
// "rx_packets" ... then "parse_<error>", "drop_<reason>", "conntrack_<event>", "nat_<event>",
// "neighbor_refused_<refusal>" and "to_kernel_<class>" for every error, reason, event, refusal
// and exception class.
std::vector<std::pair<std::string, uint64_t>> sumCounters(
    absl::Span<const WorkerCounters* const> workers);

}  // namespace berth
