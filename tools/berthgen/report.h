#pragma once

// berthgen's books and report: what was sent, what came back and where, printed, and written as
// JSON (--json) and per-flow backends (--flow-backends).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "run.h"

namespace berth {

// Consecutive packets of one TX queue that never came back: packet `first` to first + packets - 1
// in the order that queue's sender sent them.
struct LostRun {
  uint16_t queue = 0;
  uint64_t first = 0;
  uint64_t packets = 0;
  double seconds = -1;  // when the first was due, from --rate; -1 when sent as fast as possible
};

// The books of a run. Each sender went round its own flows, so each flow's packets follow from
// its queue's count and its place on that queue.
struct Books {
  uint64_t sent_packets = 0;
  uint64_t sent_malformed = 0;
  uint64_t sent_flood = 0;
  bool stalled = false;
  uint64_t lost = 0;
  double loss_percent = 0;
  // Where the loss fell, from the sink's missing packets (at most Sink::kMissingKept of them).
  std::vector<LostRun> lost_runs;
  uint64_t lost_placed = 0;  // how many of `lost` the runs hold
  uint64_t flows_moved = 0;
  uint64_t flows_unseen = 0;
  std::vector<uint64_t> backend_flows;  // per backend the sink saw
  uint64_t table_match = 0;
  uint64_t table_differ = 0;
  uint64_t table_unknown = 0;
  double tx_seconds = 0;
  double tx_mpps = 0;
  double rx_mpps = 0;
};

absl::StatusOr<Books> keepBooks(const Plan& plan, const Run& run);
void printReport(const Plan& plan, const Run& run, const Books& books);
absl::Status writeJson(const Plan& plan, const Run& run, const Books& books);
absl::Status writeFlowBackends(const Plan& plan, const Run& run);

}  // namespace berth
