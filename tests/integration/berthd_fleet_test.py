#!/usr/bin/python3
"""A fleet of three berthd instances sharing their services through a three-member etcd cluster,
all over TLS with client certificates from a CA the test makes with openssl. Each berthd runs on a
net_null port that receives nothing, with idle workers, so that three share this machine.

Pinned, in order (the cases share the fleet and each leaves it serving):
- a push is applied by every instance within 5 s, with identical table fingerprints, and
  `berthctl fleet status` says they agree;
- an invalid push is refused with its field and line, and a push with a per-instance section is
  refused naming it; no instance changes;
- of two pushes started together, each one lands or says another push committed first, and the
  fleet's version counts exactly the ones that landed (fleet_agent_test pins the exact race);
- a version an instance cannot apply is refused by it, with the line, and it keeps its version;
- with one etcd member stopped, pushes still reach every instance;
- with every member stopped, the instances keep serving, and a berthd started meanwhile serves
  its cached version; with the members back, every instance registers again and applies the next
  push.

Usage: berthd_fleet_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import socket
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
PREFIX = "berth-fleet-%d" % os.getpid()
APPLY_LIMIT_S = 5.0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def version_text(backends, extra=""):
    text = ("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: tcp\n"
            + extra + "    backends:\n")
    return text + "".join("      - { name: web-%d, address: 198.18.1.%d }\n" % (i, i + 1)
                          for i in range(backends))


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="berth-fleet-")
        cls.make_certificates()
        cls.client_ports = [free_port() for _ in range(3)]
        peer_ports = [free_port() for _ in range(3)]
        cls.cluster = ",".join("e%d=http://127.0.0.1:%d" % (i, p) for i, p in enumerate(peer_ports))
        cls.peer_ports = peer_ports
        cls.members = [None] * 3
        for i in range(3):
            cls.start_member(i)
        cls.wait_members_healthy(range(3))
        cls.endpoints = ["https://127.0.0.1:%d" % p for p in cls.client_ports]
        cls.admin = cls.write_config("admin", local=False)
        cls.berthds = {}
        for i in range(3):
            cls.start_berthd(i)

    @classmethod
    def tearDownClass(cls):
        for process, _ in cls.berthds.values():
            interrupt_and_wait(process)
            process.stderr.close()
        for i in range(3):
            cls.stop_member(i)
        for i in range(3):
            shutil.rmtree("/var/run/dpdk/%s-%d" % (PREFIX, i), ignore_errors=True)
        shutil.rmtree(cls.dir, ignore_errors=True)

    # --- set-up ---------------------------------------------------------------------------------
    @classmethod
    def make_certificates(cls):
        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=cls.dir, check=True, capture_output=True)
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=berth test CA")
        with open(os.path.join(cls.dir, "server.ext"), "w") as ext:
            ext.write("subjectAltName=IP:127.0.0.1\n")
        for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/CN=berth")):
            openssl("req", *key, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
            extra = ["-extfile", "server.ext"] if name == "server" else []
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", name + ".crt", "-days", "2", *extra)
        cls.ca = os.path.join(cls.dir, "ca.crt")
        cls.cert = os.path.join(cls.dir, "client.crt")
        cls.key = os.path.join(cls.dir, "client.key")

    @classmethod
    def start_member(cls, i):
        url = "https://127.0.0.1:%d" % cls.client_ports[i]
        peer = "http://127.0.0.1:%d" % cls.peer_ports[i]
        log = open(os.path.join(cls.dir, "etcd%d.log" % i), "a")
        cls.members[i] = subprocess.Popen(
            ["etcd", "--name", "e%d" % i, "--data-dir", os.path.join(cls.dir, "d%d" % i),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", cls.cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", PREFIX, "--cert-file", os.path.join(cls.dir, "server.crt"),
             "--key-file", os.path.join(cls.dir, "server.key"), "--client-cert-auth",
             "--trusted-ca-file", cls.ca, "--logger", "zap"],
            stdout=log, stderr=log)
        log.close()

    @classmethod
    def stop_member(cls, i):
        if cls.members[i] is not None:
            cls.members[i].kill()
            cls.members[i].wait()
            cls.members[i] = None

    @classmethod
    def wait_members_healthy(cls, indices):
        endpoints = ",".join("127.0.0.1:%d" % cls.client_ports[i] for i in indices)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            result = subprocess.run(
                ["etcdctl", "--endpoints", endpoints, "--cacert", cls.ca, "--cert", cls.cert,
                 "--key", cls.key, "endpoint", "health"],
                env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True)
            if result.returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError("etcd members %s not healthy: %s" % (list(indices), result.stderr))

    @classmethod
    def write_config(cls, name, local=True, index=0):
        text = ""
        if local:
            text += ("dataplane:\n"
                     "  eal: [\"--no-huge\", \"-m\", \"256\", \"--no-pci\", \"--file-prefix\", "
                     "\"%s-%d\", \"--lcores\", \"0@0,1@1\", \"--vdev\", \"net_null0,no-rx=1\", "
                     "\"--log-level\", \"lib.eal:error\"]\n"
                     "  idle: {}\n"
                     "  ports:\n"
                     "    - { name: p0, device: net_null0, ipv4: 198.18.0.%d, "
                     "gateway_mac: \"02:00:00:00:00:fe\" }\n") % (PREFIX, index, 10 + index)
        text += ("fleet:\n  endpoints: [%s]\n  name: %s\n  ca: %s\n  cert: %s\n  key: %s\n"
                 "  lease_ttl_s: 4\n  keep_versions: 5\n  cache: %s\n") % (
                     ", ".join(cls.endpoints), name, cls.ca, cls.cert, cls.key,
                     os.path.join(cls.dir, name + "-cache.yaml"))
        path = os.path.join(cls.dir, name + ".yaml")
        with open(path, "w") as out:
            out.write(text)
        return path

    @classmethod
    def start_berthd(cls, i):
        config = cls.write_config("lb-%d" % i, index=i)
        sock = os.path.join(cls.dir, "lb-%d.sock" % i)
        process = subprocess.Popen([BERTHD, "--", "--config", config, "--control_socket", sock,
                                    "--drain_state", "off"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True).start()
        cls.berthds[i] = (process, lines)
        wait_for_line(lines, process, "forwarding:")

    # --- helpers --------------------------------------------------------------------------------
    def berthctl(self, *args, expect=0):
        result = subprocess.run([BERTHCTL, *args], capture_output=True, text=True, timeout=90)
        if expect is not None:
            self.assertEqual(result.returncode, expect, result.stdout + result.stderr)
        return result

    def push(self, text, name="fleet.yaml", expect=0):
        path = os.path.join(self.dir, name)
        with open(path, "w") as out:
            out.write(text)
        return self.berthctl("fleet", "push", path, "--config", self.admin, expect=expect)

    def status(self, i):
        sock = os.path.join(self.dir, "lb-%d.sock" % i)
        return json.loads(self.berthctl("status", "--json", "--socket", sock).stdout)

    def fleet_status(self):
        result = self.berthctl("fleet", "status", "--json", "--config", self.admin, expect=None)
        self.assertIn(result.returncode, (0, 3), result.stderr)
        return json.loads(result.stdout)

    def head(self):
        return self.fleet_status()["version"]

    def wait_all_on(self, version, limit=20.0):
        """Seconds until every instance serves `version`; the fingerprints then, per instance."""
        start = time.monotonic()
        while True:
            statuses = [self.status(i) for i in sorted(self.berthds)]
            if all(s["fleet"]["version"] == version for s in statuses):
                return time.monotonic() - start, [
                    {t["service"]: t["fingerprint"] for t in s["tables"]} for s in statuses]
            if time.monotonic() - start > limit:
                self.fail("not every instance on version %d: %s" % (
                    version, [s["fleet"] for s in statuses]))
            time.sleep(0.02)

    def wait_fleet_agrees(self, instances=3, limit=20.0):
        deadline = time.monotonic() + limit
        while True:
            fleet = self.fleet_status()
            if fleet["agree"] and len(fleet["instances"]) == instances:
                return fleet
            if time.monotonic() > deadline:
                self.fail("the fleet does not agree: %s" % fleet)
            time.sleep(0.1)

    def versions(self):
        return [self.status(i)["fleet"]["version"] for i in sorted(self.berthds)]

    # --- the cases, in order -------------------------------------------------------------------
    def test_1_a_push_reaches_every_instance(self):
        out = self.push(version_text(3)).stdout
        self.assertIn("as fleet version 1 ", out)
        seconds, fingerprints = self.wait_all_on(1)
        self.assertLess(seconds, APPLY_LIMIT_S)
        self.assertEqual(len({json.dumps(f, sort_keys=True) for f in fingerprints}), 1, fingerprints)
        self.assertEqual(set(fingerprints[0]), {"web"})
        fleet = self.wait_fleet_agrees()
        self.assertEqual(sorted(i["name"] for i in fleet["instances"]), ["lb-0", "lb-1", "lb-2"])
        text = self.berthctl("fleet", "status", "--config", self.admin).stdout
        self.assertIn("agree: yes, 3 instance(s)", text)
        self.assertIn("web: lb-0=%s" % fingerprints[0]["web"], text)

    def test_2_invalid_pushes_are_refused_with_their_line(self):
        head = self.head()
        bad = version_text(3).replace("address: 198.18.1.2 }", "address: 198.18.1.2, weight: x }")
        result = self.push(bad, name="bad.yaml", expect=1)
        self.assertIn("bad.yaml:8:", result.stderr)
        self.assertIn("services[0].backends[1].weight", result.stderr)
        per_instance = "metrics:\n  listen: 127.0.0.1:9100\n" + version_text(3)
        result = self.push(per_instance, name="metrics.yaml", expect=1)
        self.assertIn("metrics.yaml:1:1: metrics: is per instance", result.stderr)
        self.assertEqual(self.head(), head)
        time.sleep(0.5)
        self.assertEqual(self.versions(), [head] * 3)

    def test_3_racing_pushes_never_lose_an_update(self):
        head = self.head()
        paths = []
        for i in range(2):
            paths.append(os.path.join(self.dir, "race%d.yaml" % i))
            with open(paths[-1], "w") as out:
                out.write(version_text(40 + i))
        racers = [subprocess.Popen([BERTHCTL, "fleet", "push", path, "--config", self.admin],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for path in paths]
        outcomes = [(r.returncode, out, err) for r in racers
                    for out, err in [r.communicate(timeout=90)]]
        landed = [o for o in outcomes if o[0] == 0]
        self.assertGreaterEqual(len(landed), 1, outcomes)
        for code, _, err in outcomes:
            if code != 0:
                self.assertIn("another push committed first", err)
        self.assertEqual(self.head(), head + len(landed))
        self.wait_all_on(head + len(landed))
        self.wait_fleet_agrees()

    def test_4_a_version_an_instance_cannot_apply_is_refused_there(self):
        head = self.head()
        self.push(version_text(3, extra="    egress: p9\n"), name="egress.yaml")
        deadline = time.monotonic() + 20
        while True:
            fleet = self.fleet_status()
            refused = [i for i in fleet["instances"] if i["refused_version"] == head + 1]
            if len(refused) == 3:
                break
            self.assertLess(time.monotonic(), deadline, fleet)
            time.sleep(0.1)
        self.assertRegex(refused[0]["refused_why"],
                         r"^fleet version \d+ \(.*egress.yaml\):6:13: services\[0\].egress: "
                         r"no port named 'p9'$")
        self.assertEqual(self.versions(), [head] * 3)
        self.assertEqual(self.status(0)["fleet"]["refused_version"], head + 1)
        self.push(version_text(4))
        self.wait_all_on(head + 2)

    def test_5_one_member_down_changes_nothing(self):
        self.stop_member(0)
        try:
            self.push(version_text(5))
            seconds, _ = self.wait_all_on(self.head())
            self.assertLess(seconds, APPLY_LIMIT_S)
            self.wait_fleet_agrees()
        finally:
            self.start_member(0)
            self.wait_members_healthy(range(3))

    def test_6_every_member_down_then_back(self):
        head = self.head()
        fingerprint = self.status(0)["tables"][0]["fingerprint"]
        for i in range(3):
            self.stop_member(i)
        deadline = time.monotonic() + 20
        while any(self.status(i)["fleet"]["etcd_reachable"] for i in range(3)):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        # Serving continues on the version in force.
        for i in range(3):
            status = self.status(i)
            self.assertEqual(status["fleet"]["version"], head)
            self.assertEqual(status["tables"][0]["fingerprint"], fingerprint)
        # A berthd started now serves its cached version, and says so.
        process, _ = self.berthds.pop(2)
        interrupt_and_wait(process)
        process.stderr.close()
        self.start_berthd(2)
        status = self.status(2)
        self.assertEqual(status["fleet"]["version"], head)
        self.assertTrue(status["fleet"]["from_cache"])
        self.assertEqual(status["tables"][0]["fingerprint"], fingerprint)
        self.assertIn("from the cache", self.berthctl(
            "status", "--socket", os.path.join(self.dir, "lb-2.sock")).stdout)
        # etcd back: every instance registers again, and the next push reaches all of them.
        for i in range(3):
            self.start_member(i)
        self.wait_members_healthy(range(3))
        self.wait_fleet_agrees()
        deadline = time.monotonic() + 10
        while self.status(2)["fleet"]["from_cache"]:
            self.assertLess(time.monotonic(), deadline, "lb-2 still says it serves its cache")
            time.sleep(0.05)
        self.push(version_text(6))
        seconds, fingerprints = self.wait_all_on(head + 1)
        self.assertEqual(len({json.dumps(f, sort_keys=True) for f in fingerprints}), 1)
        self.wait_fleet_agrees()


if __name__ == "__main__":
    unittest.main(verbosity=2)
