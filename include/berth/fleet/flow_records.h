#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/util/named_enum.h"

namespace berth {

// Flow records: how instances behind the same ECMP router tell each other about the flows they
// track off their tables' picks (docs/scale-out.md, "Flows that survive an instance"). Every
// instance computes the same table, so a flow on its table's pick needs no state elsewhere; only
// the exceptions travel. Pure: bytes in, bytes out, with the clock and the keys passed in.
//
// A datagram, all fields in network byte order:
//   header (32 bytes): magic "BRS1", version 1, key id, record count (at most
//     kMaxRecordsPerDatagram), flags (0), sender (64 bits), epoch (64 bits), sequence (64 bits);
//   records (40 bytes each): service (64 bits), backend (64 bits), source address (16 bytes, an
//     IPv4 address in the first 4), source port (as on the wire; 0 where the service hashes no
//     ports), family (4 or 6), state, lifetime in milliseconds (32 bits);
//   HMAC-SHA256 of everything before it under the key the header names (32 bytes).
// Services and backends travel as nameHash64() of their names under kFlowRecordNameSeed, never
// as a process's own ids, so that instances whose ids differ agree on them.

// What a record says about its flow. Values are part of the wire format.
enum class FlowRecordState : uint8_t {
  kWithdrawn = 0,  // the flow ended or went back to its table's pick: forget it
  kTcpEstablished = 1,
  kTcpClosing = 2,  // a FIN or RST seen
  kUdp = 3,         // a confirmed UDP flow
};

inline constexpr uint32_t kFlowRecordNameSeed = 0x73796e63;  // "sync"
// The name hash a record carries for a service's or a backend's name.
uint64_t flowRecordName(absl::string_view name);

struct FlowRecord {
  uint64_t service = 0;  // flowRecordName(service name)
  uint64_t backend = 0;  // flowRecordName(backend name)
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;  // network byte order
  uint8_t family = 4;        // 4 or 6
  FlowRecordState state = FlowRecordState::kWithdrawn;
  // How long the flow lives at the sender if no packet comes: its state's timeout there.
  uint32_t lifetime_ms = 0;

  friend bool operator==(const FlowRecord&, const FlowRecord&) = default;
};

// A shared secret the instances sign datagrams with. Two may be configured while keys rotate:
// a sender signs with the first, and a receiver accepts either.
struct FlowSyncKey {
  uint8_t id = 0;
  std::vector<uint8_t> secret;  // at least kMinSecretBytes

  static constexpr size_t kMinSecretBytes = 16;
};

struct SyncConfig;
// The keys of a sync section, read from their files in order (trailing whitespace, an editor's
// final newline, is not part of a secret); an error names the key's field, line and file.
absl::StatusOr<std::vector<FlowSyncKey>> readSyncKeys(const SyncConfig& config);

// Who sent a datagram and where it stands in the sender's stream.
struct FlowDatagramHeader {
  uint64_t sender = 0;  // flowRecordName(instance name)
  // The sender's start, in nanoseconds of its wall clock: a later start has a larger epoch, so
  // that a receiver tells a restarted sender (whose sequence starts again) from a replay.
  uint64_t epoch = 0;
  uint64_t sequence = 0;  // per sender and epoch, from 1
};

inline constexpr size_t kFlowDatagramHeaderBytes = 32;
inline constexpr size_t kFlowRecordBytes = 40;
inline constexpr size_t kFlowDatagramMacBytes = 32;
// Keeps a full datagram (1,344 bytes) inside a 1,500-byte MTU with IPv6 and UDP headers.
inline constexpr size_t kMaxRecordsPerDatagram = 32;
inline constexpr size_t kMaxFlowDatagramBytes =
    kFlowDatagramHeaderBytes + kMaxRecordsPerDatagram * kFlowRecordBytes + kFlowDatagramMacBytes;
// The longest lifetime a record may carry: a day, far past any flow timeout berth allows.
inline constexpr uint32_t kMaxFlowRecordLifetimeMs = 86'400'000;

// Writes a datagram of `records` (at most kMaxRecordsPerDatagram) signed with `key`, and returns
// its bytes. InvalidArgument for too many records or a key shorter than kMinSecretBytes;
// Internal if OpenSSL fails.
absl::StatusOr<std::vector<uint8_t>> encodeFlowDatagram(const FlowDatagramHeader& header,
                                                        absl::Span<const FlowRecord> records,
                                                        const FlowSyncKey& key);

// Why a received datagram was refused, each with its counter's name.
#define BERTH_FLOW_DATAGRAM_REFUSALS(X)                                                           \
  X(kMalformed, "malformed")    /* too short, wrong magic, version or length, a bad record */     \
  X(kUnknownKey, "unknown_key") /* signed with a key id this instance does not hold */            \
  X(kBadMac, "bad_mac")         /* the HMAC does not match: forged, corrupted or the wrong key */ \
  X(kReplayed, "replayed")      /* a sequence number already seen, or older than the window */    \
  X(kStaleEpoch, "stale_epoch") /* from a start of its sender older than the latest seen */       \
  X(kTooManySenders, "too_many_senders") /* a new sender past the number tracked */               \
  X(kFromSelf, "from_self")              /* this instance's own sender id */

enum class FlowDatagramRefusal : uint8_t { BERTH_FLOW_DATAGRAM_REFUSALS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kFlowDatagramRefusalCount =
    static_cast<size_t>(FlowDatagramRefusal::kCount);
absl::string_view toString(FlowDatagramRefusal refusal);

struct FlowDatagram {
  FlowDatagramHeader header;
  std::vector<FlowRecord> records;
};

// The datagram in `bytes`, if it is well formed and its HMAC matches one of `keys` (the key its
// header names; compared in constant time). Otherwise the refusal. Reads nothing past `bytes`.
// Says nothing about replays: that is ReplayWindows' part, after this check.
struct DecodedFlowDatagram {
  std::optional<FlowDatagram> datagram;
  FlowDatagramRefusal refusal = FlowDatagramRefusal::kMalformed;  // when datagram is empty
};
DecodedFlowDatagram decodeFlowDatagram(absl::Span<const uint8_t> bytes,
                                       absl::Span<const FlowSyncKey> keys);

// What a receiver remembers of each sender so that a captured datagram sent again is refused:
// the sender's latest epoch, and over it the highest sequence number and a 64-wide window of the
// ones below it, as IPsec's anti-replay window (RFC 4303, 3.4.3). A datagram of a later epoch
// starts the sender's window again (it restarted); one of an earlier epoch is refused.
class ReplayWindows {
 public:
  explicit ReplayWindows(size_t max_senders) : max_senders_(max_senders) {}

  enum class Verdict : uint8_t {
    kAccepted,
    kAcceptedNewEpoch,  // the first from this sender, or the first since it restarted
    kRefused,           // see refusal()
  };
  struct Result {
    Verdict verdict = Verdict::kRefused;
    FlowDatagramRefusal refusal = FlowDatagramRefusal::kReplayed;
  };
  // Judges, and on acceptance records, a datagram whose HMAC has been checked: an unchecked one
  // must never move a window.
  Result accept(const FlowDatagramHeader& header);

  // Forgets a sender (it left the fleet).
  void forget(uint64_t sender) { windows_.erase(sender); }
  size_t senders() const { return windows_.size(); }

  static constexpr uint64_t kWindow = 64;

 private:
  struct Window {
    uint64_t epoch = 0;
    uint64_t highest = 0;
    uint64_t seen = 0;  // bit i: highest - i was seen
  };
  size_t max_senders_;
  absl::flat_hash_map<uint64_t, Window> windows_;
};

}  // namespace berth
