#!/usr/bin/python3
"""Drains made with berthctl survive a restart of berthd: they are kept in a small file written
whole, restored at start (and logged), dropped for backends a reload removes, and a file that
cannot be read is set aside with a warning while berthd starts all the same. berthd runs on a
net_null vdev, so no traffic is needed.

Usage: berthd_drain_state_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import interrupt_and_wait, wait_for_line  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
PREFIX = "berth-drain-state-%d" % os.getpid()

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
"""


def config(names):
    return CONFIG % PREFIX + "".join(
        "      - { name: %s, address: 198.18.1.%d }\n" % (name, i + 1) for i, name in enumerate(names))


class BerthdDrainState(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="berthd-drain-state-")
        self.path = os.path.join(self.directory, "berth.yaml")
        self.socket = os.path.join(self.directory, "berth.sock")
        self.state = os.path.join(self.directory, "berth-drains.json")
        self.process = None
        self.write(config(["web-1", "web-2", "web-3"]))

    def tearDown(self):
        self.stop()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def write(self, text):
        with open(self.path + ".new", "w") as out:
            out.write(text)
        os.replace(self.path + ".new", self.path)

    def start(self):
        # The drain state's default place: beside the control socket.
        self.process = subprocess.Popen([BERTHD, "--", "--config", self.path, "--control-socket",
                                         self.socket], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True).start()
        self.wait_for("forwarding:")

    def stop(self):
        if self.process is not None:
            interrupt_and_wait(self.process)
            self.process.stderr.close()

    def wait_for(self, text, after=0):
        return wait_for_line(self.lines, self.process, text, after)

    def berthctl(self, *args):
        result = subprocess.run([BERTHCTL, *args, "--socket", self.socket], capture_output=True,
                                text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def drained(self):
        return json.loads(self.berthctl("status", "--json"))["drained"]

    def file_drains(self, timeout=10):
        """The drains in the state file once it exists (it is written off berthd's loop)."""
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.state) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(self.state) as state:
            return json.load(state)["drains"]

    def test_drains_survive_a_restart_and_a_reload_drops_removed_backends(self):
        self.start()
        self.berthctl("drain", "web-2")
        self.berthctl("drain", "web-3")
        self.berthctl("undrain", "web-3")
        status = json.loads(self.berthctl("status", "--json"))
        self.assertEqual(status["drain_state"], {"path": self.state, "last_write_error": ""})
        self.stop()
        self.assertEqual(self.file_drains(), {"web": ["web-2"]})

        self.start()  # as a supervisor would, after a crash or an upgrade
        self.assertIn("drains restored from %s: web/web-2" % self.state, "".join(self.lines))
        self.assertEqual(self.drained(), ["web/web-2"])
        web2 = [l.split() for l in self.berthctl("table", "--service", "web").splitlines()
                if l.strip().startswith("web-2 ")][0]
        # Slots none, the configured weight kept for the undrain, none in use.
        self.assertEqual((web2[1], " ".join(web2[-6:])), ("0", "weight 1, in use 0 (drained)"))

        after = len(self.lines)
        self.write(config(["web-1", "web-3"]))
        self.process.send_signal(signal.SIGHUP)
        self.assertIn("applied", self.wait_for("reload of", after))
        self.assertEqual(self.drained(), [])
        deadline = time.monotonic() + 10
        while self.file_drains() != {} and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.file_drains(), {})

    def test_an_unreadable_file_is_set_aside_and_berthd_starts(self):
        with open(self.state, "w") as state:
            state.write("{\"version\": 7}")
        self.start()
        self.assertIn("warning: drains not restored: %s: version 7" % self.state, "".join(self.lines))
        self.assertTrue(os.path.exists(self.state + ".unreadable"))
        self.assertEqual(self.drained(), [])
        self.berthctl("drain", "web-1")
        self.assertEqual(self.file_drains(), {"web": ["web-1"]})


if __name__ == "__main__":
    unittest.main(verbosity=2)
