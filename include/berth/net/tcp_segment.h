#pragma once

#include <cstdint>
#include <utility>

#include "absl/strings/string_view.h"
#include "berth/net/ip_address.h"

namespace berth {

// A TCP connection as one end sees it: its own address and port, and the peer's. Host-order
// ports.
struct TcpEndpoints {
  IpAddress local;
  uint16_t local_port = 0;
  IpAddress remote;
  uint16_t remote_port = 0;

  friend bool operator==(const TcpEndpoints&, const TcpEndpoints&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const TcpEndpoints& endpoints) {
    return H::combine(std::move(state), endpoints.local, endpoints.local_port, endpoints.remote,
                      endpoints.remote_port);
  }
};

// One TCP segment's header fields that a conversation follows (packet_parser.h's kTcp* flags),
// and its payload, which points into a buffer the segment does not own.
struct TcpSegment {
  uint8_t flags = 0;
  uint32_t sequence = 0;
  uint32_t acknowledgement = 0;
  absl::string_view payload;
};

}  // namespace berth
