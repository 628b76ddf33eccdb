#pragma once

#include <rte_mbuf.h>

#include "berth/dataplane/forwarding.h"

namespace berth {

// The adapter between DPDK's mbufs and the Frame view the forwarding code works on. Single-
// segment mbufs only: berth's RX mempools hold a whole frame per mbuf (jumbo frames included).

inline Frame frameOf(rte_mbuf* mbuf) {
  return Frame{rte_pktmbuf_mtod(mbuf, uint8_t*), rte_pktmbuf_data_len(mbuf),
               rte_pktmbuf_headroom(mbuf), rte_pktmbuf_tailroom(mbuf)};
}

// Makes the mbuf describe `frame`, which must lie in the mbuf's own buffer (as frameOf() and the
// rewrites leave it).
inline void applyFrame(rte_mbuf* mbuf, const Frame& frame) {
  mbuf->data_off = static_cast<uint16_t>(frame.data - static_cast<uint8_t*>(mbuf->buf_addr));
  mbuf->data_len = static_cast<uint16_t>(frame.length);
  mbuf->pkt_len = static_cast<uint32_t>(frame.length);
}

}  // namespace berth
