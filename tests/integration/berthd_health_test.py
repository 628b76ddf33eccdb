#!/usr/bin/python3
"""berthd's health checks against real servers on loopback: Python's http.server (200), a server
that answers 500, and a socket that accepts and closes. Each backend's state changes, and the
reasons berthd logs, are checked, and `backends` shows each reason, its age and the last probe;
stopping and restarting http.server takes its backend down and
back up. berthd runs on a net_null vdev.

Usage: berthd_health_test.py BERTHD
"""
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import ask  # noqa: E402

BERTHD = sys.argv.pop(1)
PREFIX = "berth-health-%d" % os.getpid()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Answers500(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def start_http_server(port):
    return subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_listening(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("nothing listens on %d" % port)


class BerthdHealth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-health-")
        cls.ok_port = free_port()
        cls.http = start_http_server(cls.ok_port)
        cls.error_server = http.server.HTTPServer(("127.0.0.1", 0), Answers500)
        threading.Thread(target=cls.error_server.serve_forever, daemon=True).start()
        cls.closer = socket.socket()
        cls.closer.bind(("127.0.0.1", 0))
        cls.closer.listen(64)

        def accept_and_close():
            while True:
                try:
                    connection, _ = cls.closer.accept()
                except OSError:
                    return
                connection.close()
        threading.Thread(target=accept_and_close, daemon=True).start()
        wait_listening(cls.ok_port)

        check = "interval: 0.1, timeout: 0.1, rise: 1, fall: 2, address: 127.0.0.1"
        config = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: a, address: 198.18.1.2, health: { type: http, %s, port: %d } }
      - { name: b, address: 198.18.2.2, health: { type: http, %s, port: %d } }
      - { name: c, address: 198.18.3.2, health: { type: tcp, %s, port: %d } }
      - { name: d, address: 198.18.4.2, health: { type: http, %s, port: %d } }
""" % (PREFIX, check, cls.ok_port, check, cls.error_server.server_port, check,
       cls.closer.getsockname()[1], check, cls.closer.getsockname()[1])
        path = os.path.join(cls.directory, "berth.yaml")
        with open(path, "w") as out:
            out.write(config)
        cls.socket = os.path.join(cls.directory, "berth.sock")
        cls.berthd = subprocess.Popen([BERTHD, "--", "--config", path, "--control-socket",
                                       cls.socket],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.berthd.stderr), daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.berthd.send_signal(signal.SIGINT)
        cls.berthd.wait(timeout=30)
        cls.http.kill()
        cls.http.wait()
        cls.error_server.shutdown()
        cls.closer.close()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def change_of(cls, backend, to, after=0, timeout=10):
        deadline = time.monotonic() + timeout
        needle = "backend '%s'" % backend
        while time.monotonic() < deadline:
            for line in list(cls.lines)[after:]:
                if needle in line and ("-> %s:" % to) in line:
                    return line
            time.sleep(0.05)
        return None

    def test_1_each_server_gives_its_verdict(self):
        b = self.change_of("b", "unhealthy")
        self.assertIsNotNone(b, "".join(self.lines))
        self.assertIn("HTTP status 500", b)
        d = self.change_of("d", "unhealthy")
        self.assertIsNotNone(d, "".join(self.lines))
        self.assertRegex(d, "without an HTTP status line|send: ")
        time.sleep(0.5)
        self.assertIsNone(self.change_of("a", "unhealthy", timeout=0), "http.server answers 200")
        self.assertIsNone(self.change_of("c", "unhealthy", timeout=0), "the connect succeeds")
        # `backends` gives each verdict's reason, its age and the last probe, not only the log.
        reply = ask(self.socket, "backends")
        rows = {row["name"]: row for row in reply["backends"]}
        self.assertEqual(rows["b"]["health"], "unhealthy")
        self.assertIn("HTTP status 500", rows["b"]["health_reason"])
        self.assertFalse(rows["b"]["last_check_ok"])
        self.assertIn("HTTP status 500", rows["b"]["last_check_detail"])
        self.assertGreaterEqual(rows["b"]["last_check_latency_ms"], 0)
        self.assertLess(rows["b"]["last_check_s_ago"], 2)
        self.assertLess(rows["b"]["health_since_s"], 12)
        self.assertTrue(rows["a"]["last_check_ok"])
        self.assertEqual(rows["a"]["health_reason"], "healthy at start until probes say otherwise")
        self.assertRegex(reply["text"], r"\nweb/b unhealthy for \d+s: 2 probe\(s\) in a row "
                                        r"failed, the last: HTTP status 500")
        self.assertRegex(reply["text"], r"FAILED HTTP status 500")

    def test_2_a_stopped_server_goes_down_and_comes_back(self):
        after = len(self.lines)
        self.http.kill()
        self.http.wait()
        down = self.change_of("a", "unhealthy", after)
        self.assertIsNotNone(down, "".join(self.lines[after:]))
        self.assertIn("Connection refused", down)
        after = len(self.lines)
        type(self).http = start_http_server(self.ok_port)
        up = self.change_of("a", "healthy", after)
        self.assertIsNotNone(up, "".join(self.lines[after:]))
        self.assertIn("1 probe(s) in a row succeeded", up)


if __name__ == "__main__":
    unittest.main(verbosity=2)
