#!/usr/bin/python3
"""The two-queue memif case of berthgen_memif_test.py, in a loop: RUNS runs in a row on a quiet
machine, each of which must pass whole, then LOADED runs while a busy process per CPU competes
with berthd and berthgen. Under that load a run passes when berthd neither ended nor lost its
link (one "Link up" for its one berthgen connect, and berthgen ran to its end); packets lost to
a starved CPU are reported, not failed. Prints one line per failure and a summary, and exits
non-zero if any run failed. Opt-in, not part of the suite: about four minutes with the defaults.

Usage: memif_two_queue_loop.py [BUILD_DIR] [RUNS] [LOADED]   (default: build 50 20)

Against a build whose workers poll a memif port whatever its link (before
OpenedPort::poll_only_while_link_up), this is how the fault was caught, with core dumps on:
  ulimit -c unlimited; mkdir -p /tmp/cores
  echo '/tmp/cores/core.%e.%p' > /proc/sys/kernel/core_pattern
  tests/integration/memif_two_queue_loop.py OLD_BUILD 50 0
  gdb -batch -ex bt -ex 'info registers r9' -ex 'x/i $pc' OLD_BUILD/src/berthd /tmp/cores/core.*
Each core was in rte-worker-2, in librte_net_memif's eth_memif_rx at `testb $0x1,0x4(%r9)`
with r9 = 0x20080.
"""
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
LOADED = int(sys.argv[3]) if len(sys.argv) > 3 else 20

# The test module takes its three programs from the command line when it is imported.
sys.argv[1:] = [os.path.join(BUILD, "src", "berthd"), os.path.join(BUILD, "tools", "berthctl"),
                os.path.join(BUILD, "tools", "berthgen")]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import berthgen_memif_test  # noqa: E402


def run_once():
    """Runs the case once; returns (passed, the test instance, the failure's text)."""
    test = berthgen_memif_test.BerthgenOverTwoMemifQueues(
        "test_flows_spread_over_both_queues_each_whole_on_one_berthd_worker")
    result = unittest.TestResult()
    test.run(result)
    problems = result.failures + result.errors
    return not problems, test, problems[0][1] if problems else ""


def phase(name, runs, loaded):
    failed = 0
    lost = []
    for run in range(1, runs + 1):
        passed, test, text = run_once()
        ended = getattr(test, "berthd_ended", None)
        link_ups = getattr(test, "link_ups", 0)
        results = getattr(test, "results", None)
        berthgen_ok = getattr(test, "berthgen_returncode", None) == 0 and results is not None
        if results is not None:
            lost.append(results["lost"])
        if loaded:
            passed = ended is None and link_ups == 1 and berthgen_ok
        if not passed:
            failed += 1
            if ended is not None:
                reason = "berthd ended (%s)" % ended
            elif link_ups != 1:
                reason = "its link came up %d times" % link_ups
            elif not berthgen_ok:
                reason = "berthgen failed"
            else:
                reason = next((line for line in text.splitlines()
                               if line.startswith("AssertionError")), text)[:120]
            print("%s run %d: FAILED: %s" % (name, run, reason), flush=True)
    lost_runs = sum(1 for n in lost if n)
    print("%s: %d of %d runs passed; packets lost in %d run(s), at most %d" % (
        name, runs - failed, runs, lost_runs, max(lost, default=0)), flush=True)
    return failed


def main():
    failed = phase("quiet", RUNS, loaded=False)
    hogs = [subprocess.Popen(["sha256sum", "/dev/zero"], stdout=subprocess.DEVNULL)
            for _ in range(os.cpu_count() or 2)]
    try:
        failed += phase("loaded", LOADED, loaded=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
