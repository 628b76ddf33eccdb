#!/usr/bin/python3
"""End to end with real kernel TCP (issue 7): berthd on an af_packet port in l2dsr mode in front
of four backend namespaces running HTTP servers, and a client namespace running curl, all on one
bridge. berthd answers ARP for the VIP; each backend holds the VIP on its loopback (and ignores
ARP for it) and answers the client directly. Health checks reach the backends from the host over
the bridge's own address, a kernel interface apart from berthd's port.

  client 198.18.0.1 --+
  berthd 198.18.0.10 -+- bridge (host 198.18.0.254) -+- bk1..bk4 198.18.0.11-14, VIP on lo
                                                      (bk4 joins by reload)

The cases: shares and stickiness over many source ports; a 5 MB download byte for byte; a
backend failing (found down in time, new flows to the others, a long download to a survivor
intact across it, the backend rejoining); 20 reloads under a steady request loop with no request
failing; drain; a bad reload refused while traffic carries on; every backend down (each packet
counted as no_backend, berthd up, traffic back by itself once they return). Everything the test made is
removed at the end, on failure too. Needs root.

Usage: l2dsr_tcp_test.py BERTHD BERTHCTL
"""
import atexit
import hashlib
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

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "%d" % (os.getpid() % 100000)
CLIENT = "berth-cl-" + TAG
BACKENDS = ["bk%d" % i for i in range(1, 5)]
NAMESPACES = [CLIENT] + ["berth-%s-%s" % (name, TAG) for name in BACKENDS]
BRIDGE = "bbr" + TAG
PORT = "blb" + TAG          # berthd's af_packet port; its peer is on the bridge
VIP = "198.18.100.1"
HTTP_PORT = 8080
PREFIX = "berth-e2e-" + TAG
INTERVAL, RISE, FALL = 0.5, 2, 3
BIG_BYTES = 5 * 1024 * 1024
BIG_SHA256 = hashlib.sha256((bytes(range(251)) * (BIG_BYTES // 251 + 1))[:BIG_BYTES]).hexdigest()


def namespace_of(backend):
    return "berth-%s-%s" % (backend, TAG)


def backend_mac(backend):
    return "02:b0:00:00:00:%02x" % int(backend[2:])


def backend_address(backend):
    return "198.18.0.%d" % (10 + int(backend[2:]))


def run(*command, check=True):
    return subprocess.run(command, check=check, capture_output=True, text=True, timeout=30)


def config_text(backends, weights=None, broken=False):
    weights = weights or {}
    lines = ["dataplane:",
             '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
             '        "--lcores", "0@0,1@0", "--log-level", "lib.eal:error",',
             '        "--vdev", "net_af_packet0,iface=%s"]' % PORT,
             "  ports:",
             "    - { name: p0, device: net_af_packet0, ipv4: 198.18.0.10 }",
             "services:",
             "  - name: web",
             "    vip: %s" % VIP,
             "    port: %d" % HTTP_PORT,
             "    protocol: tcp",
             "    forwarding: l2dsr",
             "    announce: arp",
             "    health: { type: http, path: /healthz, interval: %s, timeout: 0.4, rise: %d, "
             "fall: %d }" % (INTERVAL, RISE, FALL),
             "    backends:"]
    for backend in backends:
        lines.append('      - { name: %s, address: %s, mac: "%s", weight: %d }' % (
            backend, backend_address(backend), backend_mac(backend), weights.get(backend, 1)))
    if broken:
        lines.append("      - { name: bk9, address: 198.18.0.300 }")
    return "\n".join(lines) + "\n"


class Topology:
    """The namespaces, veths and bridge, made once and removed by name at exit."""

    def __init__(self):
        self.servers = {}
        atexit.register(self.remove)
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", "198.18.0.254/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        run("ip", "link", "add", PORT, "type", "veth", "peer", "name", PORT + "p")
        for link in (PORT, PORT + "p"):
            run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % link)
        run("ip", "link", "set", PORT + "p", "master", BRIDGE, "up")
        run("ip", "link", "set", PORT, "up")
        self.add_host(CLIENT, "c" + TAG, "198.18.0.1", None)
        run("ip", "-n", CLIENT, "route", "add", VIP + "/32", "dev", "e0")
        for backend in BACKENDS:
            self.add_host(namespace_of(backend), backend + TAG, backend_address(backend),
                          backend_mac(backend))
            namespace = namespace_of(backend)
            run("ip", "-n", namespace, "addr", "add", VIP + "/32", "dev", "lo")
            for key in ("all.arp_ignore=1", "all.arp_announce=2", "all.rp_filter=0",
                        "e0.rp_filter=0", "default.rp_filter=0"):
                run("ip", "netns", "exec", namespace, "sysctl", "-qw", "net.ipv4.conf." + key)
            self.start_server(backend)

    def add_host(self, namespace, peer, address, mac):
        run("ip", "netns", "add", namespace)
        run("ip", "link", "add", peer, "type", "veth", "peer", "name", "e0", "netns", namespace)
        run("ip", "link", "set", peer, "master", BRIDGE, "up")
        if mac:
            run("ip", "-n", namespace, "link", "set", "e0", "address", mac)
        run("ip", "-n", namespace, "addr", "add", address + "/24", "dev", "e0")
        run("ip", "-n", namespace, "link", "set", "e0", "up")
        run("ip", "-n", namespace, "link", "set", "lo", "up")
        # Kernel senders on veth through af_packet need their checksums filled in
        # (shared/RECIPES.md).
        run("ip", "netns", "exec", namespace, "ethtool", "-K", "e0", "tx", "off")

    def start_server(self, backend):
        self.servers[backend] = subprocess.Popen(
            ["ip", "netns", "exec", namespace_of(backend), "/usr/bin/python3",
             os.path.join(HERE, "backend_server.py"), backend, str(HTTP_PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while run("ip", "netns", "exec", namespace_of(backend), "curl", "-s", "--max-time", "1",
                  "http://127.0.0.1:%d/healthz" % HTTP_PORT, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("%s's server did not start" % backend)
            time.sleep(0.1)

    def stop_server(self, backend):
        server = self.servers.pop(backend)
        server.kill()
        server.wait(timeout=10)

    def remove(self):
        for server in self.servers.values():
            server.kill()
            server.wait(timeout=10)
        self.servers = {}
        for namespace in NAMESPACES:
            run("ip", "netns", "del", namespace, check=False)
        for link in (PORT, BRIDGE):
            run("ip", "link", "del", link, check=False)


def curl(path="/", local_port=None, max_time=10):
    """A request from the client namespace: (curl's status, body, the X-Backend header)."""
    command = ["ip", "netns", "exec", CLIENT, "curl", "-sS", "--max-time", str(max_time),
               "-w", "\n--berth-headers--%{header_json}", "http://%s:%d%s" % (VIP, HTTP_PORT, path)]
    if local_port:
        command[5:5] = ["--local-port", str(local_port)]
    result = subprocess.run(command, capture_output=True, timeout=max_time + 10)
    if result.returncode != 0:
        return result.returncode, result.stderr, None
    body, _, headers = result.stdout.rpartition(b"\n--berth-headers--")
    backend = json.loads(headers).get("x-backend", [None])[0]
    return 0, body, backend


class L2dsrTcp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-")
        cls.config = os.path.join(cls.directory, "berth.yaml")
        cls.control = os.path.join(cls.directory, "berth.sock")
        cls.backends = BACKENDS[:3]
        with open(cls.config, "w") as out:
            out.write(config_text(cls.backends))
        cls.berthd = None
        cls.topology = Topology()
        cls.berthd = subprocess.Popen(
            [BERTHD, "--", "--config", cls.config, "--control_socket", cls.control],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        atexit.register(cls.stop_berthd)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.berthd.stdout), daemon=True).start()
        deadline = time.monotonic() + 30
        while not any("forwarding:" in line for line in list(cls.lines)):
            if time.monotonic() > deadline or cls.berthd.poll() is not None:
                raise RuntimeError("berthd did not start:\n" + "".join(cls.lines))
            time.sleep(0.05)
        cls.wait_healthy(cls.backends)

    @classmethod
    def stop_berthd(cls):
        if cls.berthd is not None and cls.berthd.poll() is None:
            cls.berthd.send_signal(signal.SIGINT)
            try:
                cls.berthd.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.berthd.kill()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        cls.stop_berthd()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def berthctl(cls, *command):
        """berthd's JSON reply; a refusal raises, with berthctl's message."""
        result = subprocess.run([BERTHCTL] + list(command) + ["--json", "--socket", cls.control],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())
        return json.loads(result.stdout)

    @classmethod
    def health(cls):
        reply = cls.berthctl("backends")
        return {b["name"]: b["health"] for b in reply["backends"]}

    @classmethod
    def wait_healthy(cls, backends, timeout=15):
        deadline = time.monotonic() + timeout
        while not all(cls.health().get(b) == "healthy" for b in backends):
            if time.monotonic() > deadline:
                raise AssertionError("not all of %s healthy: %s" % (backends, cls.health()))
            time.sleep(0.1)

    def spread(self, ports):
        """Each source port's backend, by a request from that port."""
        seen = {}
        for port in ports:
            status, body, backend = curl(local_port=port)
            self.assertEqual(status, 0, "port %d: %s" % (port, body))
            self.assertEqual(body.decode().strip(), backend)
            seen[port] = backend
        return seen

    def test_1_every_backend_serves_a_share_and_a_source_port_sticks_to_one(self):
        ports = range(41000, 41060)
        first = self.spread(ports)
        counts = {b: list(first.values()).count(b) for b in self.backends}
        self.assertTrue(all(count >= 5 for count in counts.values()), counts)
        self.assertEqual(self.spread(ports), first, "the same source port, the same backend")

    def test_2_a_5mb_download_arrives_byte_for_byte(self):
        status, body, backend = curl("/big", local_port=42000, max_time=30)
        self.assertEqual(status, 0, body)
        self.assertEqual(len(body), BIG_BYTES)
        self.assertEqual(hashlib.sha256(body).hexdigest(), BIG_SHA256, "from %s" % backend)

    def test_3_a_failed_backend_leaves_and_rejoins_and_survivors_keep_their_flows(self):
        first = self.spread(range(43000, 43030))
        failing = "bk2"
        survivor_port = next(p for p, b in first.items() if b != failing)
        # A long download to a survivor, open across the failure.
        download = {}

        def slow_download():
            download["result"] = curl("/slow?s=6", local_port=survivor_port, max_time=40)

        thread = threading.Thread(target=slow_download)
        thread.start()
        time.sleep(1)
        self.topology.stop_server(failing)
        stopped = time.monotonic()
        while self.health()[failing] == "healthy":
            self.assertLess(time.monotonic() - stopped, 10, "never marked down")
            time.sleep(0.05)
        took = time.monotonic() - stopped
        # fall x interval, plus one interval for the probe in flight, plus this loop's poll.
        self.assertLessEqual(took, FALL * INTERVAL + INTERVAL + 0.3, "down after %.2f s" % took)
        after = self.spread(range(43100, 43140))
        self.assertNotIn(failing, after.values(), "new flows only to the survivors")
        self.assertEqual(set(after.values()), set(self.backends) - {failing})
        thread.join(timeout=60)
        status, body, backend = download["result"]
        self.assertEqual(status, 0, body)
        self.assertEqual(backend, first[survivor_port])
        self.assertEqual(hashlib.sha256(body).hexdigest(), BIG_SHA256, "intact across it")
        self.topology.start_server(failing)
        self.wait_healthy([failing], timeout=RISE * INTERVAL + 5)
        back = self.spread(range(43200, 43260))
        self.assertIn(failing, back.values(), "rejoined")
        print("\n  %s marked down %.2f s after its server stopped (fall %d x %.1f s)" % (
            failing, took, FALL, INTERVAL), file=sys.stderr)

    def test_4_twenty_reloads_under_a_request_loop_fail_no_request(self):
        stop = threading.Event()
        outcome = {"requests": 0, "failures": []}

        def loop():
            port = 44000
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline and port < 46000:
                status, body, _ = curl(local_port=port, max_time=5)
                outcome["requests"] += 1
                if status != 0:
                    outcome["failures"].append((port, body))
                port += 1

        thread = threading.Thread(target=loop)
        thread.start()
        try:
            # The first reload adds bk4; every one changes the weights. None removes a backend,
            # so no request may fail.
            for reload in range(20):
                weights = {b: 1 + (reload + i) % 3 for i, b in enumerate(BACKENDS)}
                with open(self.config, "w") as out:
                    out.write(config_text(BACKENDS, weights))
                self.assertTrue(self.berthctl("reload")["ok"])
                time.sleep(0.25)
        finally:
            stop.set()
            thread.join(timeout=60)
        self.wait_healthy(BACKENDS)
        self.assertGreater(outcome["requests"], 20)
        self.assertEqual(outcome["failures"], [], "no request fails across the reloads")
        seen = set(self.spread(range(46100, 46160)).values())
        self.assertIn("bk4", seen, "the backend added by reload serves")
        with open(self.config, "w") as out:
            out.write(config_text(self.backends))
        self.assertTrue(self.berthctl("reload")["ok"])
        print("\n  %d requests across 20 reloads, none failed" % outcome["requests"],
              file=sys.stderr)

    def test_5_drain_stops_new_flows_while_an_established_download_completes(self):
        first = self.spread(range(47000, 47030))
        drained = "bk3"
        port = next(p for p, b in first.items() if b == drained)
        download = {}
        thread = threading.Thread(target=lambda: download.update(
            result=curl("/slow?s=4", local_port=port, max_time=40)))
        thread.start()
        time.sleep(1)
        self.berthctl("drain", drained)
        try:
            after = self.spread(range(47100, 47140))
            self.assertNotIn(drained, after.values(), "no new flows to a drained backend")
            thread.join(timeout=60)
            status, body, backend = download["result"]
            self.assertEqual(status, 0, body)
            self.assertEqual(backend, drained)
            self.assertEqual(hashlib.sha256(body).hexdigest(), BIG_SHA256)
        finally:
            self.berthctl("undrain", drained)

    def test_6_a_bad_reload_is_refused_and_traffic_carries_on(self):
        with open(self.config, "w") as out:
            out.write(config_text(self.backends, broken=True))
        try:
            with self.assertRaises(RuntimeError) as refused:
                self.berthctl("reload")
            self.assertIn("services[0].backends[3]", str(refused.exception))
        finally:
            with open(self.config, "w") as out:
                out.write(config_text(self.backends))
        seen = self.spread(range(48000, 48020))
        self.assertEqual(set(seen.values()), set(self.backends))

    def test_7_with_every_backend_down_packets_are_counted_and_it_recovers_by_itself(self):
        def no_backend_drops():
            return self.berthctl("stats")["stats"]["counters"].get("drop_no_backend", 0)

        before = no_backend_drops()
        for backend in self.backends:
            self.topology.stop_server(backend)
        try:
            deadline = time.monotonic() + 10
            while any(state == "healthy" for state in self.health().values()):
                self.assertLess(time.monotonic(), deadline, self.health())
                time.sleep(0.05)
            for port in range(49000, 49005):
                status, _, _ = curl(local_port=port, max_time=2)
                self.assertNotEqual(status, 0, "nothing can answer")
            self.assertGreaterEqual(no_backend_drops() - before, 5, "each SYN counted")
            self.assertIsNone(self.berthd.poll(), "berthd stays up")
        finally:
            for backend in self.backends:
                self.topology.start_server(backend)
        self.wait_healthy(self.backends)
        seen = self.spread(range(49100, 49130))
        self.assertEqual(set(seen.values()), set(self.backends), "recovered by itself")
        print("\n  every backend down: %d packets counted as no_backend" % (
            no_backend_drops() - before), file=sys.stderr)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("needs root (network namespaces)")
        sys.exit(77)
    # A timeout's SIGTERM still removes the namespaces, links and berthd (atexit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    unittest.main(verbosity=2)
