#!/usr/bin/python3
"""berthctl against a running berthd (net_null vdev): status, stats, drain and undrain, reload,
and the errors an operator meets: an unknown backend, no socket, a refused reload. The control
socket is owner-only and goes away with berthd.

Usage: berthctl_live_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
PREFIX = "berth-live-%d" % os.getpid()
CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.2.2, weight: 3 }
  - name: api
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    backends:
      - { name: web-1, address: 198.18.1.3 }
""" % PREFIX


class BerthctlLive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthctl-live-")
        cls.config = os.path.join(cls.directory, "berth.yaml")
        cls.socket = os.path.join(cls.directory, "run", "berth.sock")
        with open(cls.config, "w") as out:
            out.write(CONFIG)
        cls.process = subprocess.Popen([BERTHD, "--", "--config", cls.config, "--control_socket", cls.socket],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.process.stderr), daemon=True).start()
        deadline = time.monotonic() + 20
        while not any("forwarding:" in l for l in list(cls.lines)) and time.monotonic() < deadline:
            time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        cls.process.send_signal(signal.SIGINT)
        cls.process.wait(timeout=30)
        cls.socket_after_exit = os.path.exists(cls.socket)
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def berthctl(self, *args, check=True):
        result = subprocess.run([BERTHCTL, *args, "--socket", self.socket], capture_output=True,
                                text=True, timeout=30)
        if check:
            self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_status(self):
        out = self.berthctl("status").stdout
        self.assertIn("berthd 0.1.0", out)
        self.assertIn("config %s" % self.config, out)
        reply = json.loads(self.berthctl("status", "--json").stdout)
        self.assertTrue(reply["ok"])
        self.assertEqual((reply["services"], reply["backends"], reply["workers"]), (2, 3, 1))
        self.assertRegex(reply["config_crc32c"], "^[0-9a-f]{8}$")

    def test_stats(self):
        reply = json.loads(self.berthctl("stats", "--json").stdout)
        counters = reply["stats"]["counters"]
        self.assertGreater(counters["rx_packets"], 0, "net_null delivers frames")
        self.assertIn("drop_other_ethertype", counters)
        self.assertIn("conntrack_hits", counters)
        self.assertIn("web/web-2", reply["stats"]["backends"])
        self.assertIn("rx_packets", self.berthctl("stats").stdout)

    def test_services_and_backends(self):
        services = json.loads(self.berthctl("services", "--json").stdout)["services"]
        self.assertEqual([(s["name"], s["listener"], s["backends"]) for s in services],
                         [("web", "tcp 198.18.100.1:80", 2), ("api", "tcp 198.18.100.2:80", 1)])
        backends = json.loads(self.berthctl("backends", "--json").stdout)["backends"]
        web = {b["name"]: b for b in backends if b["service"] == "web"}
        self.assertEqual(web["web-2"]["weight"], 3)
        self.assertEqual(web["web-1"]["slots"] + web["web-2"]["slots"], 65537)
        self.assertGreater(web["web-2"]["slots"], 2 * web["web-1"]["slots"], "weight 3 against 1")
        self.assertEqual({b["health"] for b in backends}, {"healthy"})
        self.assertIn("web-2", self.berthctl("backends").stdout)

    def test_drain_and_undrain(self):
        ambiguous = self.berthctl("drain", "web-1")
        self.assertIn("drained web/web-1, api/web-1", ambiguous.stdout, "both services' web-1")
        self.berthctl("undrain", "web-1")
        out = self.berthctl("drain", "web-1", "--service", "web").stdout
        self.assertIn("drained web/web-1", out)
        self.assertIn("web/web-1", json.loads(self.berthctl("status", "--json").stdout)["drained"])
        self.assertIn("already so", self.berthctl("drain", "web-1", "--service", "web").stdout)
        self.assertIn("undrained web/web-1", self.berthctl("undrain", "web-1", "--service", "web").stdout)
        missing = self.berthctl("drain", "web-9", check=False)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no backend named 'web-9'", missing.stderr)

    def test_reload(self):
        self.assertIn("reloaded %s" % self.config, self.berthctl("reload").stdout)
        with open(self.config) as source:
            good = source.read()
        with open(self.config, "w") as out:
            out.write(good.replace("weight: 3", "weight: many"))
        refused = self.berthctl("reload", check=False)
        with open(self.config, "w") as out:
            out.write(good)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("refused, the running config keeps serving", refused.stderr)
        self.assertIn("services[0].backends[1].weight", refused.stderr)

    def test_errors_an_operator_meets(self):
        unknown = self.berthctl("explode", check=False)
        self.assertEqual(unknown.returncode, 1)
        nowhere = subprocess.run([BERTHCTL, "status", "--socket", self.socket + ".missing"],
                                 capture_output=True, text=True, timeout=30)
        self.assertEqual(nowhere.returncode, 1)
        self.assertIn("is berthd running?", nowhere.stderr)

    def test_the_socket_is_owner_only(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.socket).st_mode), 0o600)


class SocketGoesAway(unittest.TestCase):
    def test_zz_socket_removed_on_exit(self):
        # Runs after BerthctlLive's teardown (unittest orders classes by name: B < S).
        self.assertFalse(BerthctlLive.socket_after_exit)


if __name__ == "__main__":
    unittest.main(verbosity=2)
