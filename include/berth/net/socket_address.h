#pragma once

#include <sys/socket.h>

#include "berth/net/ip_address.h"

namespace berth {

// An endpoint as the socket calls take it (bind, connect, sendto): sockaddr_in or sockaddr_in6
// in `storage`, `length` bytes of it.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

SocketAddress socketAddressOf(const Endpoint& endpoint);

}  // namespace berth
