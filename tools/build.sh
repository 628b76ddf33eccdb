#!/usr/bin/env bash
# Configures (once) and builds berth into ./build, or with --sanitize an AddressSanitizer +
# UBSan build into ./build-asan. Assumes tools/install-deps.sh has run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --sanitize ]]; then
  if [[ ! -f build-asan/build.ninja ]]; then
    meson setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined \
      -Db_lundef=false
  fi
  ninja -C build-asan
  exit
fi
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release --prefix=/usr --sysconfdir=/etc
fi
ninja -C build
