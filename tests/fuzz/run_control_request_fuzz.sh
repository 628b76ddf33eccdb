#!/usr/bin/env bash
# Builds the control request parser's libFuzzer target with clang (ASan and UBSan on) and runs it
# for a bounded number of inputs from a fixed seed, starting from requests berthctl sends. Exit 77
# (meson: skipped) when clang has no libFuzzer.
#   run_control_request_fuzz.sh SOURCE_ROOT WORK_DIR [RUNS]
set -euo pipefail
source_root=$1
work=$2
runs=${3:-200000}
rm -rf "$work/control_corpus"
mkdir -p "$work/control_corpus"
printf '%s' '{"command": "status"}' >"$work/control_corpus/status"
printf '%s' '{"command":"drain","service":"web","backend":"web-1"}' >"$work/control_corpus/drain"
printf '%s' '{"command":"x","name":"a\"b\\c\u00e9"}' >"$work/control_corpus/escapes"

if ! command -v clang++ >/dev/null; then
  echo "clang++ not found; skipping the fuzz run"
  exit 77
fi

libs=$(pkg-config --libs absl_strings absl_str_format absl_status absl_statusor absl_flat_hash_map \
  absl_hash)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$source_root/include" "$source_root/tests/fuzz/control_request_fuzz.cc" \
  "$source_root/src/control/request.cc" $libs -o "$work/control_request_fuzz"

"$work/control_request_fuzz" -seed=1 -runs="$runs" -max_len=4200 "$work/control_corpus"
