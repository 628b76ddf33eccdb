#!/usr/bin/env bash
# Builds the packet parser's libFuzzer target with clang (ASan and UBSan on) and runs it for a
# bounded number of inputs from a fixed seed, so CI time stays flat. Exit 77 (meson: skipped)
# when clang has no libFuzzer.
#   run_packet_parser_fuzz.sh SOURCE_ROOT WORK_DIR [RUNS]
set -euo pipefail
source_root=$1
work=$2
runs=${3:-2000000}
rm -rf "$work/corpus"
/usr/bin/python3 "$source_root/tests/fuzz/make_seeds.py" "$work/corpus"

if ! command -v clang++ >/dev/null; then
  echo "clang++ not found; skipping the fuzz run"
  exit 77
fi

absl_libs=$(pkg-config --libs absl_strings absl_str_format absl_status absl_statusor)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$source_root/include" \
  "$source_root/tests/fuzz/packet_parser_fuzz.cc" \
  "$source_root/src/net/packet_parser.cc" \
  "$source_root/src/net/flow_key.cc" \
  "$source_root/src/net/ip_address.cc" \
  $absl_libs -o "$work/packet_parser_fuzz"

"$work/packet_parser_fuzz" -seed=1 -runs="$runs" -max_len=512 "$work/corpus"
