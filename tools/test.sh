#!/usr/bin/env bash
# Installs what berth needs, builds it, and runs every test. This is the README's test command
# and all that CI runs. Two builds: the release build runs every suite; an AddressSanitizer +
# UBSan build (build-asan) runs the unit and integration suites again, the DPDK processes the
# integration tests start included, so that a read past a buffer, a use after free, a leak or
# undefined behaviour fails the run. Ends with one line, "N passed, N failed, N skipped",
# counted per test case from meson's JUnit logs, and exits non-zero if anything failed or a C++
# source differs from clang-format (tools/check-format.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
status=0
# Formatting drift fails the run, after every test has still run.
bash tools/check-format.sh || status=1
bash tools/build.sh

meson test -C build --print-errorlogs --num-processes "$(nproc)" || status=$?

bash tools/build.sh --sanitize
# Errors end the process; DPDK's own allocations at start-up are not berth's leaks.
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0"
meson test -C build-asan --print-errorlogs --num-processes "$(nproc)" \
  --suite unit --suite integration || status=$?

/usr/bin/python3 - build/meson-logs/testlog.junit.xml build-asan/meson-logs/testlog.junit.xml <<'PY'
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for log in sys.argv[1:]:
    for case in ET.parse(log).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
exit "$status"
