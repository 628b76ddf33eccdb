#include "berth/gen/traffic.h"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_thash.h>
#include <rte_udp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "berth/net/toeplitz.h"

namespace berth {
namespace {

constexpr size_t kEthernet = 14;
constexpr size_t kMaxFrame = 9000;

size_t headersOf(const GenFlow& flow) {
  const size_t ip = flow.key.family == IpFamily::kIpv4 ? 20 : 40;
  const size_t l4 = flow.key.protocol == kProtocolTcp ? 20 : 8;
  return kEthernet + ip + l4;
}

// The stamp's offset from the first L4 payload byte: UDP puts the sequence first.
size_t stampOffset(const GenFlow& flow) { return flow.key.protocol == kProtocolTcp ? 0 : 4; }

}  // namespace

absl::StatusOr<VipTarget> VipTarget::parse(absl::string_view text) {
  auto invalid = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("--vip '", text,
                     "': expected ADDRESS:PORT/PROTO, such as 198.18.100.1:80/tcp "
                     "or [2001:db8::1]:53/udp"));
  };
  const size_t slash = text.rfind('/');
  if (slash == absl::string_view::npos) return invalid();
  const std::string protocol = absl::AsciiStrToLower(text.substr(slash + 1));
  absl::StatusOr<Endpoint> endpoint = Endpoint::parse(text.substr(0, slash));
  if (!endpoint.ok() || endpoint->port == 0) return invalid();
  VipTarget vip;
  vip.address = endpoint->address;
  vip.port = endpoint->port;
  if (protocol == "tcp") {
    vip.protocol = kProtocolTcp;
  } else if (protocol == "udp") {
    vip.protocol = kProtocolUdp;
  } else {
    return invalid();
  }
  return vip;
}

std::string VipTarget::toString() const {
  return absl::StrCat(Endpoint{address, port}.toString(),
                      protocol == kProtocolTcp ? "/tcp" : "/udp");
}

absl::StatusOr<SourceNet> SourceNet::parse(absl::string_view text) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--src-net '", text, "': ", why));
  };
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos)
    return invalid("expected ADDRESS/PREFIX, such as 198.18.0.0/15");
  absl::StatusOr<IpAddress> address = IpAddress::parse(text.substr(0, slash));
  if (!address.ok()) return invalid("not an IPv4 or IPv6 address before the '/'");
  int prefix = 0;
  const int bits = address->isV4() ? 32 : 128;
  if (!absl::SimpleAtoi(text.substr(slash + 1), &prefix) || prefix < 0 || prefix > bits) {
    return invalid(absl::StrCat("the prefix length must be 0 to ", bits));
  }
  SourceNet net{*address, prefix};
  // The network address: host bits cleared.
  for (int bit = prefix; bit < bits; ++bit) net.base.bytes[bit / 8] &= ~(0x80 >> (bit % 8));
  return net;
}

std::string SourceNet::toString() const {
  return absl::StrCat(base.toString(), "/", prefix_length);
}

uint64_t SourceNet::size() const {
  const int host_bits = (base.isV4() ? 32 : 128) - prefix_length;
  return host_bits >= 32 ? (uint64_t{1} << 32) : (uint64_t{1} << host_bits);
}

IpAddress SourceNet::at(uint64_t index) const {
  IpAddress address = base;
  const size_t last = base.isV4() ? 3 : 15;
  uint64_t carry = index;
  for (size_t i = last + 1; i-- > 0 && carry != 0;) {
    const uint64_t sum = address.bytes[i] + (carry & 0xff);
    address.bytes[i] = static_cast<uint8_t>(sum);
    carry = (carry >> 8) + (sum >> 8);
  }
  return address;
}

absl::StatusOr<std::vector<GenFlow>> makeFlows(const std::vector<VipTarget>& vips,
                                               const SourceNet& source_v4,
                                               const SourceNet& source_v6, uint32_t count) {
  if (vips.empty()) return absl::InvalidArgumentError("give at least one --vip");
  if (count == 0) return absl::InvalidArgumentError("--flows must be at least 1");
  if (!source_v4.base.isV4() || source_v6.base.isV4()) {
    return absl::InvalidArgumentError("source networks: one IPv4, one IPv6");
  }
  std::vector<GenFlow> flows;
  flows.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const VipTarget& vip = vips[i % vips.size()];
    const SourceNet& source = vip.address.isV4() ? source_v4 : source_v6;
    const uint64_t addresses = std::min(source.size(), kMaxSourceAddresses);
    if (addresses * kSourcePortsPerAddress < count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--src-net ", source.toString(), " has ", source.size(), " addresses; ", count,
          " flows need ", (count + kSourcePortsPerAddress - 1) / kSourcePortsPerAddress, " (",
          kSourcePortsPerAddress, " ports each)"));
    }
    GenFlow flow;
    flow.vip = static_cast<uint32_t>(i % vips.size());
    flow.key = FlowKey::make(source.at(i % addresses), vip.address,
                             static_cast<uint16_t>(kFirstSourcePort + i / addresses), vip.port,
                             vip.protocol);
    flows.push_back(flow);
  }
  return flows;
}

int64_t flowIndexOf(const FlowKey& key, const SourceNet& source,
                    const std::vector<GenFlow>& flows) {
  const uint16_t port = rte_be_to_cpu_16(key.source_port);
  if (port < kFirstSourcePort || port >= kFirstSourcePort + kSourcePortsPerAddress) return -1;
  // The address's offset in the network: the low 32 bits of (address - base).
  const size_t width = key.family == IpFamily::kIpv4 ? 4 : 16;
  uint64_t offset = 0;
  int borrow = 0;
  uint64_t scale = 1;
  for (size_t i = width; i-- > width - 4;) {
    int difference = key.source[i] - source.base.bytes[i] - borrow;
    borrow = difference < 0;
    offset += static_cast<uint64_t>((difference + 256) & 0xff) * scale;
    scale <<= 8;
  }
  const uint64_t addresses = std::min(source.size(), kMaxSourceAddresses);
  if (offset >= addresses) return -1;
  const uint64_t index = (port - kFirstSourcePort) * addresses + offset;
  if (index >= flows.size() || !(flows[index].key == key)) return -1;
  return static_cast<int64_t>(index);
}

GenFlow floodFlow(const VipTarget& vip, const SourceNet& source, uint64_t random) {
  const uint64_t addresses = std::min(source.size(), kMaxSourceAddresses);
  GenFlow flow;
  flow.key = FlowKey::make(source.at(random % addresses), vip.address,
                           static_cast<uint16_t>(1 + (random >> 32) % (kFirstSourcePort - 1)),
                           vip.port, kProtocolTcp);
  return flow;
}

size_t minimumFrameSize(const GenFlow& flow) {
  return std::max<size_t>(60, headersOf(flow) + stampOffset(flow) + kStampBytes);
}

size_t buildFrame(const GenFlow& flow, uint32_t flow_index, uint32_t sequence, uint64_t tsc,
                  size_t size, const MacAddress& source_mac, const MacAddress& destination_mac,
                  uint8_t* out) {
  size = std::clamp(size, minimumFrameSize(flow), kMaxFrame);
  const bool v4 = flow.key.family == IpFamily::kIpv4;
  const bool tcp = flow.key.protocol == kProtocolTcp;
  std::memcpy(out, destination_mac.bytes.data(), 6);
  std::memcpy(out + 6, source_mac.bytes.data(), 6);
  const uint16_t ether_type = rte_cpu_to_be_16(v4 ? RTE_ETHER_TYPE_IPV4 : RTE_ETHER_TYPE_IPV6);
  std::memcpy(out + 12, &ether_type, 2);
  uint8_t* l3 = out + kEthernet;
  const size_t l3_length = size - kEthernet;
  uint8_t* l4;
  if (v4) {
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(l3);
    std::memset(ip, 0, sizeof(*ip));
    ip->version_ihl = 0x45;
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(l3_length));
    ip->packet_id = rte_cpu_to_be_16(static_cast<uint16_t>(sequence));
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = flow.key.protocol;
    std::memcpy(&ip->src_addr, flow.key.source.data(), 4);
    std::memcpy(&ip->dst_addr, flow.key.destination.data(), 4);
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    l4 = l3 + 20;
  } else {
    auto* ip = reinterpret_cast<rte_ipv6_hdr*>(l3);
    ip->vtc_flow = rte_cpu_to_be_32(6u << 28 | (flow_index & 0xFFFFF));
    ip->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(l3_length - 40));
    ip->proto = flow.key.protocol;
    ip->hop_limits = 64;
    std::memcpy(ip->src_addr, flow.key.source.data(), 16);
    std::memcpy(ip->dst_addr, flow.key.destination.data(), 16);
    l4 = l3 + 40;
  }
  uint8_t* payload;
  if (tcp) {
    auto* header = reinterpret_cast<rte_tcp_hdr*>(l4);
    std::memset(header, 0, sizeof(*header));
    header->src_port = flow.key.source_port;
    header->dst_port = flow.key.destination_port;
    header->sent_seq = rte_cpu_to_be_32(sequence);
    header->recv_ack = rte_cpu_to_be_32(sequence == 0 ? 0 : 1);
    header->data_off = 5 << 4;
    header->tcp_flags = sequence == 0 ? RTE_TCP_SYN_FLAG : RTE_TCP_ACK_FLAG;
    header->rx_win = rte_cpu_to_be_16(65535);
    payload = l4 + 20;
  } else {
    auto* header = reinterpret_cast<rte_udp_hdr*>(l4);
    header->src_port = flow.key.source_port;
    header->dst_port = flow.key.destination_port;
    header->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(out + size - l4));
    header->dgram_cksum = 0;
    payload = l4 + 8;
    std::memcpy(payload, &sequence, 4);
  }
  std::memcpy(payload + stampOffset(flow), &tsc, kStampBytes);
  // The rest follows from the flow and the sequence, so the sink can check every byte.
  uint8_t* fill = payload + stampOffset(flow) + kStampBytes;
  const uint32_t seed = flow_index * 2654435761u + sequence;
  for (size_t i = 0; fill + i < out + size; ++i) fill[i] = static_cast<uint8_t>(seed + i);
  if (tcp) {
    auto* header = reinterpret_cast<rte_tcp_hdr*>(l4);
    header->cksum = v4 ? rte_ipv4_udptcp_cksum(reinterpret_cast<rte_ipv4_hdr*>(l3), header)
                       : rte_ipv6_udptcp_cksum(reinterpret_cast<rte_ipv6_hdr*>(l3), header);
  } else {
    auto* header = reinterpret_cast<rte_udp_hdr*>(l4);
    header->dgram_cksum = v4 ? rte_ipv4_udptcp_cksum(reinterpret_cast<rte_ipv4_hdr*>(l3), header)
                             : rte_ipv6_udptcp_cksum(reinterpret_cast<rte_ipv6_hdr*>(l3), header);
  }
  return size;
}

size_t buildMalformedFrame(uint64_t kind, uint64_t random, const MacAddress& source_mac,
                           const MacAddress& destination_mac, uint8_t* out) {
  GenFlow flow;
  flow.key =
      FlowKey::make(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1),
                    static_cast<uint16_t>(kFirstSourcePort + random % 1000), 80, kProtocolTcp);
  const size_t length = buildFrame(flow, 0, 1, random, 64, source_mac, destination_mac, out);
  switch (kind % 5) {
    case 0:  // an IPv4 header cut short
      return kEthernet + 12;
    case 1: {  // a total length past the end of the frame
      const uint16_t total = rte_cpu_to_be_16(1400);
      std::memcpy(out + kEthernet + 2, &total, 2);
      return length;
    }
    case 2:  // IP version 7
      out[kEthernet] = 0x75;
      return length;
    case 3: {  // a TCP header cut short: the total length says 28 bytes
      const uint16_t total = rte_cpu_to_be_16(28);
      std::memcpy(out + kEthernet + 2, &total, 2);
      return kEthernet + 28;
    }
    default: {  // noise behind an IPv4 EtherType
      uint64_t state = random | 1;
      for (size_t i = kEthernet; i < 64; ++i) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out[i] = static_cast<uint8_t>(state);
      }
      return 64;
    }
  }
}

namespace {

uint32_t hostWord(const uint8_t* bytes) {
  uint32_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return rte_be_to_cpu_32(word);
}

}  // namespace

uint32_t rssHashOf(const FlowKey& key) {
  // rte_softrss takes the tuple as host-order 32-bit words: addresses, then the source port in
  // the high half of the last word and the destination port in the low half.
  const size_t address_words = key.family == IpFamily::kIpv4 ? 1 : 4;
  uint32_t tuple[9];
  size_t words = 0;
  for (const auto* address : {&key.source, &key.destination}) {
    for (size_t w = 0; w < address_words; ++w) tuple[words++] = hostWord(address->data() + 4 * w);
  }
  if (key.protocol == kProtocolTcp || key.protocol == kProtocolUdp) {
    tuple[words++] = static_cast<uint32_t>(rte_be_to_cpu_16(key.source_port)) << 16 |
                     rte_be_to_cpu_16(key.destination_port);
  }
  return rte_softrss(tuple, static_cast<uint32_t>(words), kMicrosoftRssKey);
}

QueueSpread QueueSpread::standard(uint16_t queues) {
  QueueSpread spread;
  spread.key.assign(std::begin(kMicrosoftRssKey), std::end(kMicrosoftRssKey));
  for (uint16_t entry = 0; entry < 128; ++entry) {
    spread.table.push_back(static_cast<uint16_t>(entry % std::max<uint16_t>(queues, 1)));
  }
  return spread;
}

absl::StatusOr<QueueSpread> QueueSpread::parse(absl::string_view key, absl::string_view table,
                                               uint16_t queues) {
  QueueSpread spread = standard(queues);
  if (key == "symmetric") {
    spread.key = symmetricRssKey(40);
  } else if (!key.empty()) {
    spread.key = rssKeyFromHex(key);
    if (spread.key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rss-key '", key, "': expected symmetric, or 40 to 52 bytes in hex (colons optional)"));
    }
  }
  if (table.empty()) return spread;
  spread.table.clear();
  for (absl::string_view entry : absl::StrSplit(table, ',')) {
    uint32_t queue = 0;
    if (!absl::SimpleAtoi(entry, &queue) || queue >= queues) {
      return absl::InvalidArgumentError(absl::StrCat("--rss-table '", table, "': '", entry,
                                                     "' is not one of the ", queues,
                                                     " TX queue(s) (0 to ", queues - 1, ")"));
    }
    spread.table.push_back(static_cast<uint16_t>(queue));
  }
  const size_t size = spread.table.size();
  if ((size & (size - 1)) != 0 || size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rss-table '", table, "': ", size,
                     " entries; a redirection table has a power of two of them, 1 to 65536"));
  }
  return spread;
}

uint32_t QueueSpread::hashOf(const FlowKey& flow) const {
  // Addresses, then the ports of TCP and UDP, in network byte order (net/toeplitz.h).
  std::array<uint8_t, 36> input{};
  const size_t address = flow.family == IpFamily::kIpv4 ? 4 : 16;
  std::copy_n(flow.source.begin(), address, input.begin());
  std::copy_n(flow.destination.begin(), address, input.begin() + address);
  size_t length = 2 * address;
  if (flow.protocol == kProtocolTcp || flow.protocol == kProtocolUdp) {
    std::memcpy(input.data() + length, &flow.source_port, 2);
    std::memcpy(input.data() + length + 2, &flow.destination_port, 2);
    length += 4;
  }
  return toeplitzHash(key, absl::MakeConstSpan(input.data(), length));
}

std::vector<std::vector<uint32_t>> spreadOverQueues(const std::vector<GenFlow>& flows,
                                                    const QueueSpread& spread, uint16_t queues) {
  std::vector<std::vector<uint32_t>> spread_flows(std::max<uint16_t>(queues, 1));
  for (uint32_t f = 0; f < flows.size(); ++f) {
    spread_flows[spread.queueOf(flows[f].key)].push_back(f);
  }
  return spread_flows;
}

}  // namespace berth
