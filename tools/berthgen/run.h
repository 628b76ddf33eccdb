#pragma once

// What one berthgen run is: its plan before the EAL starts, and its loops once they ran.

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <memory>
#include <optional>
#include <vector>

#include "berth/config/config.h"
#include "berth/gen/sink.h"
#include "berth/gen/traffic.h"
#include "loops.h"
#include "options.h"

namespace berth {

// What a run is, before the EAL starts: the options, the config the flows are checked against,
// the flows and each TX queue's share of them.
struct Plan {
  GenOptions options;
  std::optional<Config> config;
  std::vector<GenFlow> flows;
  std::vector<std::vector<uint32_t>> queue_flows;  // per TX queue, by RSS hash
};

// The senders, the receiver and what they counted, once the run is over.
struct Run {
  uint64_t hz = 0;
  std::unique_ptr<PcapWriter> pcap;
  std::unique_ptr<Sink> sink;
  std::vector<std::unique_ptr<Sender>> senders;
  Receiver receiver;
  std::vector<rte_ring*> reply_rings;  // --reflect: each sender's

  Run() = default;
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  // Once the loops are done: the replies left unsent, and their rings.
  ~Run() {
    for (rte_ring* ring : reply_rings) {
      void* mbuf;
      while (rte_ring_sc_dequeue(ring, &mbuf) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(mbuf));
      rte_ring_free(ring);
    }
  }
};

}  // namespace berth
