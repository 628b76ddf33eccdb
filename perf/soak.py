#!/usr/bin/env python3
"""The soak, opt-in and not in CI: berthd with config/demo.yaml on a memif port, and
berthgen sending 20,000 flows at 100 kpps in back-to-back 30 s runs (each restart is a memif
reconnect) for MINUTES, while every 5 s the config is reloaded with new weights or a web
backend's health target goes down for 3 s and comes back. Reports packets, losses, corrupt
packets, remaps (flows that changed backend within a run: those of a flapped backend, and those
the reloaded weights moved), and berthd's resident memory after the first run and at the end.

Usage: soak.py BERTHD BERTHCTL BERTHGEN OUT.json [MINUTES]   (default 10)
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from memif_demo import (BERTHD_MAC, GEN_MAC, PIN_BERTHD, PIN_BERTHGEN,  # noqa: E402
                        HealthTarget)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUN_SECONDS = 30
EVENT_SECONDS = 5
PREFIX = "berth-soak-%d" % os.getpid()


def resident_bytes(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Soak:
    def __init__(self, berthd, berthctl, berthgen):
        self.berthd_path, self.berthctl_path, self.berthgen_path = berthd, berthctl, berthgen
        self.directory = tempfile.mkdtemp(prefix="berth-soak-")
        self.memif = os.path.join(self.directory, "memif.sock")
        self.control = os.path.join(self.directory, "berth.sock")
        self.config = os.path.join(self.directory, "berth.yaml")
        with open(os.path.join(ROOT, "config", "demo.yaml")) as source:
            self.template = source.read().replace('"berth-demo"', '"%s"' % PREFIX)
        self.write_config({})
        self.targets = {"web-%d" % i: HealthTarget(19000 + i) for i in range(1, 9)}
        self.events = {"reloads": 0, "flaps": 0, "reload_failures": 0}
        self.stop = threading.Event()
        self.berthd = None

    def write_config(self, weights):
        text = self.template
        for name, weight in weights.items():
            text = re.sub(r"(name: %s, address: [0-9.]+, weight: )1" % name,
                          r"\g<1>%d" % weight, text)
        with open(self.config, "w") as out:
            out.write(text)

    def berthctl(self, *command):
        return subprocess.run([self.berthctl_path, *command, "--socket", self.control],
                              capture_output=True, text=True, timeout=30)

    def start(self):
        for target in self.targets.values():
            target.start()
        vdev = "net_memif0,role=server,socket=%s,socket-abstract=no,mac=%s" % (self.memif,
                                                                               BERTHD_MAC)
        self.berthd = subprocess.Popen(
            PIN_BERTHD + [self.berthd_path, "--vdev", vdev, "--", "--config", self.config,
                          "--control-socket", self.control],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while self.berthctl("status").returncode != 0:
            if time.monotonic() > deadline or self.berthd.poll() is not None:
                raise RuntimeError("berthd did not start")
            time.sleep(0.2)

    def churn(self):
        """Every EVENT_SECONDS, a reload with new weights or a health flap, in turn."""
        rng = random.Random(7)
        turn = 0
        while not self.stop.wait(EVENT_SECONDS):
            if turn % 2 == 0:
                self.write_config({"web-%d" % i: rng.randint(1, 3) for i in range(1, 9)})
                if self.berthctl("reload").returncode == 0:
                    self.events["reloads"] += 1
                else:
                    self.events["reload_failures"] += 1
            else:
                target = self.targets["web-%d" % rng.randint(1, 8)]
                target.stop()
                self.stop.wait(3)
                target.start()
                self.events["flaps"] += 1
            turn += 1

    def berthgen(self, out_path):
        vdev = "net_memif0,role=client,socket=%s,socket-abstract=no,mac=%s" % (self.memif,
                                                                               GEN_MAC)
        command = PIN_BERTHGEN + [
            self.berthgen_path, "--no-huge", "-m", "512", "--no-pci", "--file-prefix",
            PREFIX + "-gen", "--lcores", "0@1,1@1", "--log-level", "lib.eal:error",
            "--vdev", vdev, "--", "--tx-dev", "net_memif0", "--dst-mac", BERTHD_MAC,
            "--vip", "198.18.100.1:80/tcp", "--vip", "198.18.100.2:53/udp", "--flows", "20000",
            "--gue-port", "6080", "--rate", "100000", "--duration", str(RUN_SECONDS),
            "--json", out_path, "--quiet"]
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=RUN_SECONDS + 120)
        if result.returncode != 0:
            raise RuntimeError("berthgen failed:\n" + result.stdout + result.stderr)
        with open(out_path) as source:
            return json.load(source)

    def run(self, minutes):
        self.start()
        churn = threading.Thread(target=self.churn, daemon=True)
        churn.start()
        totals = {"runs": 0, "sent": 0, "verified": 0, "lost": 0, "corrupt": 0, "duplicates": 0,
                  "flows_moved": 0}
        resident = []
        end = time.monotonic() + minutes * 60
        started = time.monotonic()
        while time.monotonic() < end:
            result = self.berthgen(os.path.join(self.directory, "run.json"))
            totals["runs"] += 1
            for key in ("sent", "verified", "lost", "corrupt", "duplicates", "flows_moved"):
                totals[key] += result[key]
            resident.append(resident_bytes(self.berthd.pid))
            print("  run %d: sent %d, lost %d, corrupt %d, flows moved %d; berthd %.1f MiB "
                  "resident" % (totals["runs"], result["sent"], result["lost"], result["corrupt"],
                                result["flows_moved"], resident[-1] / 2**20), flush=True)
            if self.berthd.poll() is not None:
                raise RuntimeError("berthd ended: %s" % self.berthd.returncode)
        self.stop.set()
        churn.join(timeout=30)
        counters = json.loads(self.berthctl("stats", "--json").stdout)["stats"]["counters"]
        return {"minutes": (time.monotonic() - started) / 60, **totals, **self.events,
                "berthd_up": self.berthd.poll() is None,
                "resident_bytes_first": resident[0], "resident_bytes_last": resident[-1],
                "berthd_drops": {k: v for k, v in counters.items()
                                 if k.startswith(("parse_", "drop_")) and v}}

    def close(self):
        self.stop.set()
        if self.berthd is not None and self.berthd.poll() is None:
            self.berthd.send_signal(signal.SIGINT)
            try:
                self.berthd.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.berthd.kill()
        for target in self.targets.values():
            target.stop()
        for prefix in (PREFIX, PREFIX + "-gen"):
            shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def main():
    berthd, berthctl, berthgen, out_json = sys.argv[1:5]
    minutes = float(sys.argv[5]) if len(sys.argv) > 5 else 10
    soak = Soak(berthd, berthctl, berthgen)
    try:
        summary = soak.run(minutes)
    finally:
        soak.close()
    with open(out_json, "w") as out:
        json.dump(summary, out, indent=2)
    print(json.dumps(summary, indent=2))
    return 0 if summary["berthd_up"] and summary["corrupt"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
