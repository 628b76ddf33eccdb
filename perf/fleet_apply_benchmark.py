#!/usr/bin/env python3
"""How long a fleet version takes from `berthctl fleet push` to every instance, at N=100 and
N=1,000 backends (M=65537): three berthd instances with idle workers and a three-member etcd over
TLS on this machine (tests/support/fleet_cluster.py). Each round pushes a version that changes
every backend's weight, so each instance parses, validates and rebuilds the table in full.

Per N, the median and the largest over the rounds of:
- push: the berthctl process, start to exit (validate, stage the pieces, commit, retention);
- commit to all applied: from the commit (the manifest's pushed_at_ms) to the last instance's
  applied_at_ms (its report in etcd: the version built off the loop and its snapshot published);
- push to all applied: from berthctl's start to the last instance's applied_at_ms.
All three timestamps come from this machine's clock.

Writes JSON and a Markdown table. Usage: fleet_apply_benchmark.py BERTHD BERTHCTL OUT.json OUT.md
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "support"))
from fleet_cluster import FleetCluster, version_text  # noqa: E402

ROUNDS = int(os.environ.get("FLEET_ROUNDS", "10"))
SIZES = (100, 1000)


def wait_all_applied(cluster, version, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        fleet = cluster.fleet_status()
        applied = [i for i in fleet["instances"] if i["version"] == version]
        if len(applied) == len(cluster.berthds):
            return fleet, applied
        if time.monotonic() > deadline:
            raise AssertionError("version %d not applied everywhere: %s" % (version, fleet))
        time.sleep(0.05)


def measure(cluster, backends, rounds):
    rows = []
    for round_ in range(rounds):
        text = version_text(backends, weight_of=lambda i, r=round_: 1 + (i + r) % 3)
        start_ms = time.time() * 1000
        result = cluster.push(text, name="bench-%d.yaml" % backends)
        push_ms = time.time() * 1000 - start_ms
        if result.returncode != 0:
            raise AssertionError(result.stderr)
        version = int(result.stdout.split("as fleet version ")[1].split()[0])
        fleet, applied = wait_all_applied(cluster, version)
        last_applied_ms = max(i["applied_at_ms"] for i in applied)
        rows.append({"push_ms": push_ms,
                     "commit_to_all_applied_ms": last_applied_ms - fleet["pushed_at_ms"],
                     "push_to_all_applied_ms": last_applied_ms - start_ms,
                     "bytes": len(text)})
    return rows


def main():
    berthd, berthctl, out_json, out_md = sys.argv[1:5]
    cluster = FleetCluster(berthd, berthctl, tls=True)
    results = {}
    try:
        for i in range(3):
            cluster.start_berthd(i)
        for backends in SIZES:
            measure(cluster, backends, 1)  # warm: the first build of this size
            rows = measure(cluster, backends, ROUNDS)
            summary = {"backends": backends, "rounds": len(rows), "bytes": rows[0]["bytes"]}
            for key in ("push_ms", "commit_to_all_applied_ms", "push_to_all_applied_ms"):
                values = [r[key] for r in rows]
                summary[key] = {"median": statistics.median(values), "max": max(values)}
            results[str(backends)] = summary
    finally:
        cluster.close()
    with open(out_json, "w") as out:
        json.dump({"instances": 3, "etcd_members": 3, "tls": True, "results": results}, out,
                  indent=2)
    lines = ["| backends | version size | push (berthctl) | commit to all 3 applied | "
             "push to all 3 applied |", "|---|---|---|---|---|"]
    for summary in results.values():
        lines.append("| %d | %.1f KiB | %.0f ms (max %.0f) | %.0f ms (max %.0f) | "
                     "%.0f ms (max %.0f) |" % (
                         summary["backends"], summary["bytes"] / 1024,
                         summary["push_ms"]["median"], summary["push_ms"]["max"],
                         summary["commit_to_all_applied_ms"]["median"],
                         summary["commit_to_all_applied_ms"]["max"],
                         summary["push_to_all_applied_ms"]["median"],
                         summary["push_to_all_applied_ms"]["max"]))
    with open(out_md, "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
