#!/usr/bin/python3
"""berthd and its file descriptors, with 3,000 HTTP checks whose target never answers beside a
service whose two backends answer:
  1. under a hard limit of 1,024 open files, berthd refuses to start and names the limit;
  2. under a soft limit of 1,024 with room in the hard one, it raises the soft limit and starts;
     the silent checks fail (timeouts are real failures) and the answering backends stay healthy;
  3. when the soft limit is then cut below what is open, probes cannot run: that is counted and
     logged at most once a second, the answering backends stay healthy, and their checks show as
     stale in `berthctl backends`; once descriptors are back, the checks run again.
berthd runs on a net_null vdev; the targets are loopback listeners.

Usage: berthd_descriptors_test.py BERTHD
"""
import http.server
import json
import os
import re
import resource
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BERTHD = sys.argv.pop(1)
PREFIX = "berth-descriptors-%d" % os.getpid()
SILENT_CHECKS = 3000
HARD_LIMIT = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def config(silent_port, answering_port):
    text = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: http, interval: 0.2, timeout: 0.1, rise: 1, fall: 1, address: 127.0.0.1,
              port: %d }
    backends:
      - { name: web-1, address: 198.18.1.2, health: { path: /web-1 } }
      - { name: web-2, address: 198.18.1.3, health: { path: /web-2 } }
  - name: silent
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    health: { type: http, interval: 1, timeout: 0.5, rise: 1, fall: 1, address: 127.0.0.1,
              port: %d }
    backends:
""" % (PREFIX, answering_port, silent_port)
    for i in range(SILENT_CHECKS):
        text += "      - { name: s%d, address: 198.18.%d.%d, health: { path: /%d } }\n" % (
            i, 2 + i // 250, 1 + i % 250, i)
    return text


class Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


class BerthdDescriptors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-descriptors-")
        # Accepts nothing: its queue fills, then connects wait for their timeout.
        cls.silent = socket.socket()
        cls.silent.bind(("127.0.0.1", 0))
        cls.silent.listen(16)
        cls.answering = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answering)
        cls.answering.daemon_threads = True
        threading.Thread(target=cls.answering.serve_forever, daemon=True).start()
        cls.path = os.path.join(cls.directory, "berth.yaml")
        with open(cls.path, "w") as out:
            out.write(config(cls.silent.getsockname()[1], cls.answering.server_address[1]))
        cls.control = os.path.join(cls.directory, "berth.sock")
        cls.process = None

    @classmethod
    def tearDownClass(cls):
        if cls.process is not None and cls.process.poll() is None:
            cls.process.send_signal(signal.SIGINT)
            try:
                cls.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.process.kill()
        cls.answering.shutdown()
        cls.silent.close()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def command(self, limit):
        return ["prlimit", "--nofile=%s" % limit, BERTHD, "--", "--config", self.path,
                "--control-socket", self.control]

    def ask(self, command, client=None):
        if client is None:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(self.control)
        with client:
            client.settimeout(10)
            client.sendall((json.dumps({"command": command}) + "\n").encode())
            reply = b""
            while not reply.endswith(b"\n"):
                piece = client.recv(1 << 20)
                if not piece:
                    break
                reply += piece
        return json.loads(reply)

    def web_health(self, client=None):
        rows = self.ask("backends", client)["backends"]
        return {r["name"]: (r["health"], r["check_stale"]) for r in rows if r["service"] == "web"}

    def soft_limit(self):
        with open("/proc/%d/limits" % type(self).process.pid) as limits:
            return int(re.search(r"Max open files\s+(\d+)", limits.read()).group(1))

    def test_1_a_hard_limit_too_low_is_refused_by_name(self):
        result = subprocess.run(self.command("1024:1024"), capture_output=True, text=True,
                                timeout=120)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("the hard limit on open files (RLIMIT_NOFILE) is 1024", result.stderr)
        self.assertIn("%d health check(s)" % (SILENT_CHECKS + 2), result.stderr)
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)

    def test_2_the_soft_limit_is_raised_and_answering_backends_stay_healthy(self):
        cls = type(self)
        self.assertGreater(HARD_LIMIT, SILENT_CHECKS + 2 + 1024, "room in the hard limit")
        cls.process = subprocess.Popen(self.command("1024:%d" % HARD_LIMIT), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.process.stderr), daemon=True).start()
        deadline = time.monotonic() + 120
        while not any("forwarding:" in line for line in list(cls.lines)):
            self.assertLess(time.monotonic(), deadline, "".join(cls.lines))
            self.assertIsNone(cls.process.poll(), "".join(cls.lines))
            time.sleep(0.05)
        self.assertGreaterEqual(self.soft_limit(), SILENT_CHECKS + 2 + 1024)
        # Three intervals of the silent checks: they fail; the answering ones never do.
        time.sleep(3)
        log = "".join(cls.lines)
        self.assertIn("health: service 'silent' backend 's0'", log)
        self.assertNotIn("service 'web' backend", log)
        self.assertNotIn("Too many open files", log)
        self.assertEqual(self.web_health(), {"web-1": ("healthy", False),
                                             "web-2": ("healthy", False)})

    def test_3_probes_without_descriptors_count_for_no_backend(self):
        cls = type(self)
        self.assertIsNotNone(cls.process, "test 2 started berthd")
        logged_before = len(cls.lines)
        # Accepted before the cut, so that berthd can still answer on it. A soft limit of 1 leaves
        # no descriptor to open, whatever closes meanwhile.
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.connect(self.control)
        time.sleep(0.1)
        raised = self.soft_limit()
        subprocess.run(["prlimit", "--pid", str(cls.process.pid), "--nofile=1:%d" % HARD_LIMIT],
                       check=True)
        # Fall + 1 intervals of the web checks and their timeout make 0.5 s; the held connection
        # has 2 s from its accept to send its request.
        time.sleep(1.0)
        during = self.web_health(held)
        subprocess.run(["prlimit", "--pid", str(cls.process.pid),
                        "--nofile=%d:%d" % (raised, HARD_LIMIT)], check=True)
        self.assertEqual(during, {"web-1": ("healthy", True), "web-2": ("healthy", True)})
        time.sleep(1.5)
        self.assertEqual(self.web_health(), {"web-1": ("healthy", False),
                                             "web-2": ("healthy", False)})
        log = "".join(cls.lines[logged_before:])
        summaries = re.findall(r"health: (\d+) probe\(s\) could not run for a local error "
                               r"\(the last: socket: Too many open files\)", log)
        print("descriptors cut for about 1 s: %d summary line(s), %d probe(s) not run" % (
            len(summaries), sum(int(n) for n in summaries)), file=sys.stderr)
        self.assertGreater(len(summaries), 0)
        self.assertLessEqual(len(summaries), 4, "at most a line a second")
        self.assertNotIn("service 'web' backend", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
