#include "report.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/config/loader.h"
#include "berth/dataplane/counters.h"
#include "berth/gen/sink.h"
#include "berth/runtime/port.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/command_line.h"
#include "berth/util/heap.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"
#include "options.h"

namespace berth {
namespace {

// Packets of the f-th of `flows` flows when n flow packets went out round-robin over them.
uint64_t sentOfFlow(uint64_t n, size_t flows, size_t f) {
  return n / flows + (f < n % flows ? 1 : 0);
}

// Each missing packet put back in its queue's order (packet n of a queue is flow mine[n % size]'s
// number n / size), and consecutive ones joined.
std::vector<LostRun> lostRuns(const Plan& plan, const Run& run,
                              const std::vector<MissingPacket>& missing) {
  std::vector<std::pair<uint16_t, uint32_t>> place(plan.flows.size());  // queue, index on it
  for (uint16_t q = 0; q < plan.queue_flows.size(); ++q) {
    const std::vector<uint32_t>& mine = plan.queue_flows[q];
    for (uint32_t i = 0; i < mine.size(); ++i) place[mine[i]] = {q, i};
  }
  std::vector<std::pair<uint16_t, uint64_t>> packets;
  packets.reserve(missing.size());
  for (const MissingPacket& packet : missing) {
    const auto [queue, index] = place[packet.flow];
    packets.emplace_back(queue, uint64_t{packet.sequence} * plan.queue_flows[queue].size() + index);
  }
  std::sort(packets.begin(), packets.end());
  std::vector<LostRun> runs;
  for (const auto& [queue, n] : packets) {
    if (!runs.empty() && runs.back().queue == queue &&
        runs.back().first + runs.back().packets == n) {
      ++runs.back().packets;
      continue;
    }
    const double rate = run.senders[queue]->rate;
    runs.push_back({queue, n, 1, rate > 0 ? static_cast<double>(n) / rate : -1});
  }
  return runs;
}

// Seconds from the run's start to `tsc`.
double secondsInto(const Run& run, uint64_t start_tsc, uint64_t tsc) {
  return tsc > start_tsc ? static_cast<double>(tsc - start_tsc) / static_cast<double>(run.hz) : 0;
}

double microseconds(const Run& run, uint64_t tsc) {
  return static_cast<double>(tsc) * 1e6 / static_cast<double>(run.hz);
}

uint64_t startTsc(const Run& run) {
  uint64_t start = UINT64_MAX;
  for (const auto& sender : run.senders) {
    if (sender->start_tsc != 0) start = std::min(start, sender->start_tsc);
  }
  return start == UINT64_MAX ? 0 : start;
}

}  // namespace

absl::StatusOr<Books> keepBooks(const Plan& plan, const Run& run) {
  const std::vector<GenFlow>& flows = plan.flows;
  const Sink& sink = *run.sink;
  Books books;
  std::vector<uint64_t> flow_sent(flows.size(), 0);
  uint64_t sent_flow_packets = 0;
  uint64_t start_tsc = UINT64_MAX;
  uint64_t stop_tsc = 0;
  for (uint16_t q = 0; q < plan.options.tx_queues; ++q) {
    const Sender& sender = *run.senders[q];
    const std::vector<uint32_t>& mine = plan.queue_flows[q];
    for (size_t i = 0; i < mine.size(); ++i) {
      flow_sent[mine[i]] = sentOfFlow(sender.flow_packets, mine.size(), i);
    }
    sent_flow_packets += sender.flow_packets;
    books.sent_packets += sender.packets.read();
    books.sent_malformed += sender.malformed.read();
    books.sent_flood += sender.flood.read();
    books.stalled = books.stalled || sender.stalled;
    if (mine.empty()) continue;
    start_tsc = std::min(start_tsc, sender.start_tsc);
    stop_tsc = std::max(stop_tsc, sender.stop_tsc);
  }
  for (size_t f = 0; f < flows.size(); ++f) {
    const uint64_t expected = flow_sent[f];
    const uint64_t got = sink.flowReceived(f);
    if (expected > got) books.lost += expected - got;
    if (sink.flowMoved(f)) ++books.flows_moved;
    if (expected > 0 && sink.flowBackend(f) < 0) ++books.flows_unseen;
  }
  if (books.lost > 0) {
    const std::vector<MissingPacket> missing = sink.missing(flow_sent);
    books.lost_placed = missing.size();
    books.lost_runs = lostRuns(plan, run, missing);
  }
  books.backend_flows.assign(sink.backends().size(), 0);
  for (size_t f = 0; f < flows.size(); ++f) {
    if (sink.flowBackend(f) >= 0) ++books.backend_flows[static_cast<size_t>(sink.flowBackend(f))];
  }
  if (plan.config) {
    absl::StatusOr<std::vector<BackendKey>> expected = tableBackends(*plan.config, flows);
    if (!expected.ok()) return expected.status();
    for (size_t f = 0; f < flows.size(); ++f) {
      if (sink.flowBackend(f) < 0) continue;
      if ((*expected)[f].kind == BackendKey::kNone) {
        ++books.table_unknown;
      } else if (sink.backends()[static_cast<size_t>(sink.flowBackend(f))] == (*expected)[f]) {
        ++books.table_match;
      } else {
        ++books.table_differ;
      }
    }
  }
  const SinkTotals& totals = sink.totals();
  const double tx_seconds = static_cast<double>(stop_tsc - start_tsc) / static_cast<double>(run.hz);
  books.tx_seconds = tx_seconds;
  books.tx_mpps = tx_seconds > 0 ? static_cast<double>(books.sent_packets) / tx_seconds / 1e6 : 0;
  books.rx_mpps = tx_seconds > 0 ? static_cast<double>(totals.verified) / tx_seconds / 1e6 : 0;
  books.loss_percent = sent_flow_packets > 0 ? 100.0 * static_cast<double>(books.lost) /
                                                   static_cast<double>(sent_flow_packets)
                                             : 0;
  return books;
}

void printReport(const Plan& plan, const Run& run, const Books& books) {
  const GenOptions& options = plan.options;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  const Sink& sink = *run.sink;
  const SinkTotals& totals = sink.totals();
  const std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  const bool config = plan.config.has_value();
  std::printf("\n%-28s %14s\n", "", "result");
  auto row = [](const char* name, const std::string& value) {
    std::printf("%-28s %14s\n", name, value.c_str());
  };
  row("sent", absl::StrCat(books.sent_packets));
  row("  of them malformed", absl::StrCat(books.sent_malformed));
  if (options.tx_queues > 1) {
    for (uint16_t q = 0; q < options.tx_queues; ++q) {
      row(absl::StrCat("  on TX queue ", q).c_str(),
          absl::StrFormat("%u (%u flows)", senders[q]->packets.read(), queue_flows[q].size()));
    }
  }
  row("received", absl::StrCat(totals.frames));
  row("  verified intact", absl::StrCat(totals.verified));
  row("  corrupt", absl::StrCat(totals.corrupt));
  row("  ICMP too-big replies", absl::StrCat(totals.too_big));
  row("  not berthgen's", absl::StrCat(totals.foreign));
  if (options.reflect) {
    row("answered as backends", absl::StrCat(run.receiver.reflected.read()));
    for (uint16_t q = 0; q < options.tx_queues && options.tx_queues > 1; ++q) {
      row(absl::StrCat("  sent on TX queue ", q).c_str(),
          absl::StrCat(senders[q]->replies_sent.read()));
    }
    row("  lost to a full ring", absl::StrCat(run.receiver.reflect_dropped.read()));
  }
  if (options.flood != 0) {
    row("flood SYNs sent", absl::StrCat(books.sent_flood));
    row("  forwarded back", absl::StrCat(totals.flood));
  }
  row("lost", absl::StrFormat("%u (%.4f%%)", books.lost, books.loss_percent));
  constexpr size_t kRunsPrinted = 8;
  for (size_t r = 0; r < books.lost_runs.size() && r < kRunsPrinted; ++r) {
    const LostRun& lost = books.lost_runs[r];
    std::printf("  %llu from packet %llu of TX queue %u%s\n",
                static_cast<unsigned long long>(lost.packets),
                static_cast<unsigned long long>(lost.first), lost.queue,
                lost.seconds < 0 ? "" : absl::StrFormat(", due %.3f s in", lost.seconds).c_str());
  }
  if (books.lost_runs.size() > kRunsPrinted) {
    std::printf("  and %zu more runs of lost packets\n", books.lost_runs.size() - kRunsPrinted);
  }
  row("duplicates", absl::StrCat(totals.duplicates));
  row("reordered", absl::StrCat(totals.reordered));
  row("flows that changed backend", absl::StrCat(books.flows_moved));
  row("flows never seen", absl::StrCat(books.flows_unseen));
  if (config) {
    row("flows on the table's pick", absl::StrCat(books.table_match));
    row("flows elsewhere", absl::StrCat(books.table_differ));
    if (books.table_unknown > 0) row("flows not checkable", absl::StrCat(books.table_unknown));
  }
  row("tx Mpps", absl::StrFormat("%.3f", books.tx_mpps));
  row("rx Mpps (verified)", absl::StrFormat("%.3f", books.rx_mpps));
  row("latency p50 us", absl::StrFormat("%.1f", sink.latency().percentile(0.5) / 1e3));
  row("latency p99 us", absl::StrFormat("%.1f", sink.latency().percentile(0.99) / 1e3));
  row("latency p99.9 us", absl::StrFormat("%.1f", sink.latency().percentile(0.999) / 1e3));
  const uint64_t start = startTsc(run);
  row("longest RX gap us",
      absl::StrFormat("%.0f", microseconds(run, run.receiver.longest_gap_tsc)));
  row("  ended s in",
      absl::StrFormat("%.3f", secondsInto(run, start, run.receiver.longest_gap_end_tsc)));
  if (options.window != 0) {
    uint64_t waits = 0;
    uint64_t longest = 0;
    uint64_t written_off = 0;
    for (const auto& sender : senders) {
      waits += sender->window_waits;
      longest = std::max(longest, sender->longest_window_wait_tsc);
      written_off += sender->window_written_off;
    }
    row("window waits", absl::StrCat(waits));
    row("  longest us", absl::StrFormat("%.0f", microseconds(run, longest)));
    row("  given up for lost", absl::StrCat(written_off));
  }
  std::printf("\n%-40s %12s %8s %10s\n", "backend", "packets", "share", "flows");
  for (size_t b = 0; b < sink.backends().size(); ++b) {
    std::printf("%-40s %12llu %7.2f%% %10llu\n", sink.backends()[b].toString().c_str(),
                static_cast<unsigned long long>(sink.backendPackets()[b]),
                totals.verified > 0 ? 100.0 * static_cast<double>(sink.backendPackets()[b]) /
                                          static_cast<double>(totals.verified)
                                    : 0.0,
                static_cast<unsigned long long>(books.backend_flows[b]));
  }
}

namespace {

// Where a loss fell: the "lost_placed" and "lost_runs" members.
void writeLostRuns(const Books& books, JsonWriter& json) {
  json.key("lost_placed").value(books.lost_placed).key("lost_runs").beginArray();
  for (const LostRun& lost : books.lost_runs) {
    json.beginObject()
        .key("queue")
        .value(static_cast<uint64_t>(lost.queue))
        .key("first")
        .value(lost.first)
        .key("packets")
        .value(lost.packets);
    if (lost.seconds >= 0) json.key("seconds").value(lost.seconds);
    json.endObject();
  }
  json.endArray();
}

// Per sending queue: its flows and packets, and the stretches a full ring or the window held it.
void writeTxQueues(const Plan& plan, const Run& run, uint64_t start, JsonWriter& json) {
  const std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  json.key("tx_queues").beginArray();
  for (uint16_t q = 0; q < plan.options.tx_queues; ++q) {
    json.beginObject()
        .key("queue")
        .value(static_cast<uint64_t>(q))
        .key("flows")
        .value(static_cast<uint64_t>(plan.queue_flows[q].size()))
        .key("sent")
        .value(senders[q]->packets.read())
        .key("replies_sent")
        .value(senders[q]->replies_sent.read())
        .key("longest_tx_wait_us")
        .value(microseconds(run, senders[q]->longest_wait_tsc))
        .key("longest_tx_wait_ended_s")
        .value(secondsInto(run, start, senders[q]->longest_wait_end_tsc))
        .key("window_waits")
        .value(senders[q]->window_waits)
        .key("longest_window_wait_us")
        .value(microseconds(run, senders[q]->longest_window_wait_tsc))
        .key("window_written_off")
        .value(senders[q]->window_written_off)
        .endObject();
  }
  json.endArray();
}

}  // namespace

absl::Status writeJson(const Plan& plan, const Run& run, const Books& books) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const Sink& sink = *run.sink;
  const SinkTotals& totals = sink.totals();
  const bool config = plan.config.has_value();
  JsonWriter json;
  json.beginObject()
      .key("flows")
      .value(static_cast<uint64_t>(flows.size()))
      .key("sent")
      .value(books.sent_packets)
      .key("sent_malformed")
      .value(books.sent_malformed)
      .key("received")
      .value(totals.frames)
      .key("verified")
      .value(totals.verified)
      .key("corrupt")
      .value(totals.corrupt)
      .key("foreign")
      .value(totals.foreign)
      .key("flood_sent")
      .value(books.sent_flood)
      .key("flood_received")
      .value(totals.flood)
      .key("icmp_too_big")
      .value(totals.too_big)
      .key("reflected")
      .value(run.receiver.reflected.read())
      .key("reflect_dropped")
      .value(run.receiver.reflect_dropped.read())
      .key("lost")
      .value(books.lost)
      .key("duplicates")
      .value(totals.duplicates)
      .key("reordered")
      .value(totals.reordered)
      .key("flows_moved")
      .value(books.flows_moved)
      .key("flows_unseen")
      .value(books.flows_unseen)
      .key("tx_mpps")
      .value(books.tx_mpps)
      .key("rx_mpps")
      .value(books.rx_mpps)
      .key("tx_seconds")
      .value(books.tx_seconds)
      .key("latency_ns")
      .beginObject()
      .key("p50")
      .value(sink.latency().percentile(0.5))
      .key("p99")
      .value(sink.latency().percentile(0.99))
      .key("p999")
      .value(sink.latency().percentile(0.999))
      .endObject();
  // Where a loss fell, and the stretches when nothing was received or a full ring held a sender.
  writeLostRuns(books, json);
  const uint64_t start = startTsc(run);
  json.key("receiver")
      .beginObject()
      .key("longest_gap_us")
      .value(microseconds(run, run.receiver.longest_gap_tsc))
      .key("longest_gap_ended_s")
      .value(secondsInto(run, start, run.receiver.longest_gap_end_tsc))
      .endObject();
  if (config) {
    json.key("table")
        .beginObject()
        .key("match")
        .value(books.table_match)
        .key("differ")
        .value(books.table_differ);
    json.key("unknown").value(books.table_unknown).endObject();
  }
  writeTxQueues(plan, run, start, json);
  json.key("backends").beginArray();
  for (size_t b = 0; b < sink.backends().size(); ++b) {
    json.beginObject()
        .key("backend")
        .value(sink.backends()[b].toString())
        .key("packets")
        .value(sink.backendPackets()[b])
        .key("flows")
        .value(books.backend_flows[b])
        .endObject();
  }
  json.endArray().endObject();
  std::ofstream out(options.json_path);
  out << json.str() << "\n";
  if (!out)
    return absl::InvalidArgumentError(absl::StrCat("--json ", options.json_path, ": cannot write"));
  return absl::OkStatus();
}

absl::Status writeFlowBackends(const Plan& plan, const Run& run) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const Sink& sink = *run.sink;
  std::ofstream out(options.flow_backends_path);
  for (size_t f = 0; f < flows.size(); ++f) {
    const int32_t backend = sink.flowBackend(f);
    out << (backend < 0 ? std::string("-")
                        : sink.backends()[static_cast<size_t>(backend)].toString())
        << "\n";
  }
  if (!out) {
    return absl::InvalidArgumentError(
        absl::StrCat("--flow-backends ", options.flow_backends_path, ": cannot write"));
  }
  return absl::OkStatus();
}

}  // namespace berth
