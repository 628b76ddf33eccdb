#!/usr/bin/env python3
"""Throughput over memif, berthd against the limit of the path (issue 6): in one run, on the same
memif path and the same cores,

  berthgen -> dpdk-testpmd (io forward) -> berthgen    the I/O path's own limit
  berthgen -> berthd -> berthgen                        the load balancer on it

for 64-byte frames, 1K and 1M flows, connection tracking on, in ipip and in l2dsr mode. The
forwarder runs on CPU 0 (main and worker lcore sharing it), berthgen on CPU 1, sending as fast as
the path takes and counting what comes back verified. Each pair of runs alternates, three times;
the table gives each one's median and spread (min-max) and the ratio of the medians.

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
FLOW_COUNTS = (1024, 1 << 20)
MODES = ("ipip", "l2dsr")
FORWARDER_MAC = "02:00:00:00:00:01"
GEN_MAC = "02:00:00:00:00:02"
MEMORY, PAGES = memory_options(1280, 1024)  # two processes of 1 GiB at once
PID = os.getpid()

CONFIG = """dataplane:
  ports:
    - {{ name: p0, device: net_memif0, ipv4: 198.18.0.10, gateway_mac: "{gen_mac}" }}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: {mode}
    backends:
{backends}
"""


def config_text(mode):
    backends = ""
    for i in range(1, 101):
        mac = ', mac: "02:00:00:00:01:%02x"' % i if mode == "l2dsr" else ""
        backends += "      - { name: web-%d, address: 198.18.1.%d%s }\n" % (i, i, mac)
    return CONFIG.format(gen_mac=GEN_MAC, mode=mode, backends=backends)


def pinned(cpu):
    """The whole process on one CPU, DPDK's control threads included: left to EAL, they go to
    the CPUs its lcores do not use, which here is the other process's busy-polling core, and a
    process exiting with a thread starved there takes seconds to minutes to reap."""
    return ["taskset", "-c", str(cpu)]


def eal(prefix, cpu, vdev):
    return MEMORY + ["--no-pci", "--file-prefix", prefix, "--lcores", "0@%d,1@%d" % (cpu, cpu),
                     "--log-level", "lib.eal:error", "--vdev", vdev]


class Forwarder:
    """dpdk-testpmd io-forwarding, or berthd, on the memif server side, on CPU 0."""

    def __init__(self, kind, socket_path, config_path, berthd):
        vdev = "net_memif0,role=server,socket=%s,socket-abstract=no,mac=%s" % (socket_path,
                                                                               FORWARDER_MAC)
        self.prefix = "berth-tp-%s-%d" % (kind, PID)
        if kind == "testpmd":
            command = pinned(0) + ["dpdk-testpmd"] + eal(self.prefix, 0, vdev) + [
                "--", "--forward-mode=io", "--port-topology=loop", "--no-flush-rx", "-a",
                "--stats-period", "1"]
        else:
            command = pinned(0) + [berthd] + eal(self.prefix, 0, vdev) + [
                "--", "--config", config_path, "--control_socket", config_path + ".sock"]
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
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree("/var/run/dpdk/" + self.prefix, ignore_errors=True)


def run_berthgen(berthgen, socket_path, flows, out_path):
    vdev = "net_memif0,role=client,socket=%s,socket-abstract=no,mac=%s" % (socket_path, GEN_MAC)
    prefix = "berth-tp-gen-%d" % PID
    command = pinned(1) + [berthgen] + eal(prefix, 1, vdev) + [
        "--", "--tx-dev", "net_memif0", "--dst-mac", FORWARDER_MAC, "--vip", "198.18.100.1:80/tcp",
        "--flows", str(flows), "--duration", str(SECONDS), "--json", out_path, "--quiet"]
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
               "rows": []}
    try:
        for mode in MODES:
            config_path = os.path.join(directory, "berth-%s.yaml" % mode)
            with open(config_path, "w") as out:
                out.write(config_text(mode))
            for flows in FLOW_COUNTS:
                rates = {"testpmd": [], "berthd": []}
                lost = {"testpmd": [], "berthd": []}
                for _ in range(REPEATS):
                    for kind in ("testpmd", "berthd"):
                        socket_path = os.path.join(directory, "memif.sock")
                        forwarder = Forwarder(kind, socket_path, config_path, berthd)
                        try:
                            result = run_berthgen(berthgen, socket_path, flows,
                                                  os.path.join(directory, "gen.json"))
                        except RuntimeError as error:
                            raise RuntimeError("%s\n%s's output:\n%s" % (
                                error, kind, "".join(forwarder.lines)[-3000:])) from None
                        finally:
                            forwarder.stop()
                        rates[kind].append(result["rx_mpps"])
                        lost[kind].append(result["lost"] / max(result["sent"], 1))
                row = {"mode": mode, "flows": flows}
                for kind in ("testpmd", "berthd"):
                    row[kind] = {"median_mpps": statistics.median(rates[kind]),
                                 "min_mpps": min(rates[kind]), "max_mpps": max(rates[kind]),
                                 "runs_mpps": rates[kind],
                                 "median_loss": statistics.median(lost[kind])}
                row["ratio"] = (row["berthd"]["median_mpps"] / row["testpmd"]["median_mpps"]
                                if row["testpmd"]["median_mpps"] else 0.0)
                results["rows"].append(row)
                print("%-6s %8d flows: testpmd %.2f Mpps, berthd %.2f Mpps, ratio %.2f" % (
                    mode, flows, row["testpmd"]["median_mpps"], row["berthd"]["median_mpps"],
                    row["ratio"]), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    with open(out_json, "w") as out:
        json.dump(results, out, indent=2)
    lines = ["| mode | flows | testpmd io, Mpps (min-max) | berthd, Mpps (min-max) | berthd / testpmd |",
             "|---|---|---|---|---|"]
    for row in results["rows"]:
        cell = lambda r: "%.2f (%.2f-%.2f)" % (r["median_mpps"], r["min_mpps"], r["max_mpps"])
        lines.append("| %s | %s | %s | %s | %.2f |" % (row["mode"], format(row["flows"], ","),
                                                     cell(row["testpmd"]), cell(row["berthd"]),
                                                     row["ratio"]))
    table = "\n".join(lines) + "\n"
    with open(out_md, "w") as out:
        out.write("64-byte frames over memif, %s, median of %d runs of %.0f s each:\n\n" % (
            PAGES, REPEATS, SECONDS) + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
