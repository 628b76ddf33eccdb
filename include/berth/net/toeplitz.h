#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth {

// The Toeplitz hash that NICs compute for receive-side scaling (Microsoft's RSS specification,
// "RSS hashing function"): each set bit of the input, most significant first, XORs in the 32-bit
// window of the key that starts at that bit. The NIC then sends the packet to the queue its
// redirection table holds at the hash's low bits.
//
// The input of an IP packet is, in network byte order: source address | destination address,
// then, where the NIC hashes the L4 ports, source port | destination port. So a 12-byte input
// for TCP or UDP over IPv4, 36 over IPv6.
//
// The hash is linear over GF(2): the hash of a XOR b is the hash of a XOR the hash of b. That is
// what lets berth choose a Full-NAT local port whose reply the NIC brings to the choosing worker
// (docs/architecture.md, "Connection table"): the hash of a reply is the hash of its addresses and
// the backend's port, XOR the hash of the local port alone.
//
// Equal to DPDK's rte_softrss() (tests pin both), without the EAL, so the pure dataplane and its
// tests use it. `key` must hold at least input.size() + 4 bytes.
uint32_t toeplitzHash(absl::Span<const uint8_t> key, absl::Span<const uint8_t> input);

// The RSS key of the Microsoft specification's verification suite, and the default of many NICs
// (Intel's among them): 40 bytes.
inline constexpr uint8_t kMicrosoftRssKey[40] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// The symmetric key: 0x6d5a repeated to `length` bytes, which makes Toeplitz give a flow and its
// reverse the same hash (Woo and Park, 2012).
std::vector<uint8_t> symmetricRssKey(size_t length);

// A key written in hex, colons between its bytes optional: the 40 bytes most NICs take, or the
// 52 of Intel's 700 and 800 series. Empty when `text` is no such key.
std::vector<uint8_t> rssKeyFromHex(absl::string_view text);

}  // namespace berth
