#!/usr/bin/env bash
# Builds the config loader's libFuzzer target with clang (ASan and UBSan on) and runs it for a
# bounded number of inputs from a fixed seed, starting from the shipped configs. Exit 77 (meson:
# skipped) when clang has no libFuzzer.
#   run_config_loader_fuzz.sh SOURCE_ROOT WORK_DIR [RUNS]
set -euo pipefail
source_root=$1
work=$2
runs=${3:-100000}
rm -rf "$work/config_corpus"
mkdir -p "$work/config_corpus"
cp "$source_root"/config/*.yaml "$work/config_corpus/"

if ! command -v clang++ >/dev/null; then
  echo "clang++ not found; skipping the fuzz run"
  exit 77
fi

libs=$(pkg-config --libs yaml-cpp absl_strings absl_str_format absl_status absl_statusor \
  absl_flat_hash_map absl_flat_hash_set absl_hash)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$source_root/include" -I"$source_root/src" \
  "$source_root/tests/fuzz/config_loader_fuzz.cc" \
  "$source_root"/src/config/*.cc "$source_root"/src/maglev/*.cc \
  "$source_root/src/net/ip_address.cc" "$source_root/src/net/mac_address.cc" \
  "$source_root/src/net/flow_hash.cc" "$source_root/src/net/crc32c.cc" \
  $libs -o "$work/config_loader_fuzz"

"$work/config_loader_fuzz" -seed=1 -runs="$runs" -max_len=4096 "$work/config_corpus"
