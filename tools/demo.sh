#!/usr/bin/env bash
# berth's main job on its built-in default, with no NIC: installs what it needs, builds, then
# replays a generated capture of 100,000 flows to config/demo.yaml's two VIPs through berthd on
# a net_pcap vdev, decodes what berthd sent, and prints per-backend shares against the Maglev
# table, the drop counters and the packets per second berthd saw. Any config with IPv4 or IPv6
# services and a port named net_pcap0 works: tools/demo.sh [CONFIG].
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-config/demo.yaml}

bash tools/install-deps.sh >/dev/null
bash tools/build.sh >/dev/null

# The EAL's runtime directory for the demo's file prefix, which DPDK leaves behind.
trap 'rm -rf /var/run/dpdk/berth-demo' EXIT
python3 tools/pcap_demo.py --berthd build/src/berthd --berthctl build/tools/berthctl \
  --config "$config"
echo
echo "berthctl analyze --config $config shows the tables' balance and failover disruption."
