#!/usr/bin/env bash
# Builds berth and runs its Google Benchmark programs: each benchmark repeated, medians
# reported. Writes the full JSON to build/perf/maglev_bench.json, then prints the medians and
# berth's speed-up over the textbook Maglev build measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh >/dev/null
bash tools/build.sh >/dev/null

out=build/perf/maglev_bench.json
./build/perf/maglev_bench --benchmark_repetitions="${REPETITIONS:-9}" \
  --benchmark_report_aggregates_only=true --benchmark_out="$out" \
  --benchmark_out_format=json >/dev/null 2>build/perf/maglev_bench.log

/usr/bin/python3 - "$out" <<'PY'
import json
import sys

medians = {b["run_name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]
           if b.get("aggregate_name") == "median"}
print(f"{'benchmark (median)':44} {'time':>12}")
for name, bench in medians.items():
    print(f"{name:44} {bench['real_time']:>10.4g} {bench['time_unit']}")
for size in (65537, 655373):
    ours = medians.get(f"BM_TableBuild/1000/{size}")
    textbook = medians.get(f"BM_TableBuildTextbook/1000/{size}")
    if ours and textbook:
        print(f"build N=1000 M={size}: textbook / berth = {textbook['real_time'] / ours['real_time']:.2f}")
PY
