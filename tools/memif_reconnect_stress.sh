#!/usr/bin/env bash
# A memif peer restarting N times under full-rate traffic, against one berthd: each berthgen run
# ends with a disconnect that DPDK handles on its interrupt thread while berthd's worker polls
# the port (see include/berth/runtime/unmap_guard.h). Reports how many reconnects berthd took
# and whether it stayed up; exits non-zero if it did not.
#
# Usage: tools/memif_reconnect_stress.sh [BUILD_DIR] [RECONNECTS]   (default: build 100)
set -euo pipefail
build=${1:-build}
reconnects=${2:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/berth-reconnect-XXXXXX)
prefix=berth-reconnect-$$
berthd_pid=
memif_options=socket-abstract=no
berthd_mac=02:00:00:00:00:01
gen_mac=02:00:00:00:00:02
cleanup() {
  if [ -n "$berthd_pid" ] && kill -0 "$berthd_pid" 2>/dev/null; then
    kill -INT "$berthd_pid"
    wait "$berthd_pid" 2>/dev/null || true
  fi
  rm -rf "$work" "/var/run/dpdk/$prefix" "/var/run/dpdk/$prefix-gen"
}
trap cleanup EXIT

sed "s/\"--file-prefix\", \"berth-demo\"/\"--file-prefix\", \"$prefix\"/" \
  "$root/config/demo.yaml" > "$work/berth.yaml"
# Each process wholly on its own CPU (tools/memif_demo.py says why).
taskset -c 0 "$build/src/berthd" \
  --vdev "net_memif0,role=server,socket=$work/memif.sock,$memif_options,mac=$berthd_mac" \
  -- --config "$work/berth.yaml" --control-socket "$work/berth.sock" > "$work/berthd.log" 2>&1 &
berthd_pid=$!
for _ in $(seq 1 300); do
  grep -q "berthd: forwarding:" "$work/berthd.log" && break
  kill -0 "$berthd_pid" || { cat "$work/berthd.log"; exit 1; }
  sleep 0.1
done

start=$(date +%s)
for run in $(seq 1 "$reconnects"); do
  timeout 60 taskset -c 1 "$build/tools/berthgen" --no-huge -m 512 --no-pci \
    --file-prefix "$prefix-gen" --lcores 0@1,1@1 --log-level lib.eal:error \
    --vdev "net_memif0,role=client,socket=$work/memif.sock,$memif_options,mac=$gen_mac" \
    -- --tx-dev net_memif0 --dst-mac "$berthd_mac" --flows 1000 --rate 0 --count 20000 \
    --vip 198.18.100.1:80/tcp --drain 0.05 --quiet > /dev/null 2>&1 || true
  if ! kill -0 "$berthd_pid" 2>/dev/null; then
    wait "$berthd_pid" || status=$?
    echo "berthd ended (status ${status:-0}) after $run reconnect(s); its last lines:"
    tail -5 "$work/berthd.log"
    exit 1
  fi
done
downs=$(grep -c "Link down" "$work/berthd.log")
echo "berthd stayed up through $reconnects memif reconnects under full-rate traffic" \
  "($(( $(date +%s) - start )) s); link-down lines logged: $downs"
