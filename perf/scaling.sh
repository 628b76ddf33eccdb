#!/usr/bin/env bash
# Multi-core scaling of the pipeline: N copies of perf/pipeline_bench side by side, each pinned to
# its own CPU (--lcores 0@CPU), as berthd's shared-nothing workers run. Prints, per N, the sum and
# the median of the copies' Mpps (each copy's median of 3 repetitions), so that a per-core rate
# that falls as cores are added (shared L3, memory bandwidth) shows.
#
#   perf/scaling.sh PIPELINE_BENCH "1 2 4 8" [EAL options, e.g. -d DRIVER_DIR]
set -euo pipefail
bench=$1
counts=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cpus=$(nproc)
echo "cores  total_mpps  median_mpps_per_core  min  max"
for n in $counts; do
  if (( n > cpus )); then break; fi
  pids=()
  for ((i = 0; i < n; i++)); do
    "$bench" --benchmark_filter=BM_Pipeline --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_format=json \
      --lcores "0@$i" "$@" >"$out/$n-$i.json" 2>"$out/$n-$i.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { tail -n 5 "$out/$n"-*.log; exit 1; }
  done
  python3 - "$out" "$n" <<'PY'
import glob, json, statistics, sys
directory, n = sys.argv[1], sys.argv[2]
rates = []
for path in sorted(glob.glob(f"{directory}/{n}-*.json")):
    for bench in json.load(open(path))["benchmarks"]:
        if bench.get("aggregate_name") == "median":
            rates.append(bench["items_per_second"] / 1e6)
print(f"{n:>5}  {sum(rates):10.1f}  {statistics.median(rates):20.2f}  {min(rates):4.1f}  {max(rates):4.1f}")
PY
done
