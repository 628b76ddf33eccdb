#!/usr/bin/env bash
# berth's main job on its built-in default, with no NIC: installs what it needs, builds, then runs
# berthd with config/demo.yaml on a memif port and berthgen on the other end, sending 20,000
# flows to its two VIPs while one backend's health target fails and comes back. It prints the
# per-backend shares before, during and after, which established flows changed backend, and
# loss and packets per second, and cleans up after itself (about half a minute).
# Another config with the same VIPs works too: tools/demo.sh [CONFIG].
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-config/demo.yaml}

bash tools/install-deps.sh --demo >/dev/null
bash tools/build.sh --demo >/dev/null

# The EAL's runtime directories for the demo's file prefixes, which DPDK leaves behind.
trap 'rm -rf /var/run/dpdk/berth-demo /var/run/dpdk/berth-demo-gen' EXIT
python3 tools/memif_demo.py --berthd build-demo/src/berthd --berthctl build-demo/tools/berthctl \
  --berthgen build-demo/tools/berthgen --config "$config"
echo
echo "berthctl analyze --config $config shows the tables' balance and failover disruption;"
echo "tools/pcap_demo.py replays a capture through berthd on net_pcap instead."
