#!/usr/bin/env bash
# Installs what berth needs, builds it, and runs every test. This is the README's test command
# and all that CI runs. Two builds: the release build runs every suite; an AddressSanitizer +
# UBSan build (build-asan) runs the unit and integration suites again, the DPDK processes the
# integration tests start included, so that a read past a buffer, a use after free, a leak or
# undefined behaviour fails the run.
#
# Ends with the wall time of each phase, the ten slowest tests of each suite, every skipped case
# with its reason, and one line, "N passed, N failed, N skipped" (tools/test-summary.py). Exits
# non-zero if a test failed, a case was skipped for a reason the README does not explain, or a
# C++ source differs from clang-format (tools/check-format.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

times=$(mktemp)
trap 'rm -f "$times"' EXIT
# timed NAME COMMAND...: runs COMMAND and records its wall time as phase NAME.
timed() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  printf '%s\t%d\n' "$name" $((SECONDS - start)) >>"$times"
  return "$status"
}

status=0
timed dependencies bash tools/install-deps.sh
# Formatting drift fails the run, after every test has still run.
timed format bash tools/check-format.sh || status=1
timed "release build" bash tools/build.sh
timed "release tests" meson test -C build --no-rebuild --print-errorlogs \
  --num-processes "$(nproc)" || status=1

timed "sanitizer build" bash tools/build.sh --sanitize
# Errors end the process; DPDK's own allocations at start-up are not berth's leaks.
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0"
timed "sanitizer tests" meson test -C build-asan --no-rebuild --print-errorlogs \
  --num-processes "$(nproc)" --suite unit --suite integration || status=1

/usr/bin/python3 tools/test-summary.py "$times" build=release build-asan=sanitizer || status=1
exit "$status"
