#!/usr/bin/env bash
# Multi-core scaling, ready to run on a machine without DPDK (the 16-core machine the device tool
# lends some sessions reaches no package registry):
#
#   perf/scaling.sh bundle [BUNDLE]       here: BUNDLE (default build/scaling-bundle) gets the
#                                         programs (bin/), every shared library they load but the
#                                         C library's own (lib/) and the DPDK drivers they use
#                                         (pmds/); fails over 60 MiB
#   perf/scaling.sh run [BUNDLE] [OUT]    anywhere: runs the bundle's programs on its libraries
#                                         and drivers, writes OUT/scaling.json (default
#                                         build/scaling) and prints the table
#   perf/scaling.sh smoke DIR             both into DIR, on one core without memif, with the
#                                         machine's DPDK drivers hidden (a test; root)
#
# The programs come from BERTH_BUILD_DIR (default build).
#
# The run has two parts:
#   - the pipeline: SCALING_CORES (default "1 2 4 8") copies of perf/pipeline_bench side by side,
#     each pinned to a CPU of its own (--lcores 0@CPU), as berthd's shared-nothing workers run;
#     each copy reports the median of 3 repetitions of BM_Pipeline;
#   - memif: perf/throughput_benchmark.py, berthgen -> berthd -> berthgen with SCALING_WORKERS
#     (default "1 2 4") workers, ipip, 1M flows, connection tracking on, next to dpdk-testpmd on
#     the same path. 8 workers would need 18 CPUs.
# Each count's Mpps is printed with its ratio to linear (count x the 1-core figure). A count the
# machine has too few CPUs for is skipped and listed. Memory is 2 MiB hugepages where they can be
# reserved, else 4 KiB pages; and should the EAL not start with what was chosen, the run retries
# with --no-huge. The bundle's drivers are loaded (-d) where the machine has no DPDK drivers of its
# own. What it used is recorded in the JSON (drivers_from, memory, fallbacks). About 2 minutes on
# 16 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-}
bundle=$(realpath -m "${2:-build/scaling-bundle}")

glibc='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libresolv)\.so'
drivers=(librte_net_null librte_net_memif librte_mempool_ring librte_bus_vdev)

make_bundle() {
  local build=${BERTH_BUILD_DIR:-build}
  local programs=("$build/perf/pipeline_bench" "$build/src/berthd" "$build/tools/berthgen"
                  "$(command -v dpdk-testpmd)")
  local driver_dir
  driver_dir=$(ls -d /usr/lib/*/dpdk/pmds-* | head -n 1)
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/pmds"
  cp "${programs[@]}" "$bundle/bin/"
  local objects=("${programs[@]}")
  for driver in "${drivers[@]}"; do objects+=("$driver_dir/$driver.so.23"); done
  # Every library any of them loads, by soname, the C library's own left to the machine: its
  # loader and libc must match each other.
  ldd "${objects[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      [[ $name =~ $glibc ]] && continue
      cp -L "$path" "$bundle/lib/$name"
    done
  # A driver that is also a program's library is one file, so it loads once. The EAL loads from
  # a -d directory only names ending in .so or .so.<ABI version>.
  for driver in "${drivers[@]}"; do
    if [[ ! -f $bundle/lib/$driver.so.23 ]]; then
      cp -L "$driver_dir/$driver.so.23" "$bundle/lib/"
    fi
    ln -s "../lib/$driver.so.23" "$bundle/pmds/$driver.so"
  done
  local mebibytes
  mebibytes=$(du -smL "$bundle" | cut -f1)
  echo "bundle: $bundle, ${mebibytes} MiB: $(ls "$bundle/bin" | tr '\n' ' ')"
  if ((mebibytes > 60)); then
    echo "bundle: over 60 MiB; the device tool carries 64 MiB in all" >&2
    exit 1
  fi
}

# The first directory at or above $1 that anyone may write to, if there is one.
world_writable_above() {
  local dir=$1
  while :; do
    if [[ -d $dir && -n $(find "$dir" -maxdepth 0 -perm -0002) ]]; then
      echo "$dir"
      return
    fi
    [[ $dir == / ]] && return
    dir=$(dirname "$dir")
  done
}

run_bundle() {
  local out writable=""
  # Where the machine has no DPDK drivers of its own, scaling.py loads the bundle's.
  compgen -G "/usr/lib/*/dpdk/pmds-*/librte_net_null.so*" >/dev/null ||
    writable=$(world_writable_above "$bundle/pmds")
  if [[ -n $writable ]]; then
    echo "the bundle is below $writable, which anyone may write to: the EAL loads no driver" \
      "(-d) from there; move the bundle (an absolute path outside /tmp)" >&2
    exit 1
  fi
  out=$(realpath -m "${3:-build/scaling}")
  mkdir -p "$out"
  [[ -x $bundle/bin/pipeline_bench ]] || { echo "no bundle at $bundle: run 'bundle' first" >&2; exit 1; }
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$bundle/bin:$PATH"
  SCALING_CORES=${SCALING_CORES-1 2 4 8} SCALING_WORKERS=${SCALING_WORKERS-1 2 4} \
    /usr/bin/env /usr/bin/env python3 perf/scaling.py "$bundle" "$out"
}

case $action in
  bundle) make_bundle ;;
  run) run_bundle "$@" ;;
  smoke)
    # The bundle where no directory above it is world-writable, whatever DIR is: the EAL loads
    # no driver (-d) from below one, and a checkout in /tmp would be.
    bundle=$(mktemp -d /run/berth-scaling-smoke.XXXXXX)/bundle
    trap 'rm -rf "$(dirname "$bundle")"' EXIT
    make_bundle
    # As on a machine without DPDK: the machine's driver directory hidden, in a mount namespace.
    driver_dir=$(ls -d /usr/lib/*/dpdk/pmds-* | head -n 1)
    SCALING_CORES=1 SCALING_WORKERS="" unshare -m bash -c \
      'mount -t tmpfs none "$0" && "$1" run "$2" "$3"' "$driver_dir" "$0" "$bundle" "$2/out"
    grep -q '"drivers_from": "the bundle"' "$2/out/scaling.json"
    grep -q '"cores": 1' "$2/out/scaling.json"
    rm -rf "$bundle"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
    ;;
esac
