#!/usr/bin/env bash
# Runs one of berth's libFuzzer targets (built by meson, tests/fuzz/meson.build) for a bounded
# number of inputs from a fixed seed, so that CI time stays flat, starting from a seed corpus of
# well-formed inputs so that it reaches every branch at once.
#   run_fuzz.sh NAME FUZZER SOURCE_ROOT WORK_DIR [RUNS]
# NAME is packet_parser, config_loader or control_request.
set -euo pipefail
name=$1
fuzzer=$2
source_root=$3
corpus=$4/${name}_corpus
rm -rf "$corpus"
mkdir -p "$corpus"
case $name in
  packet_parser)
    runs=2000000 max_len=512
    /usr/bin/python3 "$source_root/tests/fuzz/make_seeds.py" "$corpus"
    ;;
  config_loader)
    runs=100000 max_len=4096
    cp "$source_root"/config/*.yaml "$corpus/"
    ;;
  control_request)
    runs=200000 max_len=4200
    printf '%s' '{"command": "status"}' >"$corpus/status"
    printf '%s' '{"command":"drain","service":"web","backend":"web-1"}' >"$corpus/drain"
    printf '%s' '{"command":"x","name":"a\"b\\c\u00e9"}' >"$corpus/escapes"
    ;;
  *)
    echo "run_fuzz.sh: unknown fuzz target '$name'" >&2
    exit 2
    ;;
esac
exec "$fuzzer" -seed=1 -runs="${5:-$runs}" -max_len="$max_len" "$corpus"
