#!/usr/bin/python3
"""berthd under systemd's service protocol (sd_notify), without systemd: the test makes the
NOTIFY_SOCKET itself and reads what berthd sends to it, as PID 1 would for a Type=notify unit
with WatchdogSec.
  1. READY=1 comes once, after the workers forward: at that moment every worker has already
     received frames (net_null gives them as fast as they are polled);
  2. WATCHDOG=1 comes from the management loop every half of WATCHDOG_USEC, never faster;
  3. while a test hook holds the management loop (berthd --testing-hold-file), the pings stop,
     and they resume when it lets go;
  4. SIGTERM brings STOPPING=1, and berthd exits 0.
Without NOTIFY_SOCKET, berthd sends nothing and runs as before (every other test).

Usage: berthd_systemd_test.py BERTHD
"""
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
import unittest
import urllib.request

BERTHD = sys.argv.pop(1)
PREFIX = "berth-systemd-%d" % os.getpid()
WATCHDOG_USEC = 600_000  # pings every 300 ms

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1,2@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
metrics: { listen: "127.0.0.1:%d" }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: none }
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Notifications:
    """The datagrams berthd sends to the notify socket, each with its arrival time."""

    def __init__(self, path):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(path)
        self.socket.settimeout(0.2)
        self.messages = []  # (time.monotonic(), {key: value})
        self.lock = threading.Lock()
        self.closing = False
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while not self.closing:
            try:
                data = self.socket.recv(4096)
            except socket.timeout:
                continue
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def times(self, key):
        with self.lock:
            return [at for at, fields in self.messages if key in fields]

    def wait_for(self, key, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.times(key)
            if found:
                return found[0]
            time.sleep(0.01)
        return None

    def close(self):
        self.closing = True
        self.thread.join()
        self.socket.close()


class BerthdSystemd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-systemd-")
        cls.config = os.path.join(cls.directory, "berth.yaml")
        cls.metrics_port = free_port()
        with open(cls.config, "w") as f:
            f.write(CONFIG % (PREFIX, cls.metrics_port))
        cls.control = os.path.join(cls.directory, "berth.sock")
        cls.hold = os.path.join(cls.directory, "hold")
        cls.notifications = Notifications(os.path.join(cls.directory, "notify"))
        env = dict(os.environ, NOTIFY_SOCKET=os.path.join(cls.directory, "notify"),
                   WATCHDOG_USEC=str(WATCHDOG_USEC))
        cls.log = open(os.path.join(cls.directory, "berthd.log"), "w+")
        cls.started = time.monotonic()
        cls.process = subprocess.Popen(
            [BERTHD, "--", "--config", cls.config, "--control-socket", cls.control,
             "--testing-hold-file", cls.hold], stdout=cls.log, stderr=subprocess.STDOUT, env=env)

    @classmethod
    def tearDownClass(cls):
        if cls.process.poll() is None:
            cls.process.kill()
            cls.process.wait(timeout=30)
        cls.notifications.close()
        cls.log.close()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def received_by_worker(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                    timeout=10) as reply:
            text = reply.read().decode()
        return [int(value) for value in re.findall(
            r'^berth_worker_rx_packets_total\{worker="\d+"\} (\d+)$', text, re.M)]

    def test_1_ready_once_the_workers_forward(self):
        ready = self.notifications.wait_for("READY", 60)
        self.assertIsNotNone(ready, "no READY=1; berthd said:\n" + self.log_text())
        # Asked right after READY: each worker has polled and received already.
        received = self.received_by_worker()
        self.assertEqual(len(received), 2)
        for count in received:
            self.assertGreater(count, 0, received)
        self.assertEqual(len(self.notifications.times("READY")), 1)
        with self.notifications.lock:
            status = [fields["STATUS"] for _, fields in self.notifications.messages
                      if "READY" in fields]
        self.assertIn("forwarding", status[0])

    def test_2_watchdog_pings_at_half_the_interval(self):
        time.sleep(2.5)
        pings = self.notifications.times("WATCHDOG")
        self.assertGreaterEqual(len(pings), 4, "pings at %s" % pings)
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        half = WATCHDOG_USEC / 2e6
        # Never faster than half the interval (the clock of the arrival, not of the sending,
        # so a little slack); a loop that turns every millisecond is seldom late.
        self.assertGreaterEqual(min(gaps), half * 0.8, gaps)
        self.assertLess(statistics.median(gaps), half * 1.5, gaps)

    def test_3_a_held_management_loop_stops_the_pings(self):
        open(self.hold, "w").close()
        held_at = time.monotonic()
        # A ping already posted may still arrive; after that, none while the loop holds.
        time.sleep(3 * WATCHDOG_USEC / 1e6)
        released_at = time.monotonic()
        os.unlink(self.hold)
        during = [at for at in self.notifications.times("WATCHDOG")
                  if held_at + 0.1 < at < released_at]
        self.assertEqual(during, [], "pings while the loop was held")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if [at for at in self.notifications.times("WATCHDOG") if at > released_at]:
                break
            time.sleep(0.05)
        else:
            self.fail("no ping after the loop was let go")

    def test_4_sigterm_sends_stopping_and_exits_0(self):
        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(self.process.wait(timeout=60), 0, self.log_text())
        self.assertIsNotNone(self.notifications.wait_for("STOPPING", 5), self.log_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
