#include "berth/dataplane/counters.h"

#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view toString(DropReason reason) {
  static constexpr absl::string_view kNames[] = {BERTH_DROP_REASONS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, reason);
}

absl::string_view toString(ConntrackEvent event) {
  static constexpr absl::string_view kNames[] = {BERTH_CONNTRACK_EVENTS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, event);
}

absl::string_view toString(NatEvent event) {
  static constexpr absl::string_view kNames[] = {BERTH_NAT_EVENTS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, event);
}

absl::string_view toString(NeighborRefusal refusal) {
  static constexpr absl::string_view kNames[] = {BERTH_NEIGHBOR_REFUSALS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, refusal);
}

std::vector<std::pair<std::string, uint64_t>> sumCounters(
    absl::Span<const WorkerCounters* const> workers) {
  std::vector<std::pair<std::string, uint64_t>> totals;
  auto sum = [&](std::string name, auto member) {
    uint64_t total = 0;
    for (const WorkerCounters* worker : workers) total += member(*worker).read();
    totals.emplace_back(std::move(name), total);
  };
  sum("rx_packets", [](const WorkerCounters& w) -> const Counter& { return w.rx_packets; });
  sum("rx_bytes", [](const WorkerCounters& w) -> const Counter& { return w.rx_bytes; });
  sum("tx_packets", [](const WorkerCounters& w) -> const Counter& { return w.tx_packets; });
  sum("tx_bytes", [](const WorkerCounters& w) -> const Counter& { return w.tx_bytes; });
  sum("arp_nd_replies", [](const WorkerCounters& w) -> const Counter& { return w.arp_nd_replies; });
  sum("icmp_too_big_replies",
      [](const WorkerCounters& w) -> const Counter& { return w.icmp_too_big_replies; });
  sum("idle_sleeps", [](const WorkerCounters& w) -> const Counter& { return w.idle_sleeps; });
  sum("idle_sleep_us", [](const WorkerCounters& w) -> const Counter& { return w.idle_sleep_us; });
  // Index 0 of parse_errors is ParseError::kNone, which is never counted.
  for (size_t i = 1; i < kParseErrorCount; ++i) {
    sum(absl::StrCat("parse_", toString(static_cast<ParseError>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.parse_errors[i]; });
  }
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    sum(absl::StrCat("drop_", toString(static_cast<DropReason>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.drops[i]; });
  }
  for (size_t i = 0; i < kConntrackEventCount; ++i) {
    sum(absl::StrCat("conntrack_", toString(static_cast<ConntrackEvent>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.conntrack.values[i]; });
  }
  for (size_t i = 0; i < kNatEventCount; ++i) {
    sum(absl::StrCat("nat_", toString(static_cast<NatEvent>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.nat.values[i]; });
  }
  for (size_t i = 0; i < kNeighborRefusalCount; ++i) {
    sum(absl::StrCat("neighbor_refused_", toString(static_cast<NeighborRefusal>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.neighbor_refusals[i]; });
  }
  for (size_t i = 0; i < kExceptionClassCount; ++i) {
    sum(absl::StrCat("to_kernel_", toString(static_cast<ExceptionClass>(i))),
        [i](const WorkerCounters& w) -> const Counter& { return w.to_kernel[i]; });
  }
  return totals;
}

}  // namespace berth
