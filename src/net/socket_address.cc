#include "berth/net/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace berth {

SocketAddress socketAddressOf(const Endpoint& endpoint) {
  SocketAddress address;
  if (endpoint.address.isV4()) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(endpoint.port);
    std::memcpy(&in->sin_addr, endpoint.address.bytes.data(), 4);
    address.length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(endpoint.port);
    std::memcpy(&in6->sin6_addr, endpoint.address.bytes.data(), 16);
    address.length = sizeof(sockaddr_in6);
  }
  return address;
}

}  // namespace berth
