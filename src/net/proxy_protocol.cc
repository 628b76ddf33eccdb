#include "berth/net/proxy_protocol.h"

#include <cstring>

#include "berth/net/checksum.h"

namespace berth {
namespace {

constexpr uint8_t kSignature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr uint8_t kVersion2Proxy = 0x21;  // version 2 (high nibble), PROXY command (low)
constexpr uint8_t kVersion2Local = 0x20;
constexpr uint8_t kTcpOverIpv4 = 0x11;  // AF_INET (high nibble), STREAM (low)
constexpr uint8_t kTcpOverIpv6 = 0x21;
constexpr uint8_t kUnspecified = 0x00;

size_t writePrefix(uint8_t* out, uint8_t command, uint8_t family, uint16_t address_length) {
  std::memcpy(out, kSignature, sizeof(kSignature));
  out[12] = command;
  out[13] = family;
  storeBigEndian16(out + 14, address_length);
  return kProxyHeaderLocalLength;
}

}  // namespace

size_t encodeProxyHeader(const ProxyEndpoints& endpoints, uint8_t* out) {
  const bool v4 = endpoints.family == IpFamily::kIpv4;
  const size_t address_length = v4 ? 4 : 16;
  const size_t length = proxyHeaderLength(endpoints.family);
  uint8_t* at = out + writePrefix(out, kVersion2Proxy, v4 ? kTcpOverIpv4 : kTcpOverIpv6,
                                  static_cast<uint16_t>(length - kProxyHeaderLocalLength));
  std::memcpy(at, endpoints.source.data(), address_length);
  std::memcpy(at + address_length, endpoints.destination.data(), address_length);
  at += 2 * address_length;
  std::memcpy(at, &endpoints.source_port, 2);
  std::memcpy(at + 2, &endpoints.destination_port, 2);
  return length;
}

std::array<uint8_t, kProxyHeaderLocalLength> proxyLocalHeader() {
  std::array<uint8_t, kProxyHeaderLocalLength> header{};
  writePrefix(header.data(), kVersion2Local, kUnspecified, 0);
  return header;
}

}  // namespace berth
