#!/usr/bin/env bash
# Configures (once) and builds berth into ./build. Assumes tools/install-deps.sh has run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
fi
ninja -C build
