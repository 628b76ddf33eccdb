#include "berth/gen/sink.h"

#include <rte_byteorder.h>
#include <rte_ip.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "berth/dataplane/snapshot.h"
#include "berth/gen/backend_reply.h"
#include "berth/net/flow_hash.h"

namespace berth {
namespace {

constexpr uint8_t kProtocolIpInIp = 4;
constexpr uint8_t kProtocolIpv6InIp = 41;
constexpr uint8_t kProtocolGre = 47;

uint16_t load16(const uint8_t* at) {
  uint16_t value;
  std::memcpy(&value, at, 2);
  return rte_be_to_cpu_16(value);
}

// What berthgen wrote into a flow's packet (buildFrame): its sequence number in the flow, in
// the TCP sequence number or the first UDP payload bytes, and the TSC it left at, right after.
struct Stamp {
  uint32_t sequence;
  uint64_t sent_tsc;
};
Stamp stampOf(const uint8_t* ip, size_t l4, bool tcp) {
  Stamp stamp;
  if (tcp) {
    std::memcpy(&stamp.sequence, ip + l4 + 4, 4);
    stamp.sequence = rte_be_to_cpu_32(stamp.sequence);
  } else {
    std::memcpy(&stamp.sequence, ip + l4 + 8, 4);
  }
  std::memcpy(&stamp.sent_tsc, ip + l4 + (tcp ? 20 : 12), kStampBytes);
  return stamp;
}

}  // namespace

BackendKey BackendKey::of(const IpAddress& address) {
  BackendKey key;
  key.kind = address.isV4() ? kIpv4 : kIpv6;
  key.bytes = address.bytes;
  return key;
}

BackendKey BackendKey::of(const MacAddress& mac) {
  BackendKey key;
  key.kind = kMac;
  std::copy(mac.bytes.begin(), mac.bytes.end(), key.bytes.begin());
  return key;
}

std::string BackendKey::toString() const {
  switch (kind) {
    case kIpv4:
    case kIpv6: {
      IpAddress address;
      address.family = kind == kIpv4 ? IpFamily::kIpv4 : IpFamily::kIpv6;
      address.bytes = bytes;
      return address.toString();
    }
    case kMac: {
      MacAddress mac;
      std::copy(bytes.begin(), bytes.begin() + 6, mac.bytes.begin());
      return mac.toString();
    }
    case kNone:
      break;
  }
  return "-";
}

absl::StatusOr<std::vector<BackendKey>> tableBackends(const Config& config,
                                                      const std::vector<GenFlow>& flows) {
  absl::StatusOr<std::vector<Table>> tables = buildServiceTables(config);
  if (!tables.ok()) return tables.status();
  std::vector<BackendKey> expected(flows.size());
  for (size_t f = 0; f < flows.size(); ++f) {
    const FlowKey& key = flows[f].key;
    for (size_t s = 0; s < config.services.size(); ++s) {
      const ServiceConfig& service = config.services[s];
      if (static_cast<uint8_t>(service.protocol) != key.protocol ||
          service.port != rte_be_to_cpu_16(key.destination_port) ||
          !std::equal(service.vip.bytes.begin(), service.vip.bytes.end(),
                      key.destination.begin())) {
        continue;
      }
      const uint16_t entry =
          (*tables)[s].lookup(flowHash(key, service.hash_fields, kDefaultFlowHashSeed));
      if (entry == kNoBackend) break;
      const std::string& name = (*tables)[s].backends()[entry].name;
      for (const BackendConfig& backend : service.backends) {
        if (backend.name != name) continue;
        if (service.forwarding != Forwarding::kL2Dsr) {
          expected[f] = BackendKey::of(backend.address);
        } else if (backend.mac) {
          expected[f] = BackendKey::of(*backend.mac);
        }
      }
      break;
    }
  }
  return expected;
}

size_t LatencyHistogram::bucketOf(uint64_t value) {
  if (value < 64) return value;
  const int exponent = 63 - std::countl_zero(value);  // 6 and up
  const uint64_t sub = (value >> (exponent - 5)) & 31;
  return 64 + static_cast<size_t>(exponent - 6) * 32 + sub;
}

uint64_t LatencyHistogram::upperOf(size_t bucket) {
  if (bucket < 64) return bucket;
  const size_t exponent = (bucket - 64) / 32 + 6;
  const uint64_t sub = (bucket - 64) % 32;
  return ((32 + sub + 1) << (exponent - 5)) - 1;
}

void LatencyHistogram::add(uint64_t nanoseconds) {
  ++buckets_[std::min(bucketOf(nanoseconds), kBuckets - 1)];
  ++count_;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

uint64_t LatencyHistogram::percentile(double quantile) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(quantile * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= std::max<uint64_t>(rank, 1)) return upperOf(i);
  }
  return upperOf(kBuckets - 1);
}

Sink::Sink(const std::vector<GenFlow>* flows, SourceNet source_v4, SourceNet source_v6,
           uint16_t gue_port, uint64_t tsc_hz)
    : flows_(flows),
      source_v4_(source_v4),
      source_v6_(source_v6),
      gue_port_(gue_port),
      ns_per_tsc_(1e9 / static_cast<double>(tsc_hz)),
      flows_state_(flows->size()),
      expected_(9100),
      reply_(9100) {
  given_up_.reserve(kMissingKept);
}

void Sink::keepMissing(uint32_t flow, uint32_t sequence) {
  if (given_up_.size() < kMissingKept) given_up_.push_back({flow, sequence});
}

void Sink::keepLeavingUnseen(uint32_t flow, const FlowState& state, uint32_t shift) {
  if (!state.any || given_up_.size() >= kMissingKept) return;
  // Window bit p is sequence highest - p; the top `shift` bits leave, and bits past sequence 0
  // were never a packet.
  uint64_t leaving = ~state.window;
  if (shift < 64) leaving &= ~uint64_t{0} << (64 - shift);
  if (state.highest < 63) leaving &= (uint64_t{2} << state.highest) - 1;
  for (; leaving != 0; leaving &= leaving - 1) {
    keepMissing(flow, state.highest - static_cast<uint32_t>(std::countr_zero(leaving)));
  }
  // A jump past the whole window: the sequences it skipped never entered one.
  for (uint64_t skipped = uint64_t{state.highest} + 1;
       skipped + 64 <= uint64_t{state.highest} + shift && given_up_.size() < kMissingKept;
       ++skipped) {
    keepMissing(flow, static_cast<uint32_t>(skipped));
  }
}

std::vector<MissingPacket> Sink::missing(const std::vector<uint64_t>& sent) const {
  std::vector<MissingPacket> missing = given_up_;
  for (size_t f = 0; f < flows_state_.size() && f < sent.size(); ++f) {
    const FlowState& state = flows_state_[f];
    const auto flow = static_cast<uint32_t>(f);
    uint64_t next = 0;  // the first sequence above the window
    if (state.any) {
      for (uint32_t p = std::min<uint32_t>(63, state.highest); p > 0; --p) {
        if (((state.window >> p) & 1) == 0) missing.push_back({flow, state.highest - p});
      }
      next = uint64_t{state.highest} + 1;
    }
    for (; next < sent[f] && missing.size() < kMissingKept; ++next) {
      missing.push_back({flow, static_cast<uint32_t>(next)});
    }
    if (missing.size() >= kMissingKept) break;
  }
  if (missing.size() > kMissingKept) missing.resize(kMissingKept);
  return missing;
}

int32_t Sink::backendIndex(const BackendKey& backend) {
  auto [it, inserted] = backend_index_.try_emplace(backend, static_cast<int32_t>(backends_.size()));
  if (inserted) {
    backends_.push_back(backend);
    backend_packets_.push_back(0);
  }
  return it->second;
}

void Sink::receive(const uint8_t* frame, size_t length, uint64_t now_tsc) {
  ++totals_.frames;
  size_t l3 = 14;
  if (length < l3) {
    ++totals_.foreign;
    return;
  }
  uint16_t ether_type = load16(frame + 12);
  if (ether_type == kEtherTypeVlan && length >= 18) {
    ether_type = load16(frame + 16);
    l3 = 18;
  }
  MacAddress destination;
  std::copy(frame, frame + 6, destination.bytes.begin());
  const uint8_t* ip = frame + l3;
  const size_t ip_length = length - l3;
  uint8_t protocol;
  size_t header;
  IpAddress outer;
  if (ether_type == kEtherTypeIpv4 && ip_length >= 20 && (ip[0] >> 4) == 4) {
    header = (ip[0] & 0x0f) * 4u;
    protocol = ip[9];
    outer.family = IpFamily::kIpv4;
    std::copy(ip + 16, ip + 20, outer.bytes.begin());
  } else if (ether_type == kEtherTypeIpv6 && ip_length >= 40 && (ip[0] >> 4) == 6) {
    header = 40;
    protocol = ip[6];
    outer.family = IpFamily::kIpv6;
    std::copy(ip + 24, ip + 40, outer.bytes.begin());
  } else {
    ++totals_.foreign;
    return;
  }
  if (header > ip_length) {
    ++totals_.foreign;
    return;
  }
  if (protocol == kProtocolIpInIp || protocol == kProtocolIpv6InIp) {
    check(ip + header, ip_length - header, BackendKey::of(outer), now_tsc);
  } else if (protocol == kProtocolGre && ip_length >= header + 4) {
    check(ip + header + 4, ip_length - header - 4, BackendKey::of(outer), now_tsc);
  } else if (protocol == kProtocolUdp && gue_port_ != 0 && ip_length >= header + 8 &&
             load16(ip + header + 2) == gue_port_) {
    check(ip + header + 8, ip_length - header - 8, BackendKey::of(outer), now_tsc);
  } else {
    // l2dsr: the client's packet itself, sent to the backend's MAC.
    check(ip, ip_length, BackendKey::of(destination), now_tsc);
  }
}

void Sink::check(const uint8_t* ip, size_t length, const BackendKey& backend, uint64_t now_tsc) {
  // The inner packet's flow, from its headers.
  FlowKey key;
  size_t l4;
  if (length >= 20 && (ip[0] >> 4) == 4) {
    key.family = IpFamily::kIpv4;
    std::copy(ip + 12, ip + 16, key.source.begin());
    std::copy(ip + 16, ip + 20, key.destination.begin());
    key.protocol = ip[9];
    l4 = (ip[0] & 0x0f) * 4u;
    length = std::min<size_t>(length, load16(ip + 2));  // the outer frame may carry padding
  } else if (length >= 40 && (ip[0] >> 4) == 6) {
    key.family = IpFamily::kIpv6;
    std::copy(ip + 8, ip + 24, key.source.begin());
    std::copy(ip + 24, ip + 40, key.destination.begin());
    key.protocol = ip[6];
    l4 = 40;
    length = std::min<size_t>(length, 40u + load16(ip + 4));
  } else {
    ++totals_.foreign;
    return;
  }
  // berthd's answer for a packet that would exceed the MTU once encapsulated.
  if (length >= l4 + 2 && ((key.protocol == kProtocolIcmp && ip[l4] == 3 && ip[l4 + 1] == 4) ||
                           (key.protocol == kProtocolIcmpv6 && ip[l4] == 2))) {
    ++totals_.too_big;
    return;
  }
  const bool tcp = key.protocol == kProtocolTcp;
  const size_t stamp_at = l4 + (tcp ? 20 : 12);
  if ((!tcp && key.protocol != kProtocolUdp) || length < stamp_at + kStampBytes) {
    ++totals_.foreign;
    return;
  }
  std::memcpy(&key.source_port, ip + l4, 2);
  std::memcpy(&key.destination_port, ip + l4 + 2, 2);
  const SourceNet& source = key.family == IpFamily::kIpv4 ? source_v4_ : source_v6_;
  const int64_t index = flowIndexOf(key, source, *flows_);
  if (index < 0) {
    FlowKey reversed = key;
    std::swap(reversed.source, reversed.destination);
    std::swap(reversed.source_port, reversed.destination_port);
    if (const int64_t replied = flowIndexOf(reversed, source, *flows_); replied >= 0) {
      checkReply(ip, length, l4, static_cast<uint32_t>(replied), now_tsc);
      return;
    }
    ++(tcp && rte_be_to_cpu_16(key.source_port) < kFirstSourcePort ? totals_.flood
                                                                   : totals_.foreign);
    return;
  }
  const auto [sequence, sent_tsc] = stampOf(ip, l4, tcp);

  // The frame as berthgen built it; the inner packet must equal its IP part byte for byte.
  const GenFlow& flow = (*flows_)[static_cast<size_t>(index)];
  const size_t frame_length = 14 + length;
  if (frame_length > expected_.size() || frame_length < minimumFrameSize(flow) ||
      buildFrame(flow, static_cast<uint32_t>(index), sequence, sent_tsc, frame_length, MacAddress{},
                 MacAddress{}, expected_.data()) != frame_length ||
      std::memcmp(expected_.data() + 14, ip, length) != 0) {
    ++totals_.corrupt;
    return;
  }
  record(static_cast<uint32_t>(index), sequence, sent_tsc, backend, now_tsc);
}

void Sink::record(uint32_t flow, uint32_t sequence, uint64_t sent_tsc, const BackendKey& backend,
                  uint64_t now_tsc) {
  ++totals_.verified;
  if (now_tsc >= sent_tsc) {
    latency_.add(static_cast<uint64_t>(static_cast<double>(now_tsc - sent_tsc) * ns_per_tsc_));
  }
  const int32_t backend_index = backendIndex(backend);
  ++backend_packets_[static_cast<size_t>(backend_index)];
  FlowState& state = flows_state_[flow];
  if (state.backend < 0) {
    state.backend = backend_index;
  } else if (state.backend != backend_index) {
    state.moved = true;
  }
  recordSequence(flow, state, sequence);
}

void Sink::checkReply(const uint8_t* ip, size_t length, size_t l4, uint32_t flow_index,
                      uint64_t now_tsc) {
  // What the backend sent back (backend_reply.h): the request's payload, then its address.
  const GenFlow& flow = (*flows_)[flow_index];
  const bool tcp = flow.key.protocol == kProtocolTcp;
  const size_t payload_at = l4 + (tcp ? (ip[l4 + 12] >> 4) * 4u : 8);
  const size_t stamp_at = l4 + (tcp ? 20 : 12);
  if (length < stamp_at + kStampBytes + kReplyBackendBytes || payload_at != l4 + (tcp ? 20 : 8)) {
    ++totals_.corrupt;
    return;
  }
  const size_t request_length = length - kReplyBackendBytes;
  const auto [sequence, sent_tsc] = stampOf(ip, l4, tcp);
  // Every checksum as berthd left it must hold, and the payload must be the request's.
  std::memcpy(reply_.data(), ip, length);
  bool intact;
  if (flow.key.family == IpFamily::kIpv4) {
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(reply_.data());
    const uint16_t ip_checksum = header->hdr_checksum;
    header->hdr_checksum = 0;
    intact = rte_ipv4_cksum(header) == ip_checksum;
    header->hdr_checksum = ip_checksum;
    uint8_t* checksum = reply_.data() + l4 + (tcp ? 16 : 6);
    uint16_t l4_checksum;
    std::memcpy(&l4_checksum, checksum, 2);
    std::memset(checksum, 0, 2);
    intact = intact && rte_ipv4_udptcp_cksum(header, reply_.data() + l4) == l4_checksum;
  } else {
    auto* header = reinterpret_cast<rte_ipv6_hdr*>(reply_.data());
    uint8_t* checksum = reply_.data() + l4 + (tcp ? 16 : 6);
    uint16_t l4_checksum;
    std::memcpy(&l4_checksum, checksum, 2);
    std::memset(checksum, 0, 2);
    intact = rte_ipv6_udptcp_cksum(header, reply_.data() + l4) == l4_checksum;
  }
  const size_t frame_length = 14 + request_length;
  if (!intact || frame_length > expected_.size() || frame_length < minimumFrameSize(flow) ||
      buildFrame(flow, flow_index, sequence, sent_tsc, frame_length, MacAddress{}, MacAddress{},
                 expected_.data()) != frame_length ||
      std::memcmp(expected_.data() + 14 + payload_at, ip + payload_at,
                  request_length - payload_at) != 0) {
    ++totals_.corrupt;
    return;
  }
  IpAddress backend;
  backend.family = flow.key.family;
  std::memcpy(backend.bytes.data(), ip + request_length,
              flow.key.family == IpFamily::kIpv4 ? 4 : 16);
  record(flow_index, sequence, sent_tsc, BackendKey::of(backend), now_tsc);
}

void Sink::recordSequence(uint32_t flow, FlowState& state, uint32_t sequence) {
  if (!state.any || sequence > state.highest) {
    const uint32_t shift = state.any ? sequence - state.highest : 64;
    keepLeavingUnseen(flow, state, shift);
    state.window = shift >= 64 ? 0 : state.window << shift;
    state.window |= 1;
    state.highest = sequence;
    state.any = true;
    ++state.received;
    return;
  }
  const uint32_t behind = state.highest - sequence;
  if (behind < 64 && (state.window >> behind) & 1) {
    ++totals_.duplicates;
    return;
  }
  if (behind < 64) {
    state.window |= uint64_t{1} << behind;
  } else {
    // Given up for lost when the window passed it, it came after all (rare: a linear search).
    const auto late = std::find(given_up_.begin(), given_up_.end(), MissingPacket{flow, sequence});
    if (late != given_up_.end()) given_up_.erase(late);
  }
  ++totals_.reordered;
  ++state.received;
}

}  // namespace berth
