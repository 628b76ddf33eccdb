#!/usr/bin/env bash
# Instructions per packet of the worker's burst step (Worker::processBurst: the pipeline, TX
# buffering and counters), counted by callgrind over a fixed number of bursts of 32: the
# pipeline without a connection table, and with one where every packet is a hit. Unlike cycles,
# the count does not move with a neighbour's load on a shared machine. Prints one JSON object.
#
#   perf/instructions.sh PIPELINE_BENCH [BURSTS]
set -euo pipefail
bench=$1
bursts=${2:-2000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" --collect-atstart=no \
  --toggle-collect='*countedPipelineBurst*' --toggle-collect='*countedConntrackHitBurst*' \
  "$bench" --count_bursts="$bursts" >"$out/run.json" 2>"$out/valgrind.log" ||
  { tail -n 20 "$out/valgrind.log" >&2; exit 1; }
callgrind_annotate --inclusive=yes "$out/callgrind.out" >"$out/annotated.txt"
/usr/bin/python3 - "$out/run.json" "$out/annotated.txt" <<'PY'
import json
import re
import sys

run = json.load(open(sys.argv[1]))
packets = run["bursts"] * run["packets_per_burst"]
inclusive = {}
for line in open(sys.argv[2]):
    match = re.match(r"\s*([\d,]+) .*(countedPipelineBurst|countedConntrackHitBurst)", line)
    if match:
        inclusive[match.group(2)] = int(match.group(1).replace(",", ""))
print(json.dumps({
    "packets": packets,
    "pipeline_instructions_per_packet": round(inclusive["countedPipelineBurst"] / packets, 1),
    "conntrack_hits_instructions_per_packet":
        round(inclusive["countedConntrackHitBurst"] / packets, 1),
    "conntrack_hit_share": run["conntrack_hits"] / packets,
}))
PY
