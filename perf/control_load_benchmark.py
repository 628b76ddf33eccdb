#!/usr/bin/env python3
"""berthd's `announce` and `status` answer times while every client load that could stall its
management loop runs at once, for --seconds (default 15):
  - a reader of whole 655,373-slot tables (10 MB each), one after another;
  - a slow reader of such a table (4 KiB every 0.5 s);
  - 200 idle connections to the control socket, reopened as berthd evicts them;
  - 100 idle connections to the metrics port from user nobody, likewise;
  - 60 threads scraping the metrics endpoint in a loop.
Then, reloaded to 65,535 backends, for --seconds again: two clients asking `backends` in a loop
(22 MB replies), one asking `stats` (9 MB), one asking `stats` on the read-only socket as user
nobody, and one scraping (31 MB), every reply checked to cover every backend.
`announce` is asked on the read-only socket and `status` on the control socket every 20 ms.
Prints the p50, p99 and max of each, and writes them as JSON to OUT.json. Target: p99 under
100 ms on a 2-CPU VM. berthd runs on a net_null vdev, management on CPU 0 and its worker on
CPU 1; the loads share both.

Usage: control_load_benchmark.py BERTHD OUT.json [--seconds S]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "support"))
import control_load  # noqa: E402


def per_backend_replies(berthd, seconds):
    """The probe's figures while per-backend replies of 65,535 backends are asked in a loop,
    and what each load printed."""
    berthd.write_config(control_load.config_with_backends(berthd.prefix, 65535))
    if not control_load.ask(berthd.control, "reload", timeout=120)["ok"]:
        raise RuntimeError("the reload to 65,535 backends was refused")
    loads = [
        berthd.start_load("replies", "backends", berthd.control, 65535, seconds),
        berthd.start_load("replies", "backends", berthd.control, 65535, seconds),
        berthd.start_load("replies", "stats", berthd.control, 65535, seconds),
        berthd.start_load("replies", "stats", berthd.read_only, 65535, seconds, user=65534),
        berthd.start_load("replies", "scrape", berthd.url, 65535, seconds),
    ]
    probe = control_load.Probe(berthd.read_only, berthd.control, interval=0.02)
    probe.start()
    outputs = [load.communicate(timeout=seconds + 120)[0].strip() for load in loads]
    probe.stop()
    for load, output in zip(loads, outputs):
        if load.returncode != 0:
            probe.failures.append("a load failed: %s" % output)
    return probe, outputs


def main():
    berthd_path, out_path = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 15
    berthd = control_load.Berthd(berthd_path, "berth-control-bench-%d" % os.getpid())
    try:
        endpoint = berthd.url[len("http://"):-len("/metrics")]
        quiet = control_load.Probe(berthd.read_only, berthd.control, interval=0.02)
        quiet.start()
        time.sleep(min(3, seconds))
        quiet.stop()
        loads = [
            berthd.start_load("tables", berthd.control, "big", control_load.BIG_TABLE, seconds),
            berthd.start_load("slow", berthd.control, "big", seconds),
            berthd.start_load("idle", "unix", berthd.control, 200, seconds),
            berthd.start_load("idle", "tcp", endpoint, 100, seconds, user=65534),
            berthd.start_load("scrapes", berthd.url, 60, seconds),
        ]
        time.sleep(0.5)
        loaded = control_load.Probe(berthd.read_only, berthd.control, interval=0.02)
        loaded.start()
        for load in loads:
            load.wait(timeout=seconds + 60)
        loaded.stop()
        outputs = [load.stdout.read().strip() for load in loads]
        endpoints = {endpoint_name: {outcome: berthd.endpoint_count(endpoint_name, outcome)
                                     for outcome in ("answered", "evicted_idle", "refused_full",
                                                     "cut_at_deadline")}
                     for endpoint_name in ("control", "read_only", "metrics")}
        big, big_outputs = per_backend_replies(berthd, seconds)
        result = {
            "seconds": seconds,
            "idle": quiet.summary(),
            "under_load": loaded.summary(),
            "failures": loaded.failures,
            "loads": outputs,
            "endpoints": endpoints,
            "replies_of_65535_backends": big.summary(),
            "replies_of_65535_backends_failures": big.failures,
            "replies_of_65535_backends_loads": big_outputs,
        }
    finally:
        berthd.stop()
    with open(out_path, "w") as out:
        json.dump(result, out, indent=2)
    for phase in ("idle", "under_load", "replies_of_65535_backends"):
        for command, figures in result[phase].items():
            print("%-25s %-8s %5d requests: p50 %6.1f ms, p99 %6.1f ms, max %6.1f ms" % (
                phase, command, figures["requests"], figures["p50_ms"], figures["p99_ms"],
                figures["max_ms"]))
    print("failures under load: %d" % len(result["failures"]))
    tables = [line for output in outputs for line in output.splitlines() if "slot table" in line]
    print("whole tables read meanwhile: %d (%s)" % (len(tables), tables[0] if tables else "none"))
    print("endpoints: %s" % json.dumps(result["endpoints"]))
    print("with 65,535 backends: %s; failures %d" % (
        ", ".join(result["replies_of_65535_backends_loads"]),
        len(result["replies_of_65535_backends_failures"])))
    failed = result["failures"] or result["replies_of_65535_backends_failures"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
