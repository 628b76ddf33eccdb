#!/usr/bin/env python3
"""What idle workers (dataplane.idle) cost and save, over memif, in one run: berthd busy-polling
against berthd sleeping after 1000 empty polls for up to 100 us (the defaults), after 100 for up
to 100 us, and after 1000 for up to 1000 us, each forwarding berthgen's 64-byte frames (1K flows,
ipip, connection tracking on) at 1 kpps, 10 kpps and 100 kpps, and at the fastest the path takes.

For each: berthgen's round-trip latency (p50, p99, p99.9: what a sleep adds to a frame that
arrives while the worker sleeps), berthd's CPU time per second over one second while berthgen
sends (what the sleeps give back to the host), and the rate received. The forwarder
runs on CPU 0 (main and worker lcore sharing it), berthgen on CPU 1, as in
perf/throughput_benchmark.py, whose processes this reuses. Settings alternate within each repeat;
the table gives each one's median.

Writes JSON and a Markdown table. Usage: idle_benchmark.py BERTHD BERTHGEN OUT.json OUT.md
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import throughput_benchmark as paths  # noqa: E402

REPEATS = int(os.environ.get("IDLE_REPEATS", "3"))
RATES = (1_000, 10_000, 100_000, 0)  # packets a second; 0: as fast as the path takes them
# (name, after_empty_polls, max_sleep_us); None: no idle section, busy-polling.
SETTINGS = (("busy-polling", None, None), ("idle 1000 polls, 100 us", 1000, 100),
            ("idle 100 polls, 100 us", 100, 100), ("idle 1000 polls, 1000 us", 1000, 1000))
FLOWS = 1024
# berthgen sends for paths.SECONDS after an EAL start-up of about a second; the CPU window opens
# this long after it starts and lasts a second.
SECONDS_BEFORE_WINDOW = 2.0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as source:
        fields = source.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def config_text(after_empty_polls, max_sleep_us):
    text = paths.config_text("ipip", 1)
    if after_empty_polls is None:
        return text
    return text.replace("dataplane:\n", "dataplane:\n  idle: { after_empty_polls: %d, "
                        "max_sleep_us: %d }\n" % (after_empty_polls, max_sleep_us), 1)


def cpu_share_while_sending(pid, share):
    """Appends berthd's CPU seconds per second over one second in the middle of berthgen's run,
    once its start-up is over and before it stops sending."""
    time.sleep(SECONDS_BEFORE_WINDOW)
    cpu, wall = cpu_seconds(pid), time.monotonic()
    time.sleep(1.0)
    share.append((cpu_seconds(pid) - cpu) / (time.monotonic() - wall))


def measure(berthd, berthgen, directory, setting, rate):
    config_path = os.path.join(directory, "berth.yaml")
    with open(config_path, "w") as out:
        out.write(config_text(*setting))
    socket_path = os.path.join(directory, "memif.sock")
    forwarder = paths.Forwarder("berthd", socket_path, config_path, berthd, 1)
    share = []
    try:
        sampler = threading.Thread(target=cpu_share_while_sending,
                                   args=(forwarder.process.pid, share))
        sampler.start()
        result = paths.run_berthgen(berthgen, socket_path, FLOWS,
                                    os.path.join(directory, "gen.json"), 1, ["--rate", str(rate)])
        sampler.join()
    finally:
        forwarder.stop()
    return {"p50_us": result["latency_ns"]["p50"] / 1e3,
            "p99_us": result["latency_ns"]["p99"] / 1e3,
            "p999_us": result["latency_ns"]["p999"] / 1e3,
            "cpu_per_s": share[0],
            "rx_mpps": result["rx_mpps"],
            "loss": result["lost"] / max(result["sent"], 1)}


def main():
    berthd, berthgen, out_json, out_md = sys.argv[1:5]
    if paths.SECONDS < SECONDS_BEFORE_WINDOW + 2:
        sys.exit("THROUGHPUT_SECONDS must be at least %g: the CPU window must fall while berthgen "
                 "sends" % (SECONDS_BEFORE_WINDOW + 2))
    directory = tempfile.mkdtemp(prefix="berth-idle-")
    runs = {(setting[0], rate): [] for setting in SETTINGS for rate in RATES}
    try:
        for _ in range(REPEATS):
            for rate in RATES:
                for name, *setting in SETTINGS:
                    runs[(name, rate)].append(measure(berthd, berthgen, directory, setting, rate))
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    rows = []
    for (name, rate), measured in runs.items():
        row = {"setting": name, "rate_pps": rate, "runs": measured}
        for key in measured[0]:
            row[key] = statistics.median(m[key] for m in measured)
        rows.append(row)
        print("%-26s %8s pps: latency p50 %7.1f us, p99 %7.1f us, p99.9 %7.1f us; berthd CPU "
              "%.2f s/s; %.3f Mpps" % (name, rate or "max", row["p50_us"], row["p99_us"],
                                        row["p999_us"], row["cpu_per_s"], row["rx_mpps"]),
              flush=True)
    with open(out_json, "w") as out:
        json.dump({"memory": paths.PAGES, "seconds": paths.SECONDS, "repeats": REPEATS,
                   "flows": FLOWS, "rows": rows}, out, indent=2)
    lines = ["| worker | rate | latency p50 | p99 | p99.9 | berthd CPU, s per s | received, Mpps |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| %s | %s | %.1f us | %.1f us | %.1f us | %.2f | %.3f |" % (
            row["setting"], format(row["rate_pps"], ",") + " pps" if row["rate_pps"] else "max",
            row["p50_us"], row["p99_us"], row["p999_us"], row["cpu_per_s"], row["rx_mpps"]))
    table = "\n".join(lines) + "\n"
    with open(out_md, "w") as out:
        out.write("64-byte frames over memif, %s, median of %d runs of %.0f s each:\n\n" % (
            paths.PAGES, REPEATS, paths.SECONDS) + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
