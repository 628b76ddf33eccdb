#!/usr/bin/env python3
"""How long berthd takes from a config reload (SIGHUP) to every worker using the new table, for
N = 10, 100 and 1000 backends at M = 65537, and from a health event to every worker using the
failed-over table. berthd runs on a net_null vdev with one worker and reports each duration in its
log line; this prints the median of a few reloads, and the health event's time.

Usage: reload_benchmark.py BERTHD OUT.json
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PREFIX = "berth-reload-bench-%d" % os.getpid()
RELOADS = 7


def config(backends, weight_of_first, health_port=None):
    text = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 65537
""" % PREFIX
    if health_port:
        text += ("    health: { type: tcp, interval: 0.1, timeout: 0.05, rise: 1, fall: 1, "
                 "address: 127.0.0.1, port: %d }\n" % health_port)
    text += "    backends:\n"
    for i in range(1, backends + 1):
        weight = weight_of_first if i == 1 else 1
        text += "      - { name: web-%d, address: 198.18.%d.%d, weight: %d }\n" % (
            i, 1 + i // 250, 1 + i % 250, weight)
    return text


class Berthd:
    def __init__(self, path):
        self.process = subprocess.Popen([sys.argv[1], "--", "--config", path,
                                         "--control-socket", path + ".sock"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True).start()

    def wait_for(self, text, after=0, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines)[after:]:
                if text in line:
                    return line
            time.sleep(0.01)
        raise RuntimeError("no %r in %s" % (text, "".join(self.lines)))

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)


def milliseconds(line):
    return float(re.search(r"([0-9.]+) ms after", line).group(1))


def main():
    out_path = sys.argv[2]
    directory = tempfile.mkdtemp(prefix="berth-reload-bench-")
    results = {"reload_ms": {}, "table_size": 65537}
    try:
        path = os.path.join(directory, "berth.yaml")
        for backends in (10, 100, 1000):
            with open(path, "w") as out:
                out.write(config(backends, 1))
            berthd = Berthd(path)
            berthd.wait_for("forwarding:")
            times = []
            for reload in range(RELOADS):
                # Each reload changes a weight, so every table is built again.
                with open(path, "w") as out:
                    out.write(config(backends, 2 + reload % 2))
                after = len(berthd.lines)
                berthd.process.send_signal(signal.SIGHUP)
                times.append(milliseconds(berthd.wait_for("after the reload began", after)))
            berthd.stop()
            results["reload_ms"][backends] = statistics.median(times)

        # A health event: the listener every backend's check points at goes away.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        with open(path, "w") as out:
            out.write(config(1000, 1, listener.getsockname()[1]))
        berthd = Berthd(path)
        berthd.wait_for("forwarding:")
        time.sleep(0.5)
        after = len(berthd.lines)
        listener.close()
        results["health_event_ms"] = milliseconds(berthd.wait_for("after the health change", after))
        berthd.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    with open(out_path, "w") as out:
        json.dump(results, out, indent=2)
    print("reload to every worker on the new tables, M=65537, median of %d:" % RELOADS)
    for backends, ms in results["reload_ms"].items():
        print("  N=%-5d %7.2f ms" % (backends, ms))
    print("health event to every worker on the failed-over table, N=1000: %.2f ms (budget 10 ms)"
          % results["health_event_ms"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
