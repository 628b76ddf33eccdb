#pragma once

#include <cstdint>

#include "berth/maglev/table.h"

namespace berth {

// Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, SODA 2018) over any
// M-slot table: the choice for a *new* flow when its service sets `bounded_load: C`. Connections
// already tracked never move because of load; only where a new one starts changes.
//
// The bound: a backend b with weight w_b, among serving backends of total weight W that hold
// `total` active flows between them, takes a new flow only while
//     load(b) < C * (total + 1) * w_b / W.
// Loads are whole numbers, so after taking it load(b) <= ceil(C * (total + 1) * w_b / W): never
// more than C times its weighted mean plus one. Some serving backend is always below its bound,
// since the loads add up to total < total + 1 and C >= 1.
//
// The fallback order is the table's own: the flow's slot s, then s + 1, s + 2, ... wrapping at M.
// The first backend under its bound takes the flow. For a ring table this is the paper's walk
// clockwise to the next point; for Maglev and rendezvous tables the slots after s belong to
// backends in the table's pseudo-random order, each as often as its share, so an overloaded
// backend's new flows spread over the others in proportion to their weights. The order depends
// on nothing but the table, so every instance that sees the same loads makes the same choice.
//
// Cost: one probe per slot walked. At most a fraction 1/C of the backends can be at their bound,
// so with C = 1.25 one slot in five or more is free and the walk averages under 1.25 probes past
// the first; it stops after M probes (every slot) and then keeps the table's pick, which can only
// happen when the only backends under their bound own no slot.
//
// `accepts(entry)` says whether the backend at table index `entry` is under its bound.
template <typename Accepts>
inline uint16_t boundedLoadChoice(const uint16_t* entries, uint32_t table_size, uint32_t slot,
                                  Accepts&& accepts) {
  uint32_t at = slot;
  for (uint32_t probes = 0; probes < table_size; ++probes) {
    const uint16_t candidate = entries[at];
    if (candidate != kNoBackend && accepts(candidate)) return candidate;
    if (++at == table_size) at = 0;
  }
  return entries[slot];
}

// C must be above 1, where no backend could take a flow beyond its exact share; a bound above
// 100 times the mean is no bound at all.
inline constexpr double kMinBoundedLoad = 1.0;
inline constexpr double kMaxBoundedLoad = 100.0;

}  // namespace berth
