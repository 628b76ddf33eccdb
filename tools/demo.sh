#!/usr/bin/env bash
# berth's main job on its built-in default: installs what it needs, builds, and shows what the
# load balancer would do with config/demo.yaml. Until the datapath lands, that is the Maglev
# analysis: how evenly each service's table spreads flows, and how few flows move when a
# backend fails (with min-disruption failover, against a full rebuild).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-config/demo.yaml}

bash tools/install-deps.sh >/dev/null
bash tools/build.sh >/dev/null

echo "== berthctl analyze --config $config"
./build/tools/berthctl analyze --config "$config"
echo
echo "== the same with web-3 unhealthy: only web-3's flows move"
./build/tools/berthctl analyze --config "$config" --fail web-3 | sed -n '/with web-3 unhealthy/,/full rebuild/p'
