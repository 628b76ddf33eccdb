#!/usr/bin/env python3
"""Throughput over memif, berthd against the limit of the path: in one run, on the same
memif path and the same cores,

  berthgen -> dpdk-testpmd (io forward) -> berthgen    the I/O path's own limit
  berthgen -> berthd -> berthgen                        the load balancer on it

for 64-byte frames, 1K and 1M flows, connection tracking on, in ipip and in l2dsr mode. The
forwarder runs on CPU 0 (main and worker lcore sharing it), berthgen on CPU 1, sending as fast as
the path takes and counting what comes back verified. Each pair of runs alternates, three times;
the table gives each one's median and spread (min-max) and the ratio of the medians.

Scaling: THROUGHPUT_WORKERS="1 2 4 8" runs each case with N forwarding workers (berthd's port
with `queues: N`, testpmd with N queues and cores) on CPUs 0..N-1 and berthgen with `--txq N`
sending lcores on the next N CPUs (and a receiver on one more where the machine has it), one memif
ring per worker. A count whose CPUs the machine lacks is skipped. The default is 1.

THROUGHPUT_MODES and THROUGHPUT_FLOWS narrow the cases (default "ipip l2dsr" and "1024 1048576"),
THROUGHPUT_EAL adds EAL options to every process (such as -d DRIVER_DIR where DPDK is not
installed), and THROUGHPUT_NO_HUGE=1 keeps to 4 KiB pages; perf/scaling.py sets them.

Writes JSON and a Markdown table. Usage: throughput_benchmark.py BERTHD BERTHGEN OUT.json OUT.md
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpdk_memory import memory_options  # noqa: E402

REPEATS = int(os.environ.get("THROUGHPUT_REPEATS", "3"))
SECONDS = float(os.environ.get("THROUGHPUT_SECONDS", "5"))
FLOW_COUNTS = [int(n) for n in os.environ.get("THROUGHPUT_FLOWS", "1024 1048576").split()]
MODES = os.environ.get("THROUGHPUT_MODES", "ipip l2dsr").split()
WORKERS = [int(n) for n in os.environ.get("THROUGHPUT_WORKERS", "1").split()]
EXTRA_EAL = os.environ.get("THROUGHPUT_EAL", "").split()
FORWARDER_MAC = "02:00:00:00:00:01"
GEN_MAC = "02:00:00:00:00:02"
if os.environ.get("THROUGHPUT_NO_HUGE") == "1":
    MEMORY, PAGES = ["--no-huge", "-m", "1024"], "4 KiB pages (asked for)"
else:
    MEMORY, PAGES = memory_options(1280, 1024)  # two processes of 1 GiB at once
PID = os.getpid()

CONFIG = """dataplane:
  ports:
    - {{ name: p0, device: net_memif0, ipv4: 198.18.0.10, gateway_mac: "{gen_mac}"{queues} }}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: {mode}
    backends:
{backends}
"""


def config_text(mode, workers):
    backends = ""
    for i in range(1, 101):
        mac = ', mac: "02:00:00:00:01:%02x"' % i if mode == "l2dsr" else ""
        backends += "      - { name: web-%d, address: 198.18.1.%d%s }\n" % (i, i, mac)
    queues = ", queues: %d" % workers if workers > 1 else ""
    return CONFIG.format(gen_mac=GEN_MAC, mode=mode, backends=backends, queues=queues)


def pinned(cpus):
    """The whole process on its own CPUs, DPDK's control threads included: left to EAL, they go
    to the CPUs its lcores do not use, which here is the other process's busy-polling core, and a
    process exiting with a thread starved there takes seconds to minutes to reap."""
    return ["taskset", "-c", ",".join(str(cpu) for cpu in sorted(set(cpus)))]


def eal(prefix, cpus, vdev):
    """Lcore 0 (main) shares the first CPU with lcore 1; lcore i+1 runs on cpus[i]."""
    lcores = ["0@%d" % cpus[0]] + ["%d@%d" % (i + 1, cpu) for i, cpu in enumerate(cpus)]
    return MEMORY + EXTRA_EAL + ["--no-pci", "--file-prefix", prefix, "--lcores", ",".join(lcores),
                                 "--log-level", "lib.eal:error", "--vdev", vdev]


def forwarder_cpus(workers):
    return list(range(workers))


def berthgen_cpus(workers):
    """A sender per worker on the CPUs after the forwarder's, and a receiver on one more where
    the machine has it; without, berthgen's first sender also receives."""
    cpus = list(range(workers, 2 * workers))
    if 2 * workers < os.cpu_count():
        cpus.append(2 * workers)
    return cpus


class Forwarder:
    """dpdk-testpmd io-forwarding, or berthd, on the memif server side, on CPU 0."""

    def __init__(self, kind, socket_path, config_path, berthd, workers):
        vdev = "net_memif0,role=server,socket=%s,socket-abstract=no,mac=%s" % (socket_path,
                                                                               FORWARDER_MAC)
        self.prefix = "berth-tp-%s-%d" % (kind, PID)
        self.kind = kind
        # A forwarder that had to be killed leaves its listening socket behind.
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        cpus = forwarder_cpus(workers)
        if kind == "testpmd":
            command = pinned(cpus) + ["dpdk-testpmd"] + eal(self.prefix, cpus, vdev) + [
                "--", "--forward-mode=io", "--port-topology=loop", "--no-flush-rx", "-a",
                "--stats-period", "1", "--rxq=%d" % workers, "--txq=%d" % workers,
                "--nb-cores=%d" % workers, "--total-num-mbufs=32768"]
        else:
            command = pinned(cpus) + [berthd] + eal(self.prefix, cpus, vdev) + [
                "--", "--config", config_path, "--control-socket", config_path + ".sock"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True).start()
        ready = "forwards packets on" if kind == "testpmd" else "berthd: forwarding:"
        deadline = time.monotonic() + 30
        while not any(ready in line for line in list(self.lines)):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("%s did not start:\n%s" % (kind, "".join(self.lines)))
            time.sleep(0.05)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        started = time.monotonic()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            print("%s did not stop within 30 s of SIGINT and was killed" % self.kind, flush=True)
        if time.monotonic() - started > 5:
            print("%s took %.1f s to stop" % (self.kind, time.monotonic() - started), flush=True)
        shutil.rmtree("/var/run/dpdk/" + self.prefix, ignore_errors=True)


def run_berthgen(berthgen, socket_path, flows, out_path, workers, options=()):
    """berthgen sending `flows` to the forwarder for SECONDS, with `options` added."""
    vdev = "net_memif0,role=client,socket=%s,socket-abstract=no,mac=%s" % (socket_path, GEN_MAC)
    prefix = "berth-tp-gen-%d" % PID
    cpus = berthgen_cpus(workers)
    command = pinned(cpus) + [berthgen] + eal(prefix, cpus, vdev) + [
        "--", "--tx-dev", "net_memif0", "--dst-mac", FORWARDER_MAC, "--vip", "198.18.100.1:80/tcp",
        "--flows", str(flows), "--duration", str(SECONDS), "--json", out_path, "--quiet",
        "--txq", str(workers)] + list(options)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS + 120)
        if result.returncode != 0:
            raise RuntimeError("berthgen failed:\n%s%s" % (result.stdout, result.stderr))
    finally:
        shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)
    with open(out_path) as source:
        return json.load(source)


def main():
    berthd, berthgen, out_json, out_md = sys.argv[1:5]
    directory = tempfile.mkdtemp(prefix="berth-throughput-")
    results = {"memory": PAGES, "seconds": SECONDS, "repeats": REPEATS, "frame_bytes": 64,
               "cpus": os.cpu_count(), "rows": [], "skipped_workers": []}
    cases = []
    for workers in WORKERS:
        if 2 * workers > os.cpu_count():
            print("skipping %d worker(s): it takes %d CPUs, this machine has %d" % (
                workers, 2 * workers, os.cpu_count()), flush=True)
            results["skipped_workers"].append(workers)
            continue
        cases += [(workers, mode, flows) for mode in MODES for flows in FLOW_COUNTS]
    try:
        for workers, mode, flows in cases:
            config_path = os.path.join(directory, "berth-%s-%d.yaml" % (mode, workers))
            with open(config_path, "w") as out:
                out.write(config_text(mode, workers))
            rates = {"testpmd": [], "berthd": []}
            lost = {"testpmd": [], "berthd": []}
            for _ in range(REPEATS):
                for kind in ("testpmd", "berthd"):
                    socket_path = os.path.join(directory, "memif.sock")
                    forwarder = Forwarder(kind, socket_path, config_path, berthd, workers)
                    try:
                        result = run_berthgen(berthgen, socket_path, flows,
                                              os.path.join(directory, "gen.json"), workers)
                    except RuntimeError as error:
                        raise RuntimeError("%s\n%s's output:\n%s" % (
                            error, kind, "".join(forwarder.lines)[-3000:])) from None
                    finally:
                        forwarder.stop()
                    rates[kind].append(result["rx_mpps"])
                    lost[kind].append(result["lost"] / max(result["sent"], 1))
            row = {"workers": workers, "mode": mode, "flows": flows}
            for kind in ("testpmd", "berthd"):
                row[kind] = {"median_mpps": statistics.median(rates[kind]),
                             "min_mpps": min(rates[kind]), "max_mpps": max(rates[kind]),
                             "runs_mpps": rates[kind],
                             "median_loss": statistics.median(lost[kind])}
            row["ratio"] = (row["berthd"]["median_mpps"] / row["testpmd"]["median_mpps"]
                            if row["testpmd"]["median_mpps"] else 0.0)
            results["rows"].append(row)
            print("%d worker(s) %-6s %8d flows: testpmd %.2f Mpps, berthd %.2f Mpps, "
                  "ratio %.2f" % (workers, mode, flows, row["testpmd"]["median_mpps"],
                                  row["berthd"]["median_mpps"], row["ratio"]), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    with open(out_json, "w") as out:
        json.dump(results, out, indent=2)
    lines = ["| workers | mode | flows | testpmd io, Mpps (min-max) | berthd, Mpps (min-max) "
             "| berthd / testpmd |", "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        cell = lambda r: "%.2f (%.2f-%.2f)" % (r["median_mpps"], r["min_mpps"], r["max_mpps"])
        lines.append("| %d | %s | %s | %s | %s | %.2f |" % (
            row["workers"], row["mode"], format(row["flows"], ","), cell(row["testpmd"]),
            cell(row["berthd"]), row["ratio"]))
    table = "\n".join(lines) + "\n"
    with open(out_md, "w") as out:
        out.write("64-byte frames over memif, %s, median of %d runs of %.0f s each:\n\n" % (
            PAGES, REPEATS, SECONDS) + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
