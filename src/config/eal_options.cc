#include "berth/config/eal_options.h"

#include <algorithm>
#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "berth/util/did_you_mean.h"

namespace berth {
namespace {

enum class Value { kNone, kRequired, kOptional };

struct Option {
  absl::string_view name;  // without its dashes
  Value value;
};

// DPDK 22.11's eal_long_options and eal_short_options ("a:b:c:s:d:hl:S:m:n:r:v").
constexpr Option kLongOptions[] = {
    {"allow", Value::kRequired},
    {"base-virtaddr", Value::kRequired},
    {"block", Value::kRequired},
    {"create-uio-dev", Value::kNone},
    {"file-prefix", Value::kRequired},
    {"force-max-simd-bitwidth", Value::kRequired},
    {"help", Value::kNone},
    {"huge-dir", Value::kRequired},
    {"huge-unlink", Value::kOptional},
    {"huge-worker-stack", Value::kOptional},
    {"in-memory", Value::kNone},
    {"iova-mode", Value::kRequired},
    {"lcores", Value::kRequired},
    {"legacy-mem", Value::kNone},
    {"log-level", Value::kRequired},
    {"main-lcore", Value::kRequired},
    {"match-allocations", Value::kNone},
    {"mbuf-pool-ops-name", Value::kRequired},
    {"no-hpet", Value::kNone},
    {"no-huge", Value::kNone},
    {"no-pci", Value::kNone},
    {"no-shconf", Value::kNone},
    {"no-telemetry", Value::kNone},
    {"proc-type", Value::kRequired},
    {"single-file-segments", Value::kNone},
    {"socket-limit", Value::kRequired},
    {"socket-mem", Value::kRequired},
    {"syslog", Value::kOptional},
    {"telemetry", Value::kNone},
    {"trace", Value::kRequired},
    {"trace-bufsz", Value::kRequired},
    {"trace-dir", Value::kRequired},
    {"trace-mode", Value::kRequired},
    {"vdev", Value::kRequired},
    {"vfio-intr", Value::kRequired},
    {"vfio-vf-token", Value::kRequired},
    {"vmware-tsc-map", Value::kNone},
};
constexpr absl::string_view kShortWithValue = "abcsdlSmnr";
constexpr absl::string_view kShortAlone = "hv";

std::string suggestion(absl::string_view name) {
  const Option* best = nullptr;
  size_t best_distance = 4;  // a few typos at most
  for (const Option& option : kLongOptions) {
    const size_t distance = editDistance(name, option.name);
    if (distance < best_distance) {
      best = &option;
      best_distance = distance;
    }
  }
  return best == nullptr ? std::string() : absl::StrCat("; did you mean '--", best->name, "'?");
}

// The long option `name` names, as getopt_long finds it: exactly, or by a prefix of one alone.
const Option* findLong(absl::string_view name) {
  const Option* prefixed = nullptr;
  int prefix_matches = 0;
  for (const Option& option : kLongOptions) {
    if (option.name == name) return &option;
    if (absl::StartsWith(option.name, name)) {
      prefixed = &option;
      ++prefix_matches;
    }
  }
  return prefix_matches == 1 ? prefixed : nullptr;
}

}  // namespace

std::vector<std::string> ealArgumentProblems(absl::Span<const std::string> args) {
  std::vector<std::string> problems;
  std::vector<std::string> seen;  // long options by their full names, and "-m"
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (absl::StartsWith(arg, "--")) {
      const absl::string_view body = absl::string_view(arg).substr(2);
      const size_t equals = body.find('=');
      const absl::string_view name = body.substr(0, equals);
      const Option* option = findLong(name);
      if (option == nullptr) {
        problems.push_back(
            absl::StrCat("'", arg, "' is not an EAL option", suggestion(name),
                         " (DPDK 22.11's options are listed by `dpdk-testpmd --help`)"));
        continue;
      }
      seen.push_back(std::string(option->name));
      if (option->value == Value::kNone && equals != absl::string_view::npos) {
        problems.push_back(absl::StrCat("'--", option->name, "' takes no value"));
      } else if (option->value == Value::kRequired && equals == absl::string_view::npos) {
        if (i + 1 >= args.size()) {
          problems.push_back(absl::StrCat("'--", option->name, "' needs a value"));
        }
        ++i;
      }
      continue;
    }
    if (arg.size() >= 2 && arg[0] == '-') {
      const char letter = arg[1];
      if (kShortAlone.find(letter) != absl::string_view::npos && arg.size() == 2) continue;
      if (kShortWithValue.find(letter) == absl::string_view::npos) {
        problems.push_back(absl::StrCat("'", arg, "' is not an EAL option"));
        continue;
      }
      if (letter == 'm') seen.push_back("-m");
      if (arg.size() == 2) {
        if (i + 1 >= args.size()) problems.push_back(absl::StrCat("'", arg, "' needs a value"));
        ++i;
      }
      continue;
    }
    problems.push_back(absl::StrCat(
        "'", arg,
        "' is no EAL option (EAL options begin with '-'; a value belongs after its option)"));
  }
  auto has = [&](absl::string_view name) { return absl::c_linear_search(seen, name); };
  // The pairs rte_eal_init refuses together (eal_check_common_options and eal_parse_args).
  if (has("no-huge") && has("in-memory")) {
    problems.push_back(
        "'--no-huge' and '--in-memory' together: the EAL refuses the pair; keep '--in-memory' "
        "with hugepages, or '--no-huge -m SIZE' with a '--file-prefix' of its own");
  }
  if (has("no-huge") && has("socket-mem")) {
    problems.push_back("'--socket-mem' needs hugepages; with '--no-huge', give '-m SIZE' instead");
  }
  if (has("-m") && has("socket-mem")) {
    problems.push_back("'-m' and '--socket-mem' together: give one of them");
  }
  return problems;
}

std::vector<std::string> ealFailureAdvice(const EalFailure& failure) {
  auto has = [&](absl::string_view option) {
    return absl::c_any_of(failure.args, [&](const std::string& arg) {
      return arg == option || absl::StartsWith(arg, absl::StrCat(option, "="));
    });
  };
  std::vector<std::string> advice;
  const bool huge = !has("--no-huge");
  if (failure.euid != 0) {
    advice.push_back(absl::StrCat(
        "berthd runs as uid ", failure.euid,
        ": the EAL needs root for hugepages and devices (the packaged unit runs berthd as root "
        "with CAP_IPC_LOCK, CAP_NET_ADMIN, CAP_NET_RAW and CAP_NET_BIND_SERVICE)"));
  }
  if (huge && failure.hugepages_reserved == 0) {
    advice.push_back(
        "no hugepages are reserved on this host (every /sys/kernel/mm/hugepages/*/nr_hugepages "
        "is 0): reserve some (echo 1024 > "
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages; docs/nics.md), or run without "
        "them: '--no-huge -m 512 --file-prefix NAME' in place of '--in-memory'");
  } else if (huge && !failure.hugetlbfs_mounted && !has("--in-memory")) {
    advice.push_back(
        "no hugetlbfs is mounted: mount -t hugetlbfs nodev /dev/hugepages, or give the EAL "
        "'--in-memory'");
  }
  if (failure.file_prefix_held) {
    advice.push_back(absl::StrCat("another DPDK process holds the file prefix '",
                                  ealFilePrefix(failure.args),
                                  "': give each process its own '--file-prefix NAME', or "
                                  "'--in-memory'"));
  }
  return advice;
}

std::string ealFilePrefix(absl::Span<const std::string> args) {
  std::string prefix = "rte";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--in-memory") return "";
    if (args[i] == "--file-prefix" && i + 1 < args.size()) prefix = args[i + 1];
    if (absl::StartsWith(args[i], "--file-prefix=")) prefix = args[i].substr(14);
  }
  return prefix;
}

}  // namespace berth
