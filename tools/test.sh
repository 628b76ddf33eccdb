#!/usr/bin/env bash
# Installs what berth needs, builds it, and runs every test. This is the README's test command
# and all that CI runs. Ends with one line, "N passed, N failed, N skipped", counted per test
# case from meson's JUnit log, and exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
bash tools/build.sh

status=0
meson test -C build --print-errorlogs --num-processes "$(nproc)" || status=$?

/usr/bin/python3 - build/meson-logs/testlog.junit.xml <<'PY'
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
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
