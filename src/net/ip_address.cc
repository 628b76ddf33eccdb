#include "berth/net/ip_address.h"

#include <arpa/inet.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::StatusOr<IpAddress> IpAddress::parse(absl::string_view text) {
  // inet_pton needs a terminated string; no valid address is longer than INET6_ADDRSTRLEN.
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv4 or IPv6 address"));
  }
  char buffer[INET6_ADDRSTRLEN] = {};
  text.copy(buffer, text.size());
  IpAddress address;
  if (inet_pton(AF_INET, buffer, address.bytes.data()) == 1) {
    address.family = IpFamily::kIpv4;
    return address;
  }
  if (inet_pton(AF_INET6, buffer, address.bytes.data()) == 1) {
    address.family = IpFamily::kIpv6;
    return address;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv4 or IPv6 address"));
}

IpAddress IpAddress::v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress address;
  address.bytes[0] = a;
  address.bytes[1] = b;
  address.bytes[2] = c;
  address.bytes[3] = d;
  return address;
}

std::string IpAddress::toString() const {
  char buffer[INET6_ADDRSTRLEN] = {};
  inet_ntop(isV4() ? AF_INET : AF_INET6, bytes.data(), buffer, sizeof(buffer));
  return buffer;
}

bool IpAddress::isLoopback() const {
  if (isV4()) return bytes[0] == 127;
  static constexpr std::array<uint8_t, 16> kIpv6Loopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                            0, 0, 0, 0, 0, 0, 0, 1};
  return bytes == kIpv6Loopback;
}

absl::StatusOr<Endpoint> Endpoint::parse(absl::string_view text) {
  auto invalid = [&]() {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not an ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)"));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return invalid();
  absl::string_view host = text.substr(0, colon);
  const absl::string_view port_text = text.substr(colon + 1);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return invalid();
  }
  absl::StatusOr<IpAddress> address = IpAddress::parse(host);
  // IPv6 needs its brackets, or "::1:80" would be ambiguous; IPv4 must not have them.
  if (!address.ok() || address->isV4() == bracketed) return invalid();
  return Endpoint{*address, static_cast<uint16_t>(port)};
}

std::string Endpoint::toString() const {
  return address.isV4() ? absl::StrCat(address.toString(), ":", port)
                        : absl::StrCat("[", address.toString(), "]:", port);
}

}  // namespace berth
