#!/usr/bin/python3
"""One memif case of berthgen_memif_test.py in a loop, quiet or under load, to catch what fails
only now and then. Opt-in, not part of the suite.

Usage: memif_loop.py CASE [--build DIR] [--runs N] [--load none|cpu0|cpu1|both|heavy|stalls|heavy-stalls]
                   [--strict] [--no-window]

CASE is one of:
  every-mode  BerthgenOverMemif's every-mode case (one queue, 200 kpps, must lose nothing)
  two-queue   BerthgenOverTwoMemifQueues' case (two queues and two berthd workers)

--load starts a busy process (sha256sum of /dev/zero) pinned to CPU 0, where berthd runs, to
CPU 1, where berthgen runs, one on each, or three on each (heavy), for the whole loop; stalls
takes each CPU whole for 30 ms now and then (STALLER below), and heavy-stalls does both.
--no-window runs berthgen without --window, as the suite did before it had one (and as a
berthgen without the option needs).

Each run prints a line: passed or failed, what berthgen lost, where the loss fell (runs of
consecutive packets of a TX queue, with when they were due), berthgen's longest gap between two
passes over its RX queues, its longest wait on a full TX ring, and berthd's drops. The last line
counts the runs that failed; the exit status is non-zero if any did. By default a run fails when
berthd ended or its link came up more than once, berthgen failed, or a packet was lost or
corrupt; the case's other assertions (such as the packets sent, which a loaded CPU can keep
berthgen from) are not counted. --strict fails a run on any failed assertion, as the suite.

Against a build whose workers poll a memif port whatever its link (before
OpenedPort::poll_only_while_link_up), the two-queue loop is how that fault was caught, with core
dumps on:
  ulimit -c unlimited; mkdir -p /tmp/cores
  echo '/tmp/cores/core.%e.%p' > /proc/sys/kernel/core_pattern
  tests/integration/memif_loop.py two-queue --build OLD_BUILD --runs 50
  gdb -batch -ex bt -ex 'info registers r9' -ex 'x/i $pc' OLD_BUILD/src/berthd /tmp/cores/core.*
Each core was in rte-worker-2, in librte_net_memif's eth_memif_rx at `testb $0x1,0x4(%r9)`
with r9 = 0x20080.
"""
import argparse
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = {
    "every-mode": ("BerthgenOverMemif",
                   "test_every_mode_comes_back_intact_on_the_tables_backend"),
    "two-queue": ("BerthgenOverTwoMemifQueues",
                  "test_flows_spread_over_both_queues_each_whole_on_one_berthd_worker"),
}
HOG_CPUS = {"none": [], "cpu0": [0], "cpu1": [1], "both": [0, 1], "heavy": [0, 0, 0, 1, 1, 1],
            "stalls": [], "heavy-stalls": [0, 0, 0, 1, 1, 1]}
# --load stalls: on each CPU, a real-time process that takes the CPU whole for STALL_MS every
# period (97 ms on CPU 0, 113 ms on CPU 1, so that the two drift past each other), as a
# hypervisor or the kernel's own work takes a CPU from a process now and then.
STALL_MS = 30
STALL_PERIODS_MS = {0: 97, 1: 113}
STALLER = """
import os, sys, time
stall, period = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3
next_stall = time.monotonic() + period * (os.getpid() % 7) / 7
while True:
    time.sleep(max(0, next_stall - time.monotonic()))
    end = time.monotonic() + stall
    while time.monotonic() < end:
        pass
    next_stall += period
"""

arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
arguments.add_argument("case", choices=sorted(CASES))
arguments.add_argument("--build", default=os.path.join(ROOT, "build"))
arguments.add_argument("--runs", type=int, default=20)
arguments.add_argument("--load", choices=sorted(HOG_CPUS), default="none")
arguments.add_argument("--strict", action="store_true")
arguments.add_argument("--no-window", action="store_true")
options = arguments.parse_args()
BUILD = os.path.abspath(options.build)

# The test module takes its three programs from the command line when it is imported.
sys.argv[1:] = [os.path.join(BUILD, "src", "berthd"), os.path.join(BUILD, "tools", "berthctl"),
                os.path.join(BUILD, "tools", "berthgen")]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import berthgen_memif_test  # noqa: E402


def describe(test):
    """What berthgen and berthd said of a run, in one line."""
    results = getattr(test, "results", None)
    if results is None:
        return "no results from berthgen"
    runs = ", ".join("%d from packet %d of queue %d%s" % (
        r["packets"], r["first"], r["queue"],
        " (due %.3f s in)" % r["seconds"] if "seconds" in r else "")
        for r in results.get("lost_runs", [])[:4])
    waits = max((q.get("longest_tx_wait_us", 0), q.get("longest_tx_wait_ended_s", 0))
                for q in results["tx_queues"])
    window = [q.get("window_waits", 0) for q in results["tx_queues"]]
    window_longest = max(q.get("longest_window_wait_us", 0) for q in results["tx_queues"])
    receiver = results.get("receiver", {})
    ended = getattr(test, "berthd_ended", None)
    return ("%slink up %d time(s); sent %d, lost %d%s; longest RX gap %.0f us (ended %.3f s in); longest TX wait "
            "%.0f us (ended %.3f s in); window waits %d, longest %.0f us; berthd's drops %s" % (
                "berthd ended (%s); " % ended if ended is not None else "",
                getattr(test, "link_ups", 0), results["sent"], results["lost"],
                " [%s]" % runs if runs else "",
                receiver.get("longest_gap_us", 0), receiver.get("longest_gap_ended_s", 0),
                waits[0], waits[1], sum(window), window_longest,
                getattr(test, "berthd_drops", {})))


def run_once(case):
    """Runs the case once; returns (passed, the test instance, the failure's text)."""
    test = getattr(berthgen_memif_test, CASES[case][0])(CASES[case][1])
    test.WINDOW = not options.no_window
    result = unittest.TestResult()
    test.run(result)
    problems = result.failures + result.errors
    return not problems, test, problems[0][1] if problems else ""


def main():
    hogs = [subprocess.Popen(["taskset", "-c", str(cpu), "sha256sum", "/dev/zero"],
                             stdout=subprocess.DEVNULL) for cpu in HOG_CPUS[options.load]]
    if options.load.endswith("stalls"):
        hogs += [subprocess.Popen(["taskset", "-c", str(cpu), "chrt", "-f", "10", sys.executable,
                                   "-c", STALLER, str(STALL_MS), str(period)])
                 for cpu, period in STALL_PERIODS_MS.items()]
    failed = 0
    try:
        for run in range(1, options.runs + 1):
            passed, test, text = run_once(options.case)
            if not options.strict:
                results = getattr(test, "results", None) or {}
                passed = (getattr(test, "berthd_ended", 0) is None and
                          getattr(test, "link_ups", 0) == 1 and
                          getattr(test, "berthgen_returncode", None) == 0 and
                          results.get("lost") == 0 and results.get("corrupt") == 0)
                text = "" if passed else "AssertionError: lost %s, corrupt %s" % (
                    results.get("lost"), results.get("corrupt"))
            failed += not passed
            reason = "" if passed else ": " + next(
                (line for line in text.splitlines() if line.startswith("AssertionError")),
                text)[:160]
            print("run %d %s%s\n  %s" % (run, "passed" if passed else "FAILED", reason,
                                         describe(test)), flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print("%s, load %s, %s: %d of %d runs failed" % (options.case, options.load, BUILD, failed,
                                                     options.runs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
