// Flow records between instances (fleet/flow_records.h). Pinned:
// - a datagram round-trips every field of its header and records, IPv4 and IPv6, and a full one
//   is the size the header promises and fits a 1,500-byte MTU;
// - a flipped bit anywhere, a wrong key's secret, an unknown key id, a cut or padded datagram, a
//   bad magic, version, count, family, state, lifetime or a set byte past an IPv4 address are
//   refused under their own names, and nothing past the bytes given is read;
// - during a key rotation a receiver holding both keys accepts datagrams signed with either;
// - the replay window accepts each sequence number once, in any order within 64 of the highest,
//   refuses older ones, starts again for a later epoch and refuses an earlier epoch, and tracks
//   at most the senders it was given room for.

#include "berth/fleet/flow_records.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace berth {
namespace {

FlowSyncKey key(uint8_t id, uint8_t fill) {
  return FlowSyncKey{id, std::vector<uint8_t>(32, fill)};
}

FlowRecord v4Record(uint8_t last, uint16_t port) {
  FlowRecord record;
  record.service = flowRecordName("web");
  record.backend = flowRecordName("web-2");
  record.source = {198, 18, 0, last};
  record.source_port = port;
  record.family = 4;
  record.state = FlowRecordState::kTcpEstablished;
  record.lifetime_ms = 300'000;
  return record;
}

FlowRecord v6Record() {
  FlowRecord record;
  record.service = flowRecordName("dns6");
  record.backend = flowRecordName("dns6-1");
  record.source = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  record.source_port = 0;
  record.family = 6;
  record.state = FlowRecordState::kUdp;
  record.lifetime_ms = 30'000;
  return record;
}

const FlowDatagramHeader kHeader{flowRecordName("lb-0"), 1'764'000'000'000'000'000ull, 42};

std::vector<uint8_t> encode(const std::vector<FlowRecord>& records, const FlowSyncKey& with) {
  absl::StatusOr<std::vector<uint8_t>> bytes = encodeFlowDatagram(kHeader, records, with);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// Decodes from a heap copy of exactly `bytes`, so that AddressSanitizer catches a read past it.
DecodedFlowDatagram decodeExactly(const std::vector<uint8_t>& bytes,
                                  const std::vector<FlowSyncKey>& keys) {
  auto copy = std::make_unique<uint8_t[]>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), copy.get());
  return decodeFlowDatagram(absl::MakeConstSpan(copy.get(), bytes.size()), keys);
}

TEST(FlowDatagram, RoundTripsHeaderAndRecords) {
  const std::vector<FlowRecord> records = {v4Record(1, 0x5000), v6Record(), v4Record(2, 0x5001)};
  const std::vector<uint8_t> bytes = encode(records, key(1, 0xaa));
  EXPECT_EQ(bytes.size(), kFlowDatagramHeaderBytes + 3 * kFlowRecordBytes + kFlowDatagramMacBytes);
  const DecodedFlowDatagram decoded = decodeExactly(bytes, {key(1, 0xaa)});
  ASSERT_TRUE(decoded.datagram.has_value()) << toString(decoded.refusal);
  EXPECT_EQ(decoded.datagram->header.sender, kHeader.sender);
  EXPECT_EQ(decoded.datagram->header.epoch, kHeader.epoch);
  EXPECT_EQ(decoded.datagram->header.sequence, kHeader.sequence);
  EXPECT_EQ(decoded.datagram->records, records);
}

TEST(FlowDatagram, AnEmptyOneCarriesItsSenderAsAHeartbeat) {
  const DecodedFlowDatagram decoded = decodeExactly(encode({}, key(1, 0xaa)), {key(1, 0xaa)});
  ASSERT_TRUE(decoded.datagram.has_value());
  EXPECT_TRUE(decoded.datagram->records.empty());
  EXPECT_EQ(decoded.datagram->header.sender, kHeader.sender);
}

TEST(FlowDatagram, AFullOneFitsTheMtu) {
  const std::vector<FlowRecord> records(kMaxRecordsPerDatagram, v4Record(9, 1));
  EXPECT_EQ(encode(records, key(1, 0xaa)).size(), kMaxFlowDatagramBytes);
  EXPECT_LE(kMaxFlowDatagramBytes + 40 + 8, 1500u);  // IPv6 and UDP headers
  const std::vector<FlowRecord> too_many(kMaxRecordsPerDatagram + 1, v4Record(9, 1));
  EXPECT_FALSE(encodeFlowDatagram(kHeader, too_many, key(1, 0xaa)).ok());
}

TEST(FlowDatagram, AShortKeyIsRefusedWhenSigning) {
  EXPECT_FALSE(encodeFlowDatagram(kHeader, {}, FlowSyncKey{1, std::vector<uint8_t>(15, 1)}).ok());
}

TEST(FlowDatagram, EveryFlippedBitFailsTheMacOrTheFormat) {
  const std::vector<uint8_t> bytes = encode({v4Record(1, 2), v6Record()}, key(1, 0xaa));
  for (size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = bytes;
      flipped[byte] ^= static_cast<uint8_t>(1 << bit);
      const DecodedFlowDatagram decoded = decodeExactly(flipped, {key(1, 0xaa)});
      ASSERT_FALSE(decoded.datagram.has_value()) << "byte " << byte << " bit " << bit;
      // Only the header's framing (magic, version, key id, count) is judged before the MAC.
      if (byte >= 8) {
        EXPECT_EQ(decoded.refusal, FlowDatagramRefusal::kBadMac) << "byte " << byte;
      }
    }
  }
}

TEST(FlowDatagram, AWrongSecretUnderTheSameIdIsABadMac) {
  const std::vector<uint8_t> bytes = encode({v4Record(1, 2)}, key(1, 0xaa));
  EXPECT_EQ(decodeExactly(bytes, {key(1, 0xbb)}).refusal, FlowDatagramRefusal::kBadMac);
}

TEST(FlowDatagram, AnUnknownKeyIdIsRefusedByName) {
  const std::vector<uint8_t> bytes = encode({v4Record(1, 2)}, key(3, 0xaa));
  EXPECT_EQ(decodeExactly(bytes, {key(1, 0xaa), key(2, 0xaa)}).refusal,
            FlowDatagramRefusal::kUnknownKey);
  EXPECT_EQ(decodeExactly(bytes, {}).refusal, FlowDatagramRefusal::kUnknownKey);
}

TEST(FlowDatagram, DuringARotationEitherKeyIsAccepted) {
  const std::vector<FlowSyncKey> both = {key(2, 0x22), key(1, 0x11)};
  EXPECT_TRUE(decodeExactly(encode({v4Record(1, 2)}, key(1, 0x11)), both).datagram.has_value());
  EXPECT_TRUE(decodeExactly(encode({v4Record(1, 2)}, key(2, 0x22)), both).datagram.has_value());
  // Once the old key is gone, its datagrams are not.
  EXPECT_EQ(decodeExactly(encode({v4Record(1, 2)}, key(1, 0x11)), {key(2, 0x22)}).refusal,
            FlowDatagramRefusal::kUnknownKey);
}

TEST(FlowDatagram, CutPaddedAndMisframedDatagramsAreMalformed) {
  const std::vector<uint8_t> bytes = encode({v4Record(1, 2)}, key(1, 0xaa));
  for (size_t length = 0; length < bytes.size(); ++length) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(length));
    const DecodedFlowDatagram decoded = decodeExactly(cut, {key(1, 0xaa)});
    EXPECT_FALSE(decoded.datagram.has_value()) << length;
    EXPECT_EQ(decoded.refusal, FlowDatagramRefusal::kMalformed) << length;
  }
  std::vector<uint8_t> padded = bytes;
  padded.push_back(0);
  EXPECT_EQ(decodeExactly(padded, {key(1, 0xaa)}).refusal, FlowDatagramRefusal::kMalformed);
  std::vector<uint8_t> big_count = bytes;
  big_count[6] = kMaxRecordsPerDatagram + 1;
  EXPECT_EQ(decodeExactly(big_count, {key(1, 0xaa)}).refusal, FlowDatagramRefusal::kMalformed);
  std::vector<uint8_t> version = bytes;
  version[4] = 2;
  EXPECT_EQ(decodeExactly(version, {key(1, 0xaa)}).refusal, FlowDatagramRefusal::kMalformed);
}

TEST(FlowDatagram, SignedRecordsBerthNeverWritesAreRefusedWhole) {
  FlowRecord bad_family = v4Record(1, 2);
  bad_family.family = 5;
  FlowRecord bad_state = v4Record(1, 2);
  bad_state.state = static_cast<FlowRecordState>(9);
  FlowRecord too_long = v4Record(1, 2);
  too_long.lifetime_ms = kMaxFlowRecordLifetimeMs + 1;
  FlowRecord v4_with_tail = v4Record(1, 2);
  v4_with_tail.source[15] = 1;
  for (const FlowRecord& record : {bad_family, bad_state, too_long, v4_with_tail}) {
    const std::vector<uint8_t> bytes = encode({v4Record(3, 4), record}, key(1, 0xaa));
    EXPECT_EQ(decodeExactly(bytes, {key(1, 0xaa)}).refusal, FlowDatagramRefusal::kMalformed);
  }
}

FlowDatagramHeader header(uint64_t sender, uint64_t epoch, uint64_t sequence) {
  return FlowDatagramHeader{sender, epoch, sequence};
}

TEST(ReplayWindows, EachSequenceOnceInAnyOrderWithinTheWindow) {
  ReplayWindows windows(8);
  EXPECT_EQ(windows.accept(header(1, 10, 5)).verdict, ReplayWindows::Verdict::kAcceptedNewEpoch);
  EXPECT_EQ(windows.accept(header(1, 10, 5)).verdict, ReplayWindows::Verdict::kRefused);
  EXPECT_EQ(windows.accept(header(1, 10, 7)).verdict, ReplayWindows::Verdict::kAccepted);
  EXPECT_EQ(windows.accept(header(1, 10, 6)).verdict, ReplayWindows::Verdict::kAccepted);
  EXPECT_EQ(windows.accept(header(1, 10, 6)).refusal, FlowDatagramRefusal::kReplayed);
  EXPECT_EQ(windows.accept(header(1, 10, 7)).verdict, ReplayWindows::Verdict::kRefused);
  // 100 ahead: everything 64 or more below it is refused, the rest is still open.
  EXPECT_EQ(windows.accept(header(1, 10, 107)).verdict, ReplayWindows::Verdict::kAccepted);
  EXPECT_EQ(windows.accept(header(1, 10, 43)).verdict, ReplayWindows::Verdict::kRefused);
  EXPECT_EQ(windows.accept(header(1, 10, 44)).verdict, ReplayWindows::Verdict::kAccepted);
  EXPECT_EQ(windows.accept(header(1, 10, 44)).verdict, ReplayWindows::Verdict::kRefused);
  EXPECT_EQ(windows.accept(header(1, 10, 106)).verdict, ReplayWindows::Verdict::kAccepted);
}

TEST(ReplayWindows, ALaterEpochStartsAgainAndAnEarlierOneIsStale) {
  ReplayWindows windows(8);
  windows.accept(header(1, 10, 500));
  EXPECT_EQ(windows.accept(header(1, 11, 1)).verdict, ReplayWindows::Verdict::kAcceptedNewEpoch);
  EXPECT_EQ(windows.accept(header(1, 11, 2)).verdict, ReplayWindows::Verdict::kAccepted);
  const ReplayWindows::Result stale = windows.accept(header(1, 10, 501));
  EXPECT_EQ(stale.verdict, ReplayWindows::Verdict::kRefused);
  EXPECT_EQ(stale.refusal, FlowDatagramRefusal::kStaleEpoch);
}

TEST(ReplayWindows, SendersAreKeptApartAndBounded) {
  ReplayWindows windows(2);
  EXPECT_EQ(windows.accept(header(1, 10, 1)).verdict, ReplayWindows::Verdict::kAcceptedNewEpoch);
  EXPECT_EQ(windows.accept(header(2, 10, 1)).verdict, ReplayWindows::Verdict::kAcceptedNewEpoch);
  const ReplayWindows::Result third = windows.accept(header(3, 10, 1));
  EXPECT_EQ(third.refusal, FlowDatagramRefusal::kTooManySenders);
  windows.forget(1);
  EXPECT_EQ(windows.accept(header(3, 10, 1)).verdict, ReplayWindows::Verdict::kAcceptedNewEpoch);
  EXPECT_EQ(windows.senders(), 2u);
}

}  // namespace
}  // namespace berth
