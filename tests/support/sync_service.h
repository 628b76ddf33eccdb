#pragma once

#include <cstdint>

#include "berth/config/loader.h"
#include "berth/dataplane/snapshot.h"
#include "berth/sync/peer_flow_store.h"

namespace berth {

// The config flow sync's tests share: a TCP service "web" of two backends, web-1 and web-2, and
// an IPv6 UDP service "dns6" of one, dns-1, with the ids an instance gave them and the wire's
// names of them.
struct SyncService {
  SyncService() {
    config = *parseConfig(R"(
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: web-1, address: 198.18.1.1 }
      - { name: web-2, address: 198.18.1.2 }
  - name: dns6
    vip: "2001:db8::53"
    port: 53
    protocol: udp
    backends:
      - { name: dns-1, address: "2001:db8::1" }
)",
                          "sync_service");
    web = static_cast<uint16_t>(*ids.service("web"));
    web_1 = static_cast<uint16_t>(*ids.backend("web", "web-1"));
    web_2 = static_cast<uint16_t>(*ids.backend("web", "web-2"));
    dns6 = static_cast<uint16_t>(*ids.service("dns6"));
    dns_1 = static_cast<uint16_t>(*ids.backend("dns6", "dns-1"));
    names = FlowRecordNames::of(ids, config);
  }

  Config config;
  CounterIds ids;
  uint16_t web = 0;
  uint16_t web_1 = 0;
  uint16_t web_2 = 0;
  uint16_t dns6 = 0;
  uint16_t dns_1 = 0;
  FlowRecordNames names;
};

}  // namespace berth
