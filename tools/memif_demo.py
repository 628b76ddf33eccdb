#!/usr/bin/env python3
"""berth's live demo on a machine without a NIC (README's run command): berthd with
config/demo.yaml on a memif port, berthgen on the other end sending many flows to its two VIPs,
and a real health check taking a backend out and back:

  1. before: every backend healthy;
  2. during: web-3's health target (a listener on 127.0.0.1) stops, berthd's tcp check fails it;
  3. after:  the listener is back, web-3 rejoins, and new flows arrive beside the old ones.

It prints per-backend shares in each phase, how many established flows changed backend (only
those that were on web-3 should), and loss and packets per second, then cleans up everything it
started.

Usage: memif_demo.py --berthd PATH --berthctl PATH --berthgen PATH --config FILE
"""
import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BERTHD_MAC = "02:00:00:00:00:01"
GEN_MAC = "02:00:00:00:00:02"
VIPS = ["198.18.100.1:80/tcp", "198.18.100.2:53/udp"]
FLOWS = 20000
NEW_FLOWS = 4000  # added in the last phase
RATE = 1_000_000
SECONDS = 4
RING_SLOTS = 4096
FAILED = "web-3"
# berthd's worker alone on CPU 0 (config/demo.yaml puts its management lcore on CPU 1, off the
# worker's CPU, as docs/nics.md says), berthgen wholly on CPU 1. The pins keep DPDK's control
# threads with their process's lcores: left to EAL, they go to the CPUs its lcores do not use,
# and a process exiting with a thread starved on another's busy-polling CPU can take minutes to
# reap. berthd's control threads follow its main lcore to CPU 1.
PIN_BERTHD = ["taskset", "-c", "0"]
PIN_BERTHGEN = ["taskset", "-c", "1"]


class HealthTarget:
    """A TCP listener on 127.0.0.1 that accepts and closes: what berthd's tcp check probes."""

    def __init__(self, port):
        self.port = port
        self.listener = None

    def start(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(64)
        listener = self.listener

        def serve():
            while True:
                try:
                    connection, _ = listener.accept()
                    connection.close()
                except OSError:
                    return
        threading.Thread(target=serve, daemon=True).start()

    def stop(self):
        if self.listener is not None:
            self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None


class Demo:
    def __init__(self, args):
        self.args = args
        self.directory = tempfile.mkdtemp(prefix="berth-demo-")
        self.memif = os.path.join(self.directory, "memif.sock")
        self.control = os.path.join(self.directory, "berth.sock")
        self.targets = {"web-%d" % i: HealthTarget(19000 + i) for i in range(1, 9)}
        self.berthd = None
        self.lines = []

    def berthctl(self, *command):
        result = subprocess.run([self.args.berthctl, *command, "--json", "--socket", self.control],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError("berthctl %s: %s%s" % (" ".join(command), result.stderr,
                                                      self.berthd_exit()))
        return json.loads(result.stdout)

    def berthd_exit(self):
        """How berthd ended, with its last lines, when it is no longer running."""
        if self.berthd is None or self.berthd.poll() is None:
            return ""
        code = self.berthd.returncode
        how = ("killed by %s" % signal.Signals(-code).name) if code < 0 else "exit %d" % code
        return "berthd ended (%s); its last lines:\n%s" % (how, "".join(self.lines[-30:]))

    def health(self):
        return {b["name"]: b["health"] for b in self.berthctl("backends")["backends"]
                if b["service"] == "web"}

    def wait_for_health(self, name, state, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(s == state for n, s in self.health().items() if name in (None, n)):
                return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError("%s not %s after %d s:\n%s" % (name or "backends", state, timeout,
                                                          "".join(self.lines[-20:])))

    def start_berthd(self):
        # Rings of RING_SLOTS (rsize), with berthgen's --window as large: what berthd sends back
        # always fits the ring towards berthgen, however long either process waits for its CPU.
        vdev = "net_memif0,role=server,socket=%s,socket-abstract=no,mac=%s,rsize=%d" % (
            self.memif, BERTHD_MAC, RING_SLOTS.bit_length() - 1)
        self.berthd = subprocess.Popen(
            PIN_BERTHD + [self.args.berthd, "--vdev", vdev, "--", "--config", self.args.config,
             "--control-socket", self.control],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: self.lines.extend(self.berthd.stderr), daemon=True).start()
        deadline = time.monotonic() + 30
        while not any("berthd: forwarding:" in l for l in list(self.lines)):
            if time.monotonic() > deadline or self.berthd.poll() is not None:
                raise RuntimeError("berthd did not start:\n" + "".join(self.lines))
            time.sleep(0.05)
        # The demo's config is a model of one: what berthd warns about it at start (a worker on
        # the management lcore's CPU, a field of the file) fails the demo. What it says of the
        # memif driver (no MTU to set) is the driver's.
        warnings = [line for line in list(self.lines)
                    if "warning:" in line and ("shares CPU" in line or self.args.config in line)]
        if warnings:
            raise RuntimeError("berthd warned about the demo's config:\n" + "".join(warnings))

    def berthgen(self, phase, flows):
        results = os.path.join(self.directory, phase + ".json")
        backends = os.path.join(self.directory, phase + ".flows")
        vdev = "net_memif0,role=client,socket=%s,socket-abstract=no,mac=%s,rsize=%d" % (
            self.memif, GEN_MAC, RING_SLOTS.bit_length() - 1)
        command = PIN_BERTHGEN + [
                   self.args.berthgen, "--no-huge", "-m", "512", "--no-pci", "--file-prefix",
                   "berth-demo-gen", "--lcores", "0@1,1@1", "--log-level", "lib.eal:error",
                   "--vdev", vdev, "--", "--tx-dev", "net_memif0", "--dst-mac", BERTHD_MAC,
                   "--flows", str(flows), "--rate", str(RATE), "--duration", str(SECONDS),
                   "--config", self.args.config, "--json", results, "--flow-backends", backends,
                   "--window", str(RING_SLOTS), "--quiet"]
        for vip in VIPS:
            command += ["--vip", vip]
        result = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS + 60)
        shutil.rmtree("/var/run/dpdk/berth-demo-gen", ignore_errors=True)
        if result.returncode != 0:
            raise RuntimeError("berthgen failed:\n" + result.stdout + result.stderr)
        with open(results) as source, open(backends) as lines:
            return json.load(source), [line.strip() for line in lines]

    def run(self):
        print("berth demo: berthd (%s) on a memif port, berthgen on the other end: %d flows to "
              "%s at %.1f Mpps" % (self.args.config, FLOWS, " and ".join(VIPS), RATE / 1e6))
        for target in self.targets.values():
            target.start()
        self.start_berthd()
        self.wait_for_health(None, "healthy")
        names = self.names()
        print("  every web backend healthy (tcp checks to 127.0.0.1:19001-19008)\n")

        phases = collections.OrderedDict()
        phases["before"] = self.berthgen("before", FLOWS)
        self.targets[FAILED].stop()
        stopped = time.monotonic()
        down = self.wait_for_health(FAILED, "unhealthy")
        print("  %s's health target stopped: berthd marked it unhealthy %.1f s later" % (
            FAILED, down - stopped))
        phases["during"] = self.berthgen("during", FLOWS)
        self.targets[FAILED].start()
        restarted = time.monotonic()
        up = self.wait_for_health(FAILED, "healthy")
        print("  %s's health target back: healthy again %.1f s later\n" % (FAILED, up - restarted))
        phases["after"] = self.berthgen("after", FLOWS + NEW_FLOWS)

        return self.report(phases, names)

    def names(self):
        """Backend address -> "service/name", as berthd reports its backends."""
        return {b["address"]: "%s/%s" % (b["service"], b["name"])
                for b in self.berthctl("backends")["backends"]}

    def report(self, phases, names):
        before, during, after = (phases[p][1] for p in ("before", "during", "after"))
        failed_address = next(a for a, n in names.items() if n == "web/" + FAILED)
        print("%-22s %12s %12s %12s" % ("backend", "before", "during", "after"))
        shares = {}
        for phase, (results, _) in phases.items():
            total = sum(b["packets"] for b in results["backends"]) or 1
            for backend in results["backends"]:
                name = names.get(backend["backend"], backend["backend"])
                shares.setdefault(name, {})[phase] = 100.0 * backend["packets"] / total
        for name in sorted(shares, key=lambda n: (n.split("/")[0] != "web", n)):
            row = shares[name]
            print("%-22s %11.2f%% %11.2f%% %11.2f%%" % (
                name, row.get("before", 0), row.get("during", 0), row.get("after", 0)))

        moved = [f for f in range(FLOWS) if before[f] != "-" and during[f] != before[f]]
        from_failed = sum(1 for f in moved if before[f] == failed_address)
        on_failed = sum(1 for f in range(FLOWS) if before[f] == failed_address)
        moved_back = sum(1 for f in range(FLOWS) if during[f] != "-" and after[f] != during[f])
        new_on_failed = sum(1 for f in range(FLOWS, FLOWS + NEW_FLOWS)
                            if after[f] == failed_address)
        print("\nestablished flows that changed backend when %s failed: %d of %d, %d of them from "
              "%s (which had %d)" % (FAILED, len(moved), FLOWS, from_failed, FAILED, on_failed))
        print("established flows that moved again when it came back: %d (connection tracking "
              "keeps them where they went)" % moved_back)
        print("new flows after it came back: %d, %d of them to %s" % (NEW_FLOWS, new_on_failed,
                                                                      FAILED))
        print("\n%-10s %10s %10s %8s %10s %10s %12s" % ("phase", "sent", "verified", "lost",
                                                       "tx Mpps", "rx Mpps", "latency p99"))
        for phase, (results, _) in phases.items():
            print("%-10s %10d %10d %8d %10.3f %10.3f %10.1f us" % (
                phase, results["sent"], results["verified"], results["lost"], results["tx_mpps"],
                results["rx_mpps"], results["latency_ns"]["p99"] / 1e3))
        counters = self.berthctl("stats")["stats"]["counters"]
        drops = {k: v for k, v in counters.items() if k.startswith(("parse_", "drop_")) and v}
        print("berthd's drops: %s" % (", ".join("%s %d" % kv for kv in sorted(drops.items()))
                                      or "none"))
        table = [phases[p][0]["table"] for p in phases]
        print("\nflows on the backend berth's table picks, checked by berthgen from the same "
              "config: before %d of %d" % (table[0]["match"], FLOWS))
        ok = from_failed == len(moved) == on_failed and moved_back == 0 and all(
            phases[p][0]["lost"] == 0 and phases[p][0]["corrupt"] == 0 for p in phases)
        print("result: %s" % ("as expected: only the failed backend's flows moved, none lost"
                              if ok else "NOT as expected (see above)"))
        return ok

    def close(self):
        for target in self.targets.values():
            target.stop()
        if self.berthd is not None and self.berthd.poll() is None:
            asked = time.monotonic()
            self.berthd.send_signal(signal.SIGINT)
            try:
                self.berthd.wait(timeout=15)
            except subprocess.TimeoutExpired:
                print("berthd did not stop within 15 s of SIGINT; killed", file=sys.stderr)
                self.berthd.kill()
                self.berthd.wait()
            if time.monotonic() - asked > 2:
                print("berthd took %.1f s to stop" % (time.monotonic() - asked), file=sys.stderr)
        for prefix in ("berth-demo", "berth-demo-gen"):
            shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--berthd", required=True)
    parser.add_argument("--berthctl", required=True)
    parser.add_argument("--berthgen", required=True)
    parser.add_argument("--config", required=True)
    demo = Demo(parser.parse_args())
    try:
        ok = demo.run()
    finally:
        demo.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
