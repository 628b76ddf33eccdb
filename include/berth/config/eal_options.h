#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace berth {

// The EAL's command line as DPDK 22.11's rte_eal_init parses it, checked before it runs: an
// option it does not know ("--in-memroy"), one missing its value, and pairs it refuses together
// are named here with what to write instead, rather than as its 114-line usage text. Pure.

// One problem per line: "'--in-memroy' is not an EAL option; did you mean '--in-memory'?".
// Empty when the EAL would take the arguments as far as their names, values and combinations
// go (what they ask of the machine, hugepages or devices, only the EAL can tell).
std::vector<std::string> ealArgumentProblems(absl::Span<const std::string> args);

// What berthd learns of the host when rte_eal_init fails, to name the likely cause.
struct EalFailure {
  int error = 0;                    // rte_errno
  std::vector<std::string> args;    // the merged EAL arguments, program name first
  uint64_t hugepages_reserved = 0;  // over /sys/kernel/mm/hugepages/*/nr_hugepages
  bool hugetlbfs_mounted = false;   // a hugetlbfs in /proc/mounts
  unsigned euid = 0;
  // Another process holds the lock on the file prefix's config file (ealFilePrefix), which the
  // EAL answers with "Cannot init config" and no errno.
  bool file_prefix_held = false;
};

// The file prefix the EAL's runtime files take ("rte" unless --file-prefix gives one); empty
// with --in-memory, which keeps none.
std::string ealFilePrefix(absl::Span<const std::string> args);

// The likely causes of `failure`, each with its fix, most likely first; empty where none of the
// common ones fits (the EAL's own message, printed above berthd's, is then all there is).
std::vector<std::string> ealFailureAdvice(const EalFailure& failure);

}  // namespace berth
