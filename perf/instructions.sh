#!/usr/bin/env bash
# Instructions per packet of the worker's burst step (Worker::processBurst: the pipeline, TX
# buffering and counters), counted by callgrind over a fixed number of bursts of 32: the
# pipeline without a connection table, and with one where every packet is a hit; and Full-NAT's
# clients' segments and backends' ACKs, of a plain service and of one with the PROXY protocol
# (each session's header acknowledged). Unlike cycles, the count does not move with a
# neighbour's load on a shared machine. Prints one JSON object.
#
#   perf/instructions.sh PIPELINE_BENCH [BURSTS]
set -euo pipefail
bench=$1
bursts=${2:-2000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" --collect-atstart=no \
  --toggle-collect='*countedPipelineBurst*' --toggle-collect='*countedConntrackHitBurst*' \
  --toggle-collect='*countedNatClientBurst*' --toggle-collect='*countedProxiedClientBurst*' \
  --toggle-collect='*countedNatReplyBurst*' --toggle-collect='*countedProxiedReplyBurst*' \
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
    match = re.match(r"\s*([\d,]+) .*(counted[A-Za-z]+Burst)", line)
    if match:
        inclusive[match.group(2)] = int(match.group(1).replace(",", ""))


def per_packet(function):
    return round(inclusive[function] / packets, 1)


print(json.dumps({
    "packets": packets,
    "pipeline_instructions_per_packet": per_packet("countedPipelineBurst"),
    "conntrack_hits_instructions_per_packet": per_packet("countedConntrackHitBurst"),
    "conntrack_hit_share": run["conntrack_hits"] / packets,
    "fullnat_client_instructions_per_packet": per_packet("countedNatClientBurst"),
    "fullnat_proxied_client_instructions_per_packet": per_packet("countedProxiedClientBurst"),
    "fullnat_reply_instructions_per_packet": per_packet("countedNatReplyBurst"),
    "fullnat_proxied_reply_instructions_per_packet": per_packet("countedProxiedReplyBurst"),
}))
PY
