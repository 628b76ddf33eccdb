#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/gen/traffic.h"

namespace berth {

// berthgen's verifying sink: decodes what berthd sent on (ipip, gue, gre or l2dsr, told apart by
// the outer headers, or a Full-NAT backend's reply that berthd translated back to the client),
// finds the flow and the packet from the inner headers and the stamp, rebuilds the frame berthgen
// sent and compares the inner packet with it byte for byte, and keeps per-flow books: which backend
// (outer destination address, or destination MAC for l2dsr), loss, duplicates, reordering, and
// latency from the stamp. One sink per receiving lcore; nothing is shared, nothing allocated per
// packet once every backend has been seen.

// A backend as the wire shows it: an outer destination address, or a destination MAC (l2dsr).
struct BackendKey {
  enum Kind : uint8_t { kNone = 0, kMac = 2, kIpv4 = 4, kIpv6 = 6 };
  Kind kind = kNone;
  std::array<uint8_t, 16> bytes{};

  static BackendKey of(const IpAddress& address);
  static BackendKey of(const MacAddress& mac);
  std::string toString() const;
  friend bool operator==(const BackendKey&, const BackendKey&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const BackendKey& key) {
    return H::combine(std::move(state), key.kind, key.bytes);
  }
};

// Where berth's table sends each flow, from the same config with the same Maglev library and
// flow hash: the backend's address, or its configured MAC for an l2dsr service (kNone where the
// MAC is resolved at run time, or no service or backend takes the flow).
absl::StatusOr<std::vector<BackendKey>> tableBackends(const Config& config,
                                                      const std::vector<GenFlow>& flows);

// Latency in nanoseconds, in log-linear buckets: exact below 64 ns, then 32 buckets per power of
// two (at most 3% off).
class LatencyHistogram {
 public:
  LatencyHistogram() : buckets_(kBuckets, 0) {}
  void add(uint64_t nanoseconds);
  void merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  // The smallest value at or above the fraction `quantile` (0..1) of samples; 0 when empty.
  uint64_t percentile(double quantile) const;

 private:
  static constexpr size_t kBuckets = 64 + 58 * 32;
  static size_t bucketOf(uint64_t value);
  static uint64_t upperOf(size_t bucket);
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
};

// A flow packet that never arrived: the flow's index and the packet's sequence number in it.
struct MissingPacket {
  uint32_t flow = 0;
  uint32_t sequence = 0;
  friend bool operator==(const MissingPacket&, const MissingPacket&) = default;
};

struct SinkTotals {
  uint64_t frames = 0;    // every frame received
  uint64_t verified = 0;  // ours, decoded, inner packet intact
  uint64_t corrupt = 0;   // ours by their headers, but the bytes differ from what was sent
  uint64_t foreign = 0;   // not berthgen's traffic (ARP, another flow, undecodable)
  uint64_t flood = 0;     // TCP from a port below the flows' (floodFlow: berthgen's --flood)
  uint64_t too_big = 0;   // ICMP "fragmentation needed" / "packet too big" sent back by berthd
  uint64_t duplicates = 0;
  uint64_t reordered = 0;  // arrived after a later packet of its flow
};

class Sink {
 public:
  // `flows` and the source networks as the generator made them; `gue_port` the outer UDP port
  // that marks gue (0: none); `tsc_hz` for latency.
  Sink(const std::vector<GenFlow>* flows, SourceNet source_v4, SourceNet source_v6,
       uint16_t gue_port, uint64_t tsc_hz);

  // Checks and counts one frame, received at `now_tsc`.
  void receive(const uint8_t* frame, size_t length, uint64_t now_tsc);

  const SinkTotals& totals() const { return totals_; }
  const LatencyHistogram& latency() const { return latency_; }
  // The backends seen, in order of first appearance, and packets to each.
  const std::vector<BackendKey>& backends() const { return backends_; }
  const std::vector<uint64_t>& backendPackets() const { return backend_packets_; }
  // Per flow: the backend index its first packet went to (-1: none yet), and whether any later
  // packet went elsewhere; unique packets received.
  int32_t flowBackend(size_t flow) const { return flows_state_[flow].backend; }
  bool flowMoved(size_t flow) const { return flows_state_[flow].moved; }
  uint64_t flowReceived(size_t flow) const { return flows_state_[flow].received; }
  // Which flow packets never arrived, given how many each flow sent (`sent[f]`): those given up
  // as their flow's window moved past them, then the holes still in each window and those after
  // each flow's highest. Says where in a run a loss fell. At most kMissingKept entries, so that
  // the sink allocates nothing per packet; a run that lost more is described by its first ones.
  std::vector<MissingPacket> missing(const std::vector<uint64_t>& sent) const;
  static constexpr size_t kMissingKept = 4096;

 private:
  struct FlowState {
    int32_t backend = -1;
    bool moved = false;
    bool any = false;
    uint32_t highest = 0;  // highest sequence seen
    uint64_t window = 0;   // bit i: sequence highest - i seen
    uint64_t received = 0;
  };
  // The inner IP packet at `ip` (`length` bytes) of a frame that went to `backend`.
  void check(const uint8_t* ip, size_t length, const BackendKey& backend, uint64_t now_tsc);
  // A Full-NAT backend's reply to flow `flow_index` (berthgen --reflect), as berthd rewrote it
  // to come from the VIP: the IP packet at `ip`, its L4 header at `l4`.
  void checkReply(const uint8_t* ip, size_t length, size_t l4, uint32_t flow_index,
                  uint64_t now_tsc);
  // Books packet `sequence` of `flow`, sent at `sent_tsc`, as verified and served by `backend`.
  void record(uint32_t flow, uint32_t sequence, uint64_t sent_tsc, const BackendKey& backend,
              uint64_t now_tsc);
  int32_t backendIndex(const BackendKey& backend);
  // Before `state`'s window moves up by `shift`: keeps the sequences that leave it unseen.
  void keepLeavingUnseen(uint32_t flow, const FlowState& state, uint32_t shift);
  // Counts `sequence` of `flow` as new, a duplicate or reordered, over a window of the 64
  // sequences below the highest seen.
  void recordSequence(uint32_t flow, FlowState& state, uint32_t sequence);
  void keepMissing(uint32_t flow, uint32_t sequence);

  const std::vector<GenFlow>* flows_;
  SourceNet source_v4_;
  SourceNet source_v6_;
  uint16_t gue_port_;
  double ns_per_tsc_;
  std::vector<FlowState> flows_state_;
  absl::flat_hash_map<BackendKey, int32_t> backend_index_;
  std::vector<BackendKey> backends_;
  std::vector<uint64_t> backend_packets_;
  SinkTotals totals_;
  LatencyHistogram latency_;
  std::vector<uint8_t> expected_;        // scratch: the frame as sent
  std::vector<uint8_t> reply_;           // scratch: a reply, its checksums recomputed
  std::vector<MissingPacket> given_up_;  // reserved to kMissingKept up front
};

}  // namespace berth
