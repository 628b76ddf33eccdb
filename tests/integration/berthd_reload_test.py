#!/usr/bin/python3
"""berthd reloading its config on SIGHUP: a valid change applies (a new backend, a weight); a bad
file (broken YAML, an unknown key, a table size that is not prime, a duplicate backend name) is
refused with its field and line while the running config keeps serving; a port change is refused
as needing a restart. Each outcome is in `status` (the last reload's result, reason and counts)
and in the metrics (berth_config_last_reload_successful and its companions), not only in the log.
berthd runs on a net_null vdev, so no traffic is needed.

Usage: berthd_reload_test.py BERTHD
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import ask, scrape, wait_for_line  # noqa: E402

BERTHD = sys.argv.pop(1)
PREFIX = "berth-reload-%d" % os.getpid()

HEAD = """metrics: { listen: "127.0.0.1:0" }
dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe", mtu: %d }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: %d
    backends:
"""


def config(backends, mtu=1500, table_size=65537, extra=""):
    text = HEAD % (PREFIX, mtu, table_size)
    for name, weight in backends:
        text += "      - { name: %s, address: 198.18.%d.2, weight: %d }\n" % (name, int(name[-1]), weight)
    return text + extra


class BerthdReload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-reload-")
        cls.path = os.path.join(cls.directory, "berth.yaml")
        cls.write(config([("web-1", 1), ("web-2", 1)]))
        cls.socket = os.path.join(cls.directory, "berth.sock")
        cls.process = subprocess.Popen([BERTHD, "--", "--config", cls.path, "--control-socket",
                                        cls.socket], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.process.stderr), daemon=True).start()
        cls.wait_for("forwarding:")
        cls.metrics_url = re.search(r"metrics: (http://\S+)", cls.wait_for("metrics: http://")).group(1)

    @classmethod
    def tearDownClass(cls):
        if cls.process.poll() is None:
            cls.process.send_signal(signal.SIGINT)
            try:
                cls.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.process.kill()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def write(cls, text):
        with open(cls.path + ".new", "w") as out:
            out.write(text)
        os.replace(cls.path + ".new", cls.path)

    @classmethod
    def wait_for(cls, text, after=0):
        return wait_for_line(cls.lines, cls.process, text, after)

    def reload(self, text):
        """Writes the file, sends SIGHUP, returns berthd's reload line."""
        self.write(text)
        after = len(self.lines)
        self.process.send_signal(signal.SIGHUP)
        return self.wait_for("reload of", after)

    def reload_metrics(self, settled_on):
        """berth_config_* samples, by name and labels, once the last reload's result is
        `settled_on`: the endpoint serves one rendering per render interval."""
        deadline = time.monotonic() + 10
        while True:
            status, body = scrape(self.metrics_url)
            self.assertEqual(status, 200)
            samples = {}
            for line in body.decode().splitlines():
                if line.startswith("berth_config_"):
                    name, value = line.rsplit(" ", 1)
                    samples[name] = float(value)
            if samples["berth_config_last_reload_successful"] == settled_on:
                return samples
            self.assertLess(time.monotonic(), deadline, samples)
            time.sleep(0.1)

    def test_0_before_any_reload_the_start_config_is_in_force(self):
        reloads = ask(self.socket, "status")["reloads"]
        self.assertEqual((reloads["applied"], reloads["refused"]), (0, 0))
        self.assertTrue(reloads["last_successful"])
        self.assertIn("reloads: none since start", ask(self.socket, "status")["text"])
        samples = self.reload_metrics(settled_on=1)
        self.assertAlmostEqual(samples["berth_config_last_reload_success_timestamp_seconds"],
                               reloads["in_force_since"], delta=0.01)

    def test_1_a_valid_change_applies(self):
        after = len(self.lines)
        line = self.reload(config([("web-1", 1), ("web-2", 3), ("web-3", 1)]))
        self.assertIn("applied: 1 service(s), 3 backend(s)", line)
        # What the table change moved, against the least, and why: a weight and a backend
        # together are a reload.
        moved = self.wait_for("table: service 'web': moved ", after)
        self.assertRegex(moved, r"moved \d+ of 65537 slots \([\d.]+%\), least \d+ \([\d.]+x\): reload")

    def test_2_bad_files_are_refused_with_field_and_line(self):
        cases = [
            (config([("web-1", 1)]) + "    bad: [\n", "refused"),
            (config([("web-1", 1)], extra="    colour: blue\n"), "services[0].colour: unknown key"),
            (config([("web-1", 1)], table_size=65536), "services[0].table_size"),
            (config([("web-1", 1), ("web-1", 2)]), "duplicate backend name 'web-1'"),
        ]
        for text, expected in cases:
            line = self.reload(text)
            self.assertIn("refused, the running config keeps serving", line)
            self.assertIn(expected, line)
        self.assertIn("berth.yaml:", self.reload(cases[1][0]), "the file and line are named")
        self.assertIsNone(self.process.poll(), "berthd still runs")
        # The refusal is in status and the metrics, with its reason, not only in the log.
        reply = ask(self.socket, "status")
        reloads = reply["reloads"]
        self.assertFalse(reloads["last_successful"])
        self.assertIn("services[0].colour: unknown key", reloads["last_error"])
        self.assertEqual((reloads["applied"], reloads["refused"]), (1, 5))
        self.assertIn("last reload: REFUSED", reply["text"])
        self.assertIn("services[0].colour: unknown key", reply["text"])
        samples = self.reload_metrics(settled_on=0)
        self.assertEqual(samples['berth_config_reloads_total{result="refused"}'], 5)
        self.assertEqual(samples['berth_config_reloads_total{result="applied"}'], 1)

    def test_3_a_port_change_needs_a_restart(self):
        line = self.reload(config([("web-1", 1)], mtu=9000))
        self.assertIn("dataplane.ports changed", line)
        self.assertIn("needs a restart", line)

    def test_4_a_later_valid_reload_still_applies(self):
        line = self.reload(config([("web-1", 1), ("web-2", 1)]))
        self.assertIn("applied: 1 service(s), 2 backend(s)", line)
        reloads = ask(self.socket, "status")["reloads"]
        self.assertTrue(reloads["last_successful"])
        self.assertEqual(reloads["last_error"], "")
        self.assertGreater(reloads["in_force_since"], reloads["last_at"] - 1)
        self.reload_metrics(settled_on=1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
