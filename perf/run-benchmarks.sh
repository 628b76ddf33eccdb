#!/usr/bin/env bash
# Builds berth and runs its benchmarks: the Google Benchmark programs (each benchmark repeated,
# medians reported, full JSON in build/perf/<program>.json), the pipeline's instructions per
# packet under callgrind (build/perf/instructions.json), then the whole-process run of
# berthd next to dpdk-testpmd (build/perf/process_bench.json), then berthd's reload and
# health-event times (build/perf/reload_bench.json), its control answers under client load
# (build/perf/control_load_bench.json), and over memif its throughput next to testpmd's
# (build/perf/throughput_bench.md) and what idle workers cost in latency and save in CPU
# (build/perf/idle_bench.md). Prints the medians, berth's
# speed-up over the textbook Maglev build, and the pipeline's Mpps and cycles per packet, each
# measured in the same run as what it is compared with.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh >/dev/null
bash tools/build.sh >/dev/null

for program in maglev_bench datapath_bench pipeline_bench conntrack_bench json_writer_bench \
  reports_bench; do
  ./build/perf/$program --benchmark_repetitions="${REPETITIONS:-9}" \
    --benchmark_report_aggregates_only=true --benchmark_out="build/perf/$program.json" \
    --benchmark_out_format=json >/dev/null 2>"build/perf/$program.log"
done

/usr/bin/python3 - build/perf/maglev_bench.json build/perf/datapath_bench.json \
  build/perf/pipeline_bench.json build/perf/conntrack_bench.json build/perf/json_writer_bench.json \
  build/perf/reports_bench.json <<'PY'
import json
import sys

medians = {b["run_name"]: b for path in sys.argv[1:] for b in json.load(open(path))["benchmarks"]
           if b.get("aggregate_name") == "median"}
print(f"{'benchmark (median)':44} {'time':>12}")
for name, bench in medians.items():
    print(f"{name:44} {bench['real_time']:>10.4g} {bench['time_unit']}")
for size in (65537, 655373):
    paired = [b for name, b in medians.items()
              if name.startswith(f"BM_TableBuildSpeedup/1000/{size}/")]
    if paired:
        print(f"build N=1000 M={size}: textbook / berth = {paired[0]['speedup']:.2f}, build by build "
              f"in turn (berth {paired[0]['berth_ms']:.2f} ms, textbook "
              f"{paired[0]['textbook_ms']:.2f} ms)")
# Each algorithm's build of the M=65537 table, and the pipeline's cost with each one's
# table (the same array read, so the same cost).
for count in (100, 1000):
    builds = {"maglev": f"BM_TableBuild/{count}/65537", "ring": f"BM_RingBuild/{count}/65537",
              "rendezvous": f"BM_RendezvousBuild/{count}/65537/0",
              "rendezvous weighted": f"BM_RendezvousBuild/{count}/65537/1"}
    cells = [f"{name} {medians[run]['real_time']:.3g} {medians[run]['time_unit']}"
             for name, run in builds.items() if run in medians]
    print(f"build N={count} M=65537: " + ", ".join(cells))
by_algorithm = [(b.get("label", ""), b["ns_per_packet"]) for name, b in medians.items()
                if name.startswith("BM_PipelineByAlgorithm/")]
if by_algorithm:
    print("pipeline ns per packet by algorithm: " +
          ", ".join(f"{label} {ns:.1f}" for label, ns in by_algorithm))
for name, bench in medians.items():
    if "cycles_per_loop" in bench:
        print(f"{name}: {bench['cycles_per_loop']:.0f} cycles and {bench['ns_per_loop']:.1f} ns "
              "per worker loop")
    if "map_hit_cost" in bench:
        print(f"{name}: the connection table's miss path at "
              f"{bench['none_cycles_per_packet']:.0f} cycles per packet without flow sync's peer "
              f"flows; with 100,000 of them {bench['map_miss_cost']:+.1%} for a lookup that "
              f"misses, {bench['map_hit_cost']:+.1%} for one that hits")
    if "cycles_per_packet" in bench:
        print(f"{name}: {bench['items_per_second'] / 1e6:.2f} Mpps per core, "
              f"{bench['cycles_per_packet']:.0f} cycles and {bench['ns_per_packet']:.1f} ns per packet")
PY

# Instructions per packet, which a neighbour's load does not move as it moves cycles.
bash perf/instructions.sh build/perf/pipeline_bench >build/perf/instructions.json
/usr/bin/python3 - build/perf/instructions.json <<'PY'
import json
import sys

counts = json.load(open(sys.argv[1]))
print(f"instructions per packet (callgrind, {counts['packets']} packets): pipeline "
      f"{counts['pipeline_instructions_per_packet']:.0f}, with the connection table all hits "
      f"{counts['conntrack_hits_instructions_per_packet']:.0f}")
PY

python3 perf/process_benchmark.py build/src/berthd build/tools/berthctl build/perf/process_bench.json
python3 perf/reload_benchmark.py build/src/berthd build/perf/reload_bench.json
python3 perf/control_load_benchmark.py build/src/berthd build/perf/control_load_bench.json
python3 perf/throughput_benchmark.py build/src/berthd build/tools/berthgen \
  build/perf/throughput_bench.json build/perf/throughput_bench.md
python3 perf/idle_benchmark.py build/src/berthd build/tools/berthgen \
  build/perf/idle_bench.json build/perf/idle_bench.md
python3 perf/fleet_apply_benchmark.py build/src/berthd build/tools/berthctl \
  build/perf/fleet_apply_bench.json build/perf/fleet_apply_bench.md
