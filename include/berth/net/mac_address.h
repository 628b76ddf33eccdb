#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// An Ethernet MAC address, in wire order.
struct MacAddress {
  std::array<uint8_t, 6> bytes{};

  // Parses six colon-separated hex octets ("02:00:5e:10:00:01"); anything else is
  // InvalidArgument naming the text.
  static absl::StatusOr<MacAddress> parse(absl::string_view text);

  std::string toString() const;  // lower-case, colon-separated
  bool isMulticast() const { return (bytes[0] & 1) != 0; }

  friend bool operator==(const MacAddress&, const MacAddress&) = default;
};

}  // namespace berth
