#pragma once

#include <cstddef>
#include <cstdint>

namespace berth {

// A packet as the forwarding modes (forwarding.h) and the pipeline see it: its bytes with room
// in front and behind, an mbuf's in the datapath (runtime/mbuf_frame.h) and a plain buffer in
// tests.
struct Frame {
  uint8_t* data = nullptr;  // first byte of the Ethernet header
  size_t length = 0;
  size_t headroom = 0;  // bytes writable in front of data
  size_t tailroom = 0;  // bytes writable after data + length
  // Set by the pipeline (pipeline.h): the snapshot port the frame is for, chosen by its VLAN
  // among the ports of the device it came in on; for a forwarded frame, the egress port it
  // leaves through.
  uint32_t port = 0;
  // Set with Verdict::kHandOff (pipeline.h): the receive queue, and so the worker, that holds
  // the session the frame belongs to. A byte, so that a Frame stays 40 bytes: worker w polls
  // queue w, and DPDK's lcores (RTE_MAX_LCORE, 128 in Debian's build) bound the workers.
  uint8_t owner_queue = 0;
  // Set by an encapsulating mode when the egress port's NIC fills in outer checksums
  // (kChecksumOffload* bits): what the NIC must fill, and the outer Ethernet and IP header
  // lengths it needs to find them. 0: every checksum is written.
  uint8_t tx_checksums = 0;
  uint8_t l2_length = 0;
  uint8_t l3_length = 0;
};

// Outer checksums a port's NIC fills in, chosen once at port start (docs/nics.md): the IPv4
// header's, and the UDP checksum of GUE over IPv6 (over IPv4, GUE sends 0). The frame then carries
// a 0 or the pseudo-header sum there, as NICs with these offloads take it.
inline constexpr uint8_t kChecksumOffloadIpv4Header = 1;
inline constexpr uint8_t kChecksumOffloadUdp = 2;

}  // namespace berth
