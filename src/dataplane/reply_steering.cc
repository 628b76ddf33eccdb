#include "berth/dataplane/reply_steering.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "berth/net/flow_key.h"
#include "berth/net/toeplitz.h"

namespace berth {
namespace {

constexpr size_t kIpv4Input = 12;  // source, destination, source port, destination port
constexpr size_t kIpv6Input = 36;

// The Toeplitz input of a reply, the local port zero where `local_port` is not given.
size_t replyInput(const IpAddress& backend, uint16_t backend_port, const IpAddress& local,
                  uint16_t local_port, bool ports, std::array<uint8_t, kIpv6Input>& input) {
  const size_t address = backend.isV4() ? 4 : 16;
  std::copy_n(backend.bytes.begin(), address, input.begin());
  std::copy_n(local.bytes.begin(), address, input.begin() + address);
  if (!ports) return 2 * address;
  input[2 * address] = static_cast<uint8_t>(backend_port >> 8);
  input[2 * address + 1] = static_cast<uint8_t>(backend_port);
  input[2 * address + 2] = static_cast<uint8_t>(local_port >> 8);
  input[2 * address + 3] = static_cast<uint8_t>(local_port);
  return 2 * address + 4;
}

}  // namespace

absl::StatusOr<ReplySteering> ReplySteering::build(const RssSpread& spread, uint16_t first_port,
                                                   uint16_t last_port) {
  if (first_port == 0 || last_port < first_port) {
    return absl::InvalidArgumentError(
        absl::StrCat("local port range ", first_port, "-", last_port, " is empty or holds 0"));
  }
  return make(spread, first_port, last_port);
}

absl::StatusOr<ReplySteering> ReplySteering::withoutLocalPorts(const RssSpread& spread) {
  // 1 to 0: a range of no port (rangeSize() is 0), so no class is computed.
  return make(spread, 1, 0);
}

uint16_t ReplySteering::queueOfFlow(const FlowKey& flow) const {
  if (spread_.key.empty()) return reta_[0];
  std::array<uint8_t, kIpv6Input> input{};
  const size_t address = flow.family == IpFamily::kIpv4 ? 4 : 16;
  std::copy_n(flow.source.begin(), address, input.begin());
  std::copy_n(flow.destination.begin(), address, input.begin() + address);
  size_t length = 2 * address;
  if (hashesPorts(flow.family, flow.protocol)) {
    std::memcpy(input.data() + length, &flow.source_port, 2);  // network byte order, as sent
    std::memcpy(input.data() + length + 2, &flow.destination_port, 2);
    length += 4;
  }
  return reta_[toeplitzHash(spread_.key, absl::MakeConstSpan(input.data(), length)) & mask_];
}

absl::StatusOr<ReplySteering> ReplySteering::make(const RssSpread& spread, uint16_t first_port,
                                                  uint16_t last_port) {
  ReplySteering steering;
  steering.spread_ = spread;
  steering.first_port_ = first_port;
  steering.last_port_ = last_port;
  if (spread.key.empty()) {
    // No RSS: one queue takes everything.
    steering.reta_ = {0};
    steering.spread_.tcp4_ports = steering.spread_.udp4_ports = false;
    steering.spread_.tcp6_ports = steering.spread_.udp6_ports = false;
  } else {
    if (spread.key.size() < kIpv6Input + 4) {
      return absl::InvalidArgumentError(absl::StrCat("RSS key of ", spread.key.size(),
                                                     " bytes: at least 40 are needed for IPv6"));
    }
    const size_t entries = spread.reta.size();
    if (entries == 0 || (entries & (entries - 1)) != 0 || entries > 65536) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RSS redirection table of ", entries, " entries: a power of two up to 65536 is needed"));
    }
    steering.reta_ = spread.reta;
  }
  steering.mask_ = static_cast<uint32_t>(steering.reta_.size() - 1);
  const uint32_t range = steering.rangeSize();
  steering.classes_v4_.resize(range);
  steering.classes_v6_.resize(range);
  steering.class_counts_v4_.assign(steering.reta_.size(), 0);
  steering.class_counts_v6_.assign(steering.reta_.size(), 0);
  if (spread.key.empty()) {
    steering.class_counts_v4_[0] = steering.class_counts_v6_[0] = range;
    return steering;
  }
  // The hash of the port alone: every other input byte zero.
  std::array<uint8_t, kIpv6Input> input{};
  for (uint32_t i = 0; i < range; ++i) {
    const auto port = static_cast<uint16_t>(first_port + i);
    input[10] = static_cast<uint8_t>(port >> 8);
    input[11] = static_cast<uint8_t>(port);
    const auto v4 = static_cast<uint16_t>(
        toeplitzHash(spread.key, absl::MakeConstSpan(input.data(), kIpv4Input)) & steering.mask_);
    input[10] = input[11] = 0;
    input[34] = static_cast<uint8_t>(port >> 8);
    input[35] = static_cast<uint8_t>(port);
    const auto v6 = static_cast<uint16_t>(toeplitzHash(spread.key, input) & steering.mask_);
    input[34] = input[35] = 0;
    steering.classes_v4_[i] = v4;
    steering.classes_v6_[i] = v6;
    ++steering.class_counts_v4_[v4];
    ++steering.class_counts_v6_[v6];
  }
  return steering;
}

bool ReplySteering::hashesPorts(IpFamily family, uint8_t protocol) const {
  if (protocol == kProtocolTcp) {
    return family == IpFamily::kIpv4 ? spread_.tcp4_ports : spread_.tcp6_ports;
  }
  if (protocol == kProtocolUdp) {
    return family == IpFamily::kIpv4 ? spread_.udp4_ports : spread_.udp6_ports;
  }
  return false;
}

uint32_t ReplySteering::baseOf(const IpAddress& backend, uint16_t backend_port,
                               const IpAddress& local, uint8_t protocol) const {
  if (spread_.key.empty()) return 0;
  std::array<uint8_t, kIpv6Input> input{};
  const size_t length =
      replyInput(backend, backend_port, local, 0, hashesPorts(backend.family, protocol), input);
  return toeplitzHash(spread_.key, absl::MakeConstSpan(input.data(), length));
}

uint16_t ReplySteering::nextPortFor(uint32_t base, uint16_t queue, IpFamily family,
                                    uint8_t protocol, uint16_t from, uint32_t limit) const {
  const uint32_t range = rangeSize();
  uint32_t offset = from >= first_port_ && from <= last_port_ ? from - first_port_ : 0;
  if (!hashesPorts(family, protocol)) {
    return reta_[base & mask_] == queue ? static_cast<uint16_t>(first_port_ + offset) : 0;
  }
  const std::vector<uint16_t>& classes = family == IpFamily::kIpv4 ? classes_v4_ : classes_v6_;
  for (uint32_t looked = 0; looked < limit && looked < range; ++looked) {
    if (reta_[(base ^ classes[offset]) & mask_] == queue) {
      return static_cast<uint16_t>(first_port_ + offset);
    }
    if (++offset == range) offset = 0;
  }
  return 0;
}

uint32_t ReplySteering::shareOf(uint32_t base, uint16_t queue, IpFamily family,
                                uint8_t protocol) const {
  if (!hashesPorts(family, protocol)) return reta_[base & mask_] == queue ? rangeSize() : 0;
  const std::vector<uint32_t>& counts =
      family == IpFamily::kIpv4 ? class_counts_v4_ : class_counts_v6_;
  uint32_t share = 0;
  for (uint32_t index = 0; index <= mask_; ++index) {
    if (reta_[index] == queue) share += counts[(base ^ index) & mask_];
  }
  return share;
}

}  // namespace berth
