#pragma once

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "berth/dataplane/frame.h"

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
  if (frame.tx_checksums != 0) [[unlikely]] {
    uint64_t flags =
        frame.l3_length == sizeof(rte_ipv4_hdr) ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6;
    if (frame.tx_checksums & kChecksumOffloadIpv4Header) flags |= RTE_MBUF_F_TX_IP_CKSUM;
    if (frame.tx_checksums & kChecksumOffloadUdp) flags |= RTE_MBUF_F_TX_UDP_CKSUM;
    mbuf->ol_flags |= flags;
    mbuf->l2_len = frame.l2_length;
    mbuf->l3_len = frame.l3_length;
    mbuf->l4_len = (frame.tx_checksums & kChecksumOffloadUdp) ? sizeof(rte_udp_hdr) : 0;
  }
}

}  // namespace berth
