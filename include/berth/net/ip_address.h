#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

enum class IpFamily : uint8_t { kIpv4 = 4, kIpv6 = 6 };

// An IPv4 or IPv6 address in network byte order. IPv4 uses the first 4 bytes; the rest are zero,
// so two equal addresses compare and hash equal byte for byte.
struct IpAddress {
  IpFamily family = IpFamily::kIpv4;
  std::array<uint8_t, 16> bytes{};

  // Parses dotted-quad IPv4 or RFC 4291 text IPv6. Rejects anything else, including a prefix
  // length or a zone index, with InvalidArgument naming the text.
  static absl::StatusOr<IpAddress> parse(absl::string_view text);
  static IpAddress v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

  std::string toString() const;
  bool isV4() const { return family == IpFamily::kIpv4; }
  // 127.0.0.0/8 or ::1.
  bool isLoopback() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const IpAddress& address) {
    return H::combine(std::move(state), address.family, address.bytes);
  }
};

// An address and a port: "198.18.0.1:80" or "[2001:db8::1]:80".
struct Endpoint {
  IpAddress address;
  uint16_t port = 0;

  // InvalidArgument naming the text for anything but those two forms with a port in 0..65535.
  static absl::StatusOr<Endpoint> parse(absl::string_view text);
  std::string toString() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

}  // namespace berth
