#include "berth/net/ip_address.h"

#include <arpa/inet.h>

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

}  // namespace berth
