#!/usr/bin/python3
"""berth-announcer against a stand-in berthd (a Unix socket answering `announce`) and a stand-in
birdc (a script that records each call and what BIRD would read, and hangs for as many calls as
its `hang` file says):
  1. route files are written whole, mode 0644, replacing (never following) a link at their path,
     with no temporary file left behind;
  2. a berthd that stops answering is withdrawn in the route files at once, and BIRD is told
     within berthd_timeout plus two birdc deadlines although the first birdc hangs;
  3. a birdc that hangs for three calls in a row is killed each time, and BIRD is told in the end;
  4. SIGTERM withdraws and exits within 2 s, even while birdc hangs;
  5. a --routes-dir holding a quote is refused.

Usage: berth_announcer_test.py BERTH_ANNOUNCER
"""
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ANNOUNCER = sys.argv.pop(1)
INTERVAL_MS, BERTHD_TIMEOUT_MS, BIRDC_TIMEOUT_MS = 200, 1000, 500
ROUTE = "route 198.18.100.1/32 via 198.18.0.11;\n"

FAKE_BIRDC = """#!/bin/sh
# birdc -s SOCKET configure, as berth-announcer runs it.
dir=$(dirname "$0")
hang=$(cat "$dir/hang" 2>/dev/null || echo 0)
if [ "$hang" -gt 0 ]; then
  echo $((hang - 1)) > "$dir/hang"
  echo "hung" >> "$dir/calls"
  exec sleep 30
fi
# The call is recorded before what BIRD read: a test that saw the latter finds the former.
echo "told" >> "$dir/calls"
printf '%s %s\\n' "$(date +%s.%N)" "$(grep '^route' "$dir/routes/bird-routes4.conf" | tr -d '\\n')" >> "$dir/told"
echo "Reconfigured"
"""


class FakeBerthd:
    """Answers `announce` with one route on a Unix socket until stopped."""

    def __init__(self, path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with client:
                client.recv(4096)
                reply = {"ok": True, "forwarding": True,
                         "route_list": "198.18.100.1/32 198.18.0.11\n"}
                client.sendall((json.dumps(reply) + "\n").encode())

    def stop(self):
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        os.unlink(self.path)


class BerthAnnouncer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-announcer-")
        cls.routes = os.path.join(cls.directory, "routes")
        os.makedirs(cls.routes)
        cls.birdc = os.path.join(cls.directory, "birdc")
        with open(cls.birdc, "w") as out:
            out.write(FAKE_BIRDC)
        os.chmod(cls.birdc, 0o755)
        # A link where the IPv4 route file goes: it must be replaced, not written through.
        cls.victim = os.path.join(cls.directory, "victim")
        with open(cls.victim, "w") as out:
            out.write("keep me\n")
        os.symlink(cls.victim, os.path.join(cls.routes, "bird-routes4.conf"))
        cls.socket = os.path.join(cls.directory, "berth-ro.sock")
        cls.berthd = FakeBerthd(cls.socket)
        cls.log = open(os.path.join(cls.directory, "announcer.log"), "w+")
        cls.announcer = cls.start()

    @classmethod
    def start(cls):
        return subprocess.Popen(
            [ANNOUNCER, "--socket", cls.socket, "--birdc", cls.birdc, "--bird-socket",
             os.path.join(cls.directory, "bird.ctl"), "--routes-dir", cls.routes,
             "--interval-ms", str(INTERVAL_MS), "--berthd-timeout-ms", str(BERTHD_TIMEOUT_MS),
             "--birdc-timeout-ms", str(BIRDC_TIMEOUT_MS)], stdout=cls.log, stderr=subprocess.STDOUT)

    @classmethod
    def tearDownClass(cls):
        if cls.announcer.poll() is None:
            cls.announcer.kill()
            cls.announcer.wait()
        cls.log.close()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def set_hang(self, calls):
        with open(os.path.join(self.directory, "hang"), "w") as out:
            out.write("%d\n" % calls)

    def told(self):
        """(time, IPv4 routes) for each birdc that reached BIRD."""
        try:
            with open(os.path.join(self.directory, "told")) as told:
                return [(float(line.split(" ", 1)[0]), line.split(" ", 1)[1].strip())
                        for line in told]
        except FileNotFoundError:
            return []

    def calls(self):
        try:
            with open(os.path.join(self.directory, "calls")) as calls:
                return calls.read().split()
        except FileNotFoundError:
            return []

    def wait_for(self, condition, timeout, what):
        deadline = time.time() + timeout
        while not condition():
            if time.time() > deadline:
                self.log.seek(0)
                self.fail("%s within %.1f s; announcer log:\n%s" % (what, timeout, self.log.read()))
            time.sleep(0.01)
        return time.time()

    def routes_file(self):
        """The IPv4 route file's routes, without its comment."""
        with open(os.path.join(self.routes, "bird-routes4.conf")) as routes:
            return "".join(line for line in routes if line.startswith("route"))

    def test_1_route_files_are_whole_0644_and_replace_a_link(self):
        self.wait_for(lambda: any(r == ROUTE.strip() for _, r in self.told()), 10, "announced")
        path = os.path.join(self.routes, "bird-routes4.conf")
        mode = os.lstat(path).st_mode
        self.assertTrue(stat.S_ISREG(mode), "the link was replaced by a file")
        self.assertEqual(stat.S_IMODE(mode), 0o644)
        self.assertEqual(self.routes_file(), ROUTE)
        with open(self.victim) as victim:
            self.assertEqual(victim.read(), "keep me\n")
        self.assertEqual(sorted(os.listdir(self.routes)),
                         ["bird-routes4.conf", "bird-routes6.conf"], "no temporary file left")

    def test_2_a_dead_berthd_is_withdrawn_although_the_first_birdc_hangs(self):
        self.set_hang(1)
        stopped = time.time()
        self.berthd.stop()
        emptied = self.wait_for(lambda: self.routes_file() == "", 5, "route files emptied")
        told = self.wait_for(lambda: any(t > stopped and r == "" for t, r in self.told()), 10,
                             "BIRD told")
        print("berthd gone: route files empty after %.2f s, BIRD told after %.2f s" % (
            emptied - stopped, told - stopped), file=sys.stderr)
        interval, timeout, deadline = INTERVAL_MS / 1e3, BERTHD_TIMEOUT_MS / 1e3, BIRDC_TIMEOUT_MS / 1e3
        # Loose bounds: a round's granularity and half a second of a shared VM beyond each.
        self.assertLess(emptied - stopped, timeout + 2 * interval + 0.5)
        self.assertLess(told - stopped, timeout + 2 * deadline + 2 * interval + 0.5)
        self.assertIn("hung", self.calls())

    def test_3_a_birdc_hanging_three_calls_is_killed_each_time(self):
        self.set_hang(3)
        before = len(self.calls())
        since = time.time()
        type(self).berthd = FakeBerthd(self.socket)
        self.wait_for(lambda: any(t > since and r == ROUTE.strip() for t, r in self.told()), 15,
                      "announced again")
        self.assertEqual(self.calls()[before:before + 4], ["hung", "hung", "hung", "told"])
        self.log.seek(0)
        self.assertIn("no answer in time; killed", self.log.read())

    def test_4_sigterm_withdraws_and_exits_within_2_s_while_birdc_hangs(self):
        self.set_hang(1)
        since = time.time()
        self.announcer.send_signal(signal.SIGTERM)
        self.announcer.wait(timeout=10)
        exited = time.time() - since
        print("SIGTERM: exited after %.2f s" % exited, file=sys.stderr)
        self.assertEqual(self.announcer.returncode, 0)
        self.assertLess(exited, 2.0)
        self.assertEqual(self.routes_file(), "")
        self.assertEqual(self.told()[-1][1], "", "the last word to BIRD was the withdrawal")

    def test_5_a_routes_dir_with_a_quote_is_refused(self):
        result = subprocess.run([ANNOUNCER, "--routes-dir", '/tmp/a"b'], capture_output=True,
                                text=True, timeout=10)
        self.assertEqual(result.returncode, 1)
        self.assertIn("--routes-dir must not hold a quote", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
