#!/usr/bin/python3
"""End to end with real kernel TCP: berthd on an af_packet port in l2dsr mode in front
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
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

import e2e_support
from e2e_support import BIG_BYTES, BIG_SHA256, TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
CLIENT = "berth-cl-" + TAG
BACKENDS = ["bk%d" % i for i in range(1, 5)]
NAMESPACES = [CLIENT] + ["berth-%s-%s" % (name, TAG) for name in BACKENDS]
BRIDGE = "bbr" + TAG
PORT = "blb" + TAG          # berthd's af_packet port; its peer is on the bridge
VIP = "198.18.100.1"
PREFIX = "berth-e2e-" + TAG
INTERVAL, RISE, FALL = 0.5, 2, 3


def namespace_of(backend):
    return "berth-%s-%s" % (backend, TAG)


def backend_mac(backend):
    return "02:b0:00:00:00:%02x" % int(backend[2:])


def backend_address(backend):
    return "198.18.0.%d" % (10 + int(backend[2:]))


def config_text(backends, weights=None, broken=False):
    weights = weights or {}
    lines = ["dataplane:",
             '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
             '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
             '        "--vdev", "net_af_packet0,iface=%s"]' % PORT,
             "  ports:",
             "    - { name: p0, device: net_af_packet0, ipv4: 198.18.0.10 }",
             "services:"] + e2e_support.l2dsr_service_lines("web", VIP, "arp", INTERVAL, RISE,
                                                             FALL)
    for backend in backends:
        lines.append('      - { name: %s, address: %s, mac: "%s", weight: %d }' % (
            backend, backend_address(backend), backend_mac(backend), weights.get(backend, 1)))
    if broken:
        lines.append("      - { name: bk9, address: 198.18.0.300 }")
    return "\n".join(lines) + "\n"


class Topology:
    """The namespaces, veths and bridge, made once and removed by name at exit."""

    def __init__(self):
        self.servers = e2e_support.BackendServers()
        atexit.register(self.remove)
        e2e_support.make_bridge(BRIDGE, "198.18.0.254/24")
        e2e_support.make_af_packet_port(PORT, BRIDGE)
        e2e_support.add_host(CLIENT, "c" + TAG, BRIDGE, "198.18.0.1/24")
        run("ip", "-n", CLIENT, "route", "add", VIP + "/32", "dev", "e0")
        for backend in BACKENDS:
            e2e_support.add_dsr_backend(self.servers, backend, namespace_of(backend),
                                        backend + TAG, BRIDGE, backend_address(backend) + "/24",
                                        backend_mac(backend), VIP)

    def start_server(self, backend):
        self.servers.start(backend, namespace_of(backend))

    def stop_server(self, backend):
        self.servers.stop(backend)

    def remove(self):
        self.servers.stop_all()
        for namespace in NAMESPACES:
            run("ip", "netns", "del", namespace, check=False)
        for link in (PORT, BRIDGE):
            run("ip", "link", "del", link, check=False)


def curl(path="/", local_port=None, max_time=10):
    """A request from the client namespace: (curl's status, body, the X-Backend header)."""
    return e2e_support.curl(CLIENT, VIP, path, local_port, max_time)


class L2dsrTcp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-")
        cls.config = os.path.join(cls.directory, "berth.yaml")
        cls.backends = BACKENDS[:3]
        with open(cls.config, "w") as out:
            out.write(config_text(cls.backends))
        cls.topology = Topology()
        cls.instance = e2e_support.Berthd(BERTHD, BERTHCTL, cls.config,
                                          os.path.join(cls.directory, "berth.sock"), PREFIX)
        cls.instance.start()
        cls.berthd = cls.instance.process
        cls.wait_healthy(cls.backends)

    @classmethod
    def tearDownClass(cls):
        cls.instance.stop()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def berthctl(cls, *command):
        return cls.instance.berthctl(*command)

    @classmethod
    def health(cls):
        return cls.instance.health()

    @classmethod
    def wait_healthy(cls, backends, timeout=15):
        cls.instance.wait_healthy(backends, timeout)

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
    e2e_support.main()
