#include "berth/dataplane/proxy_stream.h"

#include <rte_byteorder.h>
#include <rte_ip.h>

#include <algorithm>
#include <cstring>

#include "berth/net/checksum.h"
#include "berth/net/flow_key.h"

namespace berth {
namespace {

constexpr size_t kTcpSequence = 4;
constexpr size_t kTcpAcknowledgement = 8;
constexpr size_t kTcpOffsetAndFlags = 12;
constexpr size_t kTcpWindow = 14;
constexpr size_t kTcpChecksum = 16;
constexpr size_t kTcpMinimumHeader = 20;
constexpr size_t kTcpMaximumOptions = 40;
constexpr uint8_t kTcpPsh = 0x08;
constexpr uint8_t kOptionEnd = 0;
constexpr uint8_t kOptionNop = 1;
constexpr uint8_t kOptionWindowScale = 3;
constexpr uint8_t kOptionSack = 5;
constexpr uint8_t kMaxWindowScale = 14;  // RFC 7323, 2.3

// Sequence-number distance from `from` to `to` (RFC 9293's modular comparison).
int32_t distance(uint32_t from, uint32_t to) { return static_cast<int32_t>(to - from); }

// A TCP segment's parts, within its IP packet (never past it: Ethernet padding is no part of
// the segment).
struct Segment {
  uint8_t* tcp = nullptr;
  size_t header_length = 0;
  size_t payload_length = 0;
  uint8_t* payload() const { return tcp + header_length; }
  uint16_t checksum() const { return loadBigEndian16(tcp + kTcpChecksum); }
  void setChecksum(uint16_t checksum) const { storeBigEndian16(tcp + kTcpChecksum, checksum); }
  // A 32-bit field replaced, the checksum adjusted for it: what every shifted segment pays, so
  // done on the words as they lie.
  void setWord(size_t offset, uint32_t value) const {
    uint32_t old_word;
    std::memcpy(&old_word, tcp + offset, 4);
    const uint32_t new_word = __builtin_bswap32(value);
    uint16_t checksum;
    std::memcpy(&checksum, tcp + kTcpChecksum, 2);
    checksum = adjustChecksumForWord(checksum, old_word, new_word);
    std::memcpy(tcp + kTcpChecksum, &checksum, 2);
    std::memcpy(tcp + offset, &new_word, 4);
  }
};

// The segment of a packet parsePacket() accepted, whose TCP header lies within the IP packet.
Segment segmentOf(const Frame& frame, const ParsedPacket& packet) {
  Segment segment;
  segment.tcp = frame.data + packet.l4_offset;
  segment.header_length = static_cast<size_t>(segment.tcp[kTcpOffsetAndFlags] >> 4) * 4;
  segment.payload_length =
      size_t{packet.l3_offset} + packet.ip_length - packet.l4_offset - segment.header_length;
  return segment;
}

// The checksum (its value) with `length` bytes at an even offset of what it covers taken out of
// its sum, as if they were zeros. rte_raw_cksum sums the words as they lie: swapped, the same sum
// in the value's byte order (RFC 1071, 2.(B)).
uint16_t withoutBytes(uint16_t checksum, const uint8_t* bytes, size_t length) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint16_t>(~rte_bswap16(rte_raw_cksum(bytes, length)));
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// Sets the IP packet's length to `ip_length` (its header's field, the IPv4 header checksum and
// the TCP checksum's pseudo-header length), and the frame's to end with it.
void resize(Frame& frame, ParsedPacket& packet, const Segment& segment, size_t ip_length) {
  uint8_t* ip = frame.data + packet.l3_offset;
  const size_t l3_header = packet.l4_offset - packet.l3_offset;
  uint8_t old_length[2];
  uint8_t new_length[2];
  storeBigEndian16(old_length, static_cast<uint16_t>(packet.ip_length - l3_header));
  storeBigEndian16(new_length, static_cast<uint16_t>(ip_length - l3_header));
  segment.setChecksum(adjustChecksum(segment.checksum(), old_length, new_length, 2));
  if (packet.flow.family == IpFamily::kIpv4) {
    uint8_t field[2];
    storeBigEndian16(field, static_cast<uint16_t>(ip_length));
    storeBigEndian16(ip + 10, adjustChecksum(loadBigEndian16(ip + 10), ip + 2, field, 2));
    std::memcpy(ip + 2, field, 2);
  } else {
    storeBigEndian16(ip + 4, static_cast<uint16_t>(ip_length - 40));
  }
  const size_t frame_length = packet.l3_offset + ip_length;
  frame.tailroom = frame.tailroom + frame.length - frame_length;
  frame.length = frame_length;
  packet.ip_length = static_cast<uint16_t>(ip_length);
}

// Drops the segment's data (and a FIN after it, whose number follows the data's).
void dropPayload(Frame& frame, ParsedPacket& packet, Segment& segment) {
  segment.setChecksum(withoutBytes(segment.checksum(), segment.payload(), segment.payload_length));
  uint8_t* offset_and_flags = segment.tcp + kTcpOffsetAndFlags;
  uint8_t flags[2] = {offset_and_flags[0],
                      static_cast<uint8_t>(offset_and_flags[1] & ~(kTcpFin | kTcpPsh))};
  segment.setChecksum(adjustChecksum(segment.checksum(), offset_and_flags, flags, 2));
  offset_and_flags[1] = flags[1];
  packet.tcp_flags = flags[1];
  const size_t ip_length = packet.l4_offset - packet.l3_offset + segment.header_length;
  segment.payload_length = 0;
  resize(frame, packet, segment, ip_length);
}

// Puts `length` bytes of header in front of the segment's data. The caller checked the room.
void insertHeader(Frame& frame, ParsedPacket& packet, Segment& segment, const uint8_t* header,
                  size_t length) {
  uint8_t* payload = segment.payload();
  std::memmove(payload + length, payload, segment.payload_length);
  std::memcpy(payload, header, length);
  // The header's length is even and it starts at an even offset (the TCP header's length is a
  // multiple of 4), so the data it pushed along keeps its place in the sum.
  static constexpr uint8_t kZeros[kProxyHeaderMaxLength] = {};
  segment.setChecksum(adjustChecksum(segment.checksum(), kZeros, header, length));
  resize(frame, packet, segment, packet.ip_length + length);
  segment.payload_length += length;
}

// The window of a backend's segment made smaller by `missing` bytes, in its units.
void narrowWindow(const Segment& segment, uint32_t missing, uint8_t scale) {
  if (missing == 0) return;
  const uint16_t window = loadBigEndian16(segment.tcp + kTcpWindow);
  const uint32_t units = (missing + (uint32_t{1} << scale) - 1) >> scale;
  const auto narrowed = static_cast<uint16_t>(window > units ? window - units : 0);
  uint8_t bytes[2];
  storeBigEndian16(bytes, narrowed);
  segment.setChecksum(adjustChecksum(segment.checksum(), segment.tcp + kTcpWindow, bytes, 2));
  std::memcpy(segment.tcp + kTcpWindow, bytes, 2);
}

// The backend's window scale from its SYN-ACK's options, 0 without one.
uint8_t windowScaleOf(const Segment& segment) {
  const uint8_t* options = segment.tcp + kTcpMinimumHeader;
  const size_t length = segment.header_length - kTcpMinimumHeader;
  for (size_t i = 0; i < length;) {
    if (options[i] == kOptionEnd) break;
    if (options[i] == kOptionNop) {
      ++i;
      continue;
    }
    if (i + 1 >= length || options[i + 1] < 2 || i + options[i + 1] > length) break;
    if (options[i] == kOptionWindowScale && options[i + 1] == 3) {
      return std::min(options[i + 2], kMaxWindowScale);
    }
    i += options[i + 1];
  }
  return 0;
}

// The backend's SACK blocks into the client's numbering (see the header): each edge past the
// header less its length, an edge within it the stream's start; a block of header bytes alone,
// and every block while the backend lacks the header, taken out (its bytes become NOPs).
void mapSackBlocks(const Segment& segment, uint32_t start, uint32_t header_length,
                   bool header_acknowledged) {
  const size_t length = segment.header_length - kTcpMinimumHeader;
  uint8_t* options = segment.tcp + kTcpMinimumHeader;
  uint8_t mapped[kTcpMaximumOptions];
  std::memcpy(mapped, options, length);
  bool changed = false;
  for (size_t i = 0; i < length;) {
    if (mapped[i] == kOptionEnd) break;
    if (mapped[i] == kOptionNop) {
      ++i;
      continue;
    }
    if (i + 1 >= length || mapped[i + 1] < 2 || i + mapped[i + 1] > length) break;
    const size_t option_length = mapped[i + 1];
    if (mapped[i] == kOptionSack && option_length >= 10 && (option_length - 2) % 8 == 0) {
      size_t kept = 0;
      for (size_t block = i + 2; block + 8 <= i + option_length; block += 8) {
        const uint32_t left = loadBigEndian32(mapped + block);
        const uint32_t right = loadBigEndian32(mapped + block + 4);
        if (!header_acknowledged || distance(start, right) <= static_cast<int32_t>(header_length)) {
          continue;
        }
        const uint32_t new_left = distance(start, left) >= static_cast<int32_t>(header_length)
                                      ? left - header_length
                                      : start;
        storeBigEndian32(mapped + i + 2 + kept * 8, new_left);
        storeBigEndian32(mapped + i + 2 + kept * 8 + 4, right - header_length);
        ++kept;
      }
      if (kept == 0) {
        std::memset(mapped + i, kOptionNop, option_length);
      } else {
        mapped[i + 1] = static_cast<uint8_t>(2 + kept * 8);
        std::memset(mapped + i + 2 + kept * 8, kOptionNop, option_length - 2 - kept * 8);
      }
      changed = true;
    }
    i += option_length;
  }
  if (!changed) return;
  // The options start at an even offset and their length is a multiple of 4.
  segment.setChecksum(adjustChecksum(segment.checksum(), options, mapped, length));
  std::memcpy(options, mapped, length);
}

}  // namespace

absl::string_view toString(ProxyHeaderState state) {
  switch (state) {
    case ProxyHeaderState::kNone:
      return "none";
    case ProxyHeaderState::kPending:
      return "pending";
    case ProxyHeaderState::kSent:
      return "sent";
    case ProxyHeaderState::kAcknowledged:
      return "acknowledged";
  }
  return "none";
}

void startProxyStream(NatSession& session, const Frame& frame, const ParsedPacket& packet) {
  session.client_stream_start = loadBigEndian32(frame.data + packet.l4_offset + kTcpSequence) + 1;
  session.proxy_header = ProxyHeaderState::kPending;
  session.backend_window_scale = 0;
}

void shiftClientSequence(Frame& frame, const ParsedPacket& packet, uint32_t header_length) {
  Segment segment;
  segment.tcp = frame.data + packet.l4_offset;
  segment.setWord(kTcpSequence, loadBigEndian32(segment.tcp + kTcpSequence) + header_length);
}

ProxyClientStep proxyFromClient(Frame& frame, ParsedPacket& packet, NatSession& session,
                                const ProxyEndpoints& header, uint16_t mtu) {
  Segment segment = segmentOf(frame, packet);
  const uint32_t header_length = proxyHeaderLength(session.client_family);
  if ((packet.tcp_flags & kTcpSyn) != 0) {
    if (segment.payload_length == 0) return ProxyClientStep::kSyn;
    dropPayload(frame, packet, segment);
    return ProxyClientStep::kSynDataDropped;
  }
  const uint32_t sequence = loadBigEndian32(segment.tcp + kTcpSequence);
  const ProxyHeaderState state = session.proxy_header;
  const bool at_start = sequence == session.client_stream_start;
  const bool carries = segment.payload_length > 0 || (packet.tcp_flags & kTcpFin) != 0;
  if (at_start && (packet.tcp_flags & kTcpRst) == 0 &&
      (state == ProxyHeaderState::kPending || (state == ProxyHeaderState::kSent && carries))) {
    const size_t room = frame.tailroom + frame.length - packet.l3_offset;
    const size_t grown = size_t{packet.ip_length} + header_length;
    const bool fits = grown <= mtu && grown <= room;
    if (fits || state == ProxyHeaderState::kPending) {
      uint8_t bytes[kProxyHeaderMaxLength];
      const size_t length = encodeProxyHeader(header, bytes);
      const bool alone = !fits;
      if (alone) dropPayload(frame, packet, segment);
      insertHeader(frame, packet, segment, bytes, length);
      session.proxy_header = ProxyHeaderState::kSent;
      return alone ? ProxyClientStep::kHeaderAlone : ProxyClientStep::kHeaderInserted;
    }
  }
  segment.setWord(kTcpSequence, sequence + header_length);
  return ProxyClientStep::kShifted;
}

void proxyFromBackend(Frame& frame, const ParsedPacket& packet, NatSession& session) {
  const Segment segment = segmentOf(frame, packet);
  const uint8_t flags = packet.tcp_flags;
  const bool syn = (flags & kTcpSyn) != 0;
  if (syn && segment.header_length > kTcpMinimumHeader) {
    session.backend_window_scale = windowScaleOf(segment);
  }
  if ((flags & kTcpAck) == 0) return;
  const uint32_t start = session.client_stream_start;
  const uint32_t header_length = proxyHeaderLength(session.client_family);
  const uint32_t acknowledged = loadBigEndian32(segment.tcp + kTcpAcknowledgement);
  const int32_t past_start = distance(start, acknowledged);
  if (past_start >= static_cast<int32_t>(header_length)) [[likely]] {
    // What all but a connection's first few segments find: the header acknowledged.
    if (session.proxy_header != ProxyHeaderState::kAcknowledged) {
      session.proxy_header = ProxyHeaderState::kAcknowledged;
    }
    segment.setWord(kTcpAcknowledgement, acknowledged - header_length);
    if (segment.header_length > kTcpMinimumHeader) {
      mapSackBlocks(segment, start, header_length, true);
    }
    return;
  }
  // The backend lacks (part of) the header: nothing of the client's is acknowledged, and the
  // header takes what it still lacks of the window.
  if (past_start > 0) segment.setWord(kTcpAcknowledgement, start);
  if (past_start <= 0 && session.proxy_header == ProxyHeaderState::kSent) {
    session.proxy_header = ProxyHeaderState::kPending;
  }
  const uint32_t missing = header_length - static_cast<uint32_t>(std::max(past_start, 0));
  // A SYN's window is never scaled (RFC 7323, 2.2).
  narrowWindow(segment, missing, syn ? 0 : session.backend_window_scale);
  if (segment.header_length > kTcpMinimumHeader) {
    mapSackBlocks(segment, start, header_length, false);
  }
}

void unshiftEmbeddedSequence(Frame& frame, const ParsedPacket& packet, const NatSession& session) {
  const uint8_t* end =
      frame.data + std::min<size_t>(frame.length, size_t{packet.l3_offset} + packet.ip_length);
  uint8_t* icmp = frame.data + packet.l4_offset;
  uint8_t* inner_ip = icmp + 8;
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  if (inner_ip + (v4 ? 20 : 40) > end) return;
  const size_t inner_header_length = v4 ? static_cast<size_t>(inner_ip[0] & 0x0F) * 4 : 40;
  if ((v4 ? inner_ip[9] : inner_ip[6]) != kProtocolTcp) return;
  uint8_t* inner_tcp = inner_ip + inner_header_length;
  if (inner_tcp + kTcpSequence + 4 > end) return;
  const uint32_t start = session.client_stream_start;
  const uint32_t header_length = proxyHeaderLength(session.client_family);
  const uint32_t sequence = loadBigEndian32(inner_tcp + kTcpSequence);
  const uint32_t unshifted = distance(start, sequence) >= static_cast<int32_t>(header_length)
                                 ? sequence - header_length
                                 : start;
  uint8_t bytes[4];
  storeBigEndian32(bytes, unshifted);
  uint16_t icmp_checksum = loadBigEndian16(icmp + 2);
  if (inner_tcp + kTcpChecksum + 2 <= end) {
    const uint16_t tcp_checksum = loadBigEndian16(inner_tcp + kTcpChecksum);
    uint8_t new_checksum[2];
    storeBigEndian16(new_checksum,
                     adjustChecksum(tcp_checksum, inner_tcp + kTcpSequence, bytes, 4));
    icmp_checksum = adjustChecksum(icmp_checksum, inner_tcp + kTcpChecksum, new_checksum, 2);
    std::memcpy(inner_tcp + kTcpChecksum, new_checksum, 2);
  }
  icmp_checksum = adjustChecksum(icmp_checksum, inner_tcp + kTcpSequence, bytes, 4);
  std::memcpy(inner_tcp + kTcpSequence, bytes, 4);
  storeBigEndian16(icmp + 2, icmp_checksum);
}

}  // namespace berth
