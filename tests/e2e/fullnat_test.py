#!/usr/bin/python3
"""End to end: Full-NAT in front of unmodified kernel backends. The backends have no VIP, no
tunnel, no sysctl changed and no route to the clients: they see connections from berth's local
address, and answer it. berthd runs two-arm with two af_packet ports: the uplink toward a
router that the clients sit behind, the downlink on the backends' segment with the local
addresses. The router's link to the client has an MTU of 1280 on the router's side.

  client 198.18.2.1 ---(1280)--- router 198.18.2.254 / 198.18.0.254
                                    |
                                 bridge A ---- berthd's uplink 198.18.0.10 (gateway: the router)
  bk1..bk3 198.18.1.11-13 ---- bridge B ---- berthd's downlink 198.18.1.10,
  (and 2001:db8:1::11-13)                      local addresses 198.18.1.20, 2001:db8:1::20,
                                               kernel interface (the health probes' way out)

The cases: wrk over IPv4 and over IPv6 with no error, each backend serving a share; a UDP
request and its answer; a backend failing with the others' connections untouched (and explain
showing a running connection's session from both sides); a 100 MB
download, rate-limited, intact across a table change made while it runs; path MTU discovery
through berth (the backend's 1500-byte segments meet the 1280 link, and the router's "fragmentation
needed" reaches the backend translated); a pool of 2 addresses x 100 ports to one backend that holds
200 connections at once, refuses the 201st and keeps the 200 answering; the health probes come
from the local address, so a backend that cannot route back to it turns unhealthy, and healthy
again once it can. Everything the test made is removed at the end, on failure too. Needs root.

Usage: fullnat_test.py BERTHD BERTHCTL
"""
import atexit
import hashlib
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

import e2e_support
import proxy_servers
from e2e_support import BIG_BYTES, HTTP_PORT, TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
LB = "berth-nl-" + TAG
CLIENT = "berth-nc-" + TAG
ROUTER = "berth-nr-" + TAG
BACKENDS = ["bk1", "bk2", "bk3"]
NAMESPACES = [LB, CLIENT, ROUTER] + ["berth-n%s-%s" % (name, TAG) for name in BACKENDS]
UPLINK_BRIDGE = "bna" + TAG
BACKEND_BRIDGE = "bnb" + TAG
UPLINK = "bnu" + TAG
DOWNLINK = "bnd" + TAG
TAP = "bnt" + TAG  # the downlink's kernel interface
PREFIX = "berth-fullnat-" + TAG
VIP, VIP6 = "198.18.100.1", "2001:db8:100::1"
VIP64 = "2001:db8:100::64"  # NAT64: IPv4 backends behind it
LOCAL, LOCAL6 = "198.18.1.20", "2001:db8:1::20"
CLIENT_MTU = 1280
DOWNLOAD_BYTES = 100 * 1024 * 1024
NGINX_PORT, HAPROXY_PORT, GREETER_PORT = 8081, 8082, 8083
PROXY_SERVICES = ("pp-nginx", "pp-nginx6", "pp-nginx64", "pp-haproxy", "pp-greeter")
METRICS_PORT = 19464  # in berthd's namespace


def namespace_of(backend):
    return "berth-n%s-%s" % (backend, TAG)


def backend_address(backend, v6=False):
    number = 10 + int(backend[2:])
    return "2001:db8:1::%d" % number if v6 else "198.18.1.%d" % number


def config_text(backends, weights=None, pool=None):
    """berthd's config; `pool`: the downlink's local addresses and port range instead of LOCAL,
    LOCAL6 and every port."""
    weights = weights or {}
    local_addresses = '[%s, "%s"] }' % (LOCAL, LOCAL6)
    if pool:
        local_addresses = "[%s], snat_ports: %s }" % (", ".join(pool[0]), pool[1])
    lines = [
        "dataplane:",
        '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
        '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
        '        "--vdev", "net_af_packet0,iface=%s", "--vdev", "net_af_packet1,iface=%s"]' % (
            UPLINK, DOWNLINK),
        "  conntrack: { nat_sessions_per_core: 65536 }",
        "  ports:",
        '    - { name: uplink, device: net_af_packet0, ipv4: 198.18.0.10, ipv6: "2001:db8::10",',
        "        gateway: 198.18.0.254, egress: downlink }",
        '    - { name: downlink, device: net_af_packet1, ipv4: 198.18.1.10, ipv6: "2001:db8:1::10",',
        "        exception: { kind: tap, name: %s }," % TAP,
        "        snat_addresses: " + local_addresses,
        "metrics: { listen: 127.0.0.1:%d }" % METRICS_PORT,
        "services:",
    ]
    for name, vip, v6 in (("web", VIP, False), ("web6", VIP6, True), ("web64", VIP64, False)):
        lines += [
            "  - name: %s" % name,
            '    vip: "%s"' % vip,
            "    port: %d" % HTTP_PORT,
            "    protocol: tcp",
            "    forwarding: fullnat",
            "    health: { type: http, path: /healthz, interval: 0.5, timeout: 0.4, rise: 2, "
            "fall: 3 }",
            "    backends:",
        ] + ['      - { name: %s, address: "%s", weight: %d }' % (
            backend, backend_address(backend, v6), weights.get(backend, 1))
            for backend in backends]
    # PROXY protocol v2 services: nginx on bk1 (over IPv4 and IPv6), HAProxy on bk2, and a
    # server that speaks first on bk3.
    for name, vip, port, backend, v6, check in (
            ("pp-nginx", VIP, NGINX_PORT, "bk1", False, "http, path: /healthz"),
            ("pp-nginx6", VIP6, NGINX_PORT, "bk1", True, "http, path: /healthz"),
            ("pp-nginx64", VIP64, NGINX_PORT, "bk1", False, "http, path: /healthz"),
            ("pp-haproxy", VIP, HAPROXY_PORT, "bk2", False, "http, path: /healthz"),
            ("pp-greeter", VIP, GREETER_PORT, "bk3", False, "tcp")):
        lines += [
            '  - { name: %s, vip: "%s", port: %d, protocol: tcp, forwarding: fullnat,' % (
                name, vip, port),
            "      proxy_protocol: v2, health: { type: %s, interval: 0.5, timeout: 0.4, "
            "rise: 2, fall: 3 }," % check,
            '      backends: [ { name: %s, address: "%s" } ] }' % (
                backend, backend_address(backend, v6)),
        ]
    lines += [
        "  - name: dns",
        "    vip: %s" % VIP,
        "    port: %d" % HTTP_PORT,
        "    protocol: udp",
        "    forwarding: fullnat",
        "    backends: [ { name: bk1, address: %s } ]" % backend_address("bk1"),
    ]
    return "\n".join(lines) + "\n"


class Topology:
    def __init__(self):
        self.servers = e2e_support.BackendServers()
        atexit.register(self.remove)
        e2e_support.make_bridge(UPLINK_BRIDGE)
        e2e_support.make_bridge(BACKEND_BRIDGE)
        # berthd's namespace: its two ports. The health probes leave through the downlink's
        # kernel interface, from the local addresses.
        run("ip", "netns", "add", LB)
        run("ip", "-n", LB, "link", "set", "lo", "up")
        e2e_support.make_af_packet_port(UPLINK, UPLINK_BRIDGE, netns=LB)
        e2e_support.make_af_packet_port(DOWNLINK, BACKEND_BRIDGE, netns=LB)
        # The router: on bridge A toward berthd, and on a point-to-point link to the client
        # whose MTU on the router's side is 1280.
        e2e_support.add_host(ROUTER, "nra" + TAG, UPLINK_BRIDGE, "198.18.0.254/24")
        run("ip", "-n", ROUTER, "addr", "add", "2001:db8::254/64", "dev", "e0", "nodad")
        run("ip", "netns", "add", CLIENT)
        run("ip", "-n", CLIENT, "link", "set", "lo", "up")
        # The client's own connections (wrk's, the pool case's 200) take ports below 40000, so
        # that none holds (or keeps in TIME_WAIT) a port that a case asks curl to bind: those
        # are 41000 and up.
        run("ip", "netns", "exec", CLIENT, "sysctl", "-qw",
            "net.ipv4.ip_local_port_range=20000 39999")
        run("ip", "link", "add", "e1", "netns", ROUTER, "type", "veth", "peer", "name", "e0",
            "netns", CLIENT)
        run("ip", "-n", ROUTER, "link", "set", "e1", "mtu", str(CLIENT_MTU))
        for namespace, interface, v4, v6 in ((ROUTER, "e1", "198.18.2.254/24", "2001:db8:2::254/64"),
                                             (CLIENT, "e0", "198.18.2.1/24", "2001:db8:2::1/64")):
            run("ip", "-n", namespace, "addr", "add", v4, "dev", interface)
            run("ip", "-n", namespace, "addr", "add", v6, "dev", interface, "nodad")
            run("ip", "-n", namespace, "link", "set", interface, "up")
            run("ip", "netns", "exec", namespace, "ethtool", "-K", interface, "tx", "off")
        run("ip", "netns", "exec", ROUTER, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        run("ip", "netns", "exec", ROUTER, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        run("ip", "-n", ROUTER, "route", "add", VIP + "/32", "via", "198.18.0.10")
        run("ip", "-n", ROUTER, "-6", "route", "add", VIP6 + "/128", "via", "2001:db8::10")
        run("ip", "-n", ROUTER, "-6", "route", "add", VIP64 + "/128", "via", "2001:db8::10")
        run("ip", "-n", CLIENT, "route", "add", "default", "via", "198.18.2.254")
        run("ip", "-n", CLIENT, "-6", "route", "add", "default", "via", "2001:db8:2::254")
        for backend in BACKENDS:
            namespace = namespace_of(backend)
            e2e_support.add_host(namespace, "n" + backend + TAG, BACKEND_BRIDGE,
                                 backend_address(backend) + "/24")
            run("ip", "-n", namespace, "addr", "add", backend_address(backend, True) + "/64",
                "dev", "e0", "nodad")
            self.servers.start(backend, namespace, dual=True)

    def remove(self):
        self.servers.stop_all()
        for namespace in NAMESPACES:
            run("ip", "netns", "del", namespace, check=False)
        for link in (UPLINK_BRIDGE, BACKEND_BRIDGE):
            run("ip", "link", "del", link, check=False)


def curl(vip, path="/", local_port=None, max_time=10):
    """A request from the client: (curl's status, body, the X-Backend header)."""
    return e2e_support.curl(CLIENT, vip, path, local_port, max_time)


def pattern_sha256(length):
    big = (bytes(range(251)) * (BIG_BYTES // 251 + 1))[:BIG_BYTES]
    digest = hashlib.sha256()
    left = length
    while left > 0:
        chunk = big[:min(left, len(big))]
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest()


class FullNat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-")
        cls.topology = Topology()
        cls.instance = e2e_support.berthd_on(config_text(BACKENDS), cls.directory, BERTHD,
                                             BERTHCTL, PREFIX, netns=LB)
        cls.proxied = proxy_servers.ProxyServers(cls.directory)
        cls.proxied.start_nginx(namespace_of("bk1"), NGINX_PORT, DOWNLOAD_BYTES)
        cls.proxied.start_haproxy(namespace_of("bk2"), HAPROXY_PORT)
        cls.proxied.start_greeter(namespace_of("bk3"), GREETER_PORT)
        cls.instance.start()
        for backend in BACKENDS:
            cls.wait_health(backend, "healthy", timeout=20)
        cls.wait_health(None, "healthy", timeout=20, services=PROXY_SERVICES + ("web64",))

    @classmethod
    def tearDownClass(cls):
        cls.proxied.stop_all()
        cls.instance.stop()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def reload(self, text):
        with open(self.instance.config, "w") as out:
            out.write(text)
        self.assertTrue(self.instance.berthctl("reload")["ok"])

    @classmethod
    def wait_health(cls, backend, state, timeout, services=("web", "web6")):
        """Until `backend` (None: every one) is in `state` in each of `services` (web and web6
        probe it apart)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = [b for b in cls.instance.berthctl("backends")["backends"]
                    if backend in (None, b["name"]) and b["service"] in services]
            if rows and all(row["health"] == state for row in rows):
                return
            if time.monotonic() > deadline:
                raise AssertionError("%s not %s: %s" % (backend, state, rows))
            time.sleep(0.1)

    def counter(self, name):
        return self.instance.counters().get(name, 0)

    def spread(self, vip, ports):
        seen = {}
        for port in ports:
            status, body, backend = curl(vip, local_port=port)
            self.assertEqual(status, 0, "port %d: %s" % (port, body))
            self.assertEqual(body.decode().strip(), backend)
            seen[port] = backend
        return seen

    def wrk(self, vip, port=HTTP_PORT, path="/keep"):
        host = "[%s]" % vip if ":" in vip else vip
        result = run("ip", "netns", "exec", CLIENT, "wrk", "-t1", "-c16", "-d3s",
                     "http://%s:%d%s" % (host, port, path), timeout=60)
        requests = int(re.search(r"(\d+) requests in", result.stdout).group(1))
        errors = re.search(r"Socket errors: (.*)", result.stdout)
        non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", result.stdout)
        return requests, errors.group(1) if errors else None, non_2xx, result.stdout

    def test_1_wrk_over_ipv4_and_ipv6_has_no_error_and_every_backend_serves(self):
        for vip, ports in ((VIP, range(41000, 41030)), (VIP6, range(41100, 41130))):
            shares = self.spread(vip, ports)
            self.assertEqual(set(shares.values()), set(BACKENDS), vip)
            requests, errors, non_2xx, text = self.wrk(vip)
            self.assertGreater(requests, 100, text)
            self.assertIsNone(errors, text)
            self.assertIsNone(non_2xx, text)
            print("\n  wrk to %s: %d requests in 3 s, no error" % (vip, requests), file=sys.stderr)
        self.assertGreater(self.counter("nat_opened"), 0)
        metrics = run("ip", "netns", "exec", LB, "curl", "-s",
                      "http://127.0.0.1:%d/metrics" % METRICS_PORT).stdout
        # One worker, no RSS: the whole range of each pair is worker 0's.
        self.assertIn('berth_nat_pool_worker_ports{port="downlink",address="%s",service="web",'
                      'backend="bk1",worker="0"} 64512' % LOCAL, metrics)
        self.assertRegex(metrics, r'berth_nat_events_total\{event="opened"\} [1-9]')
        spreads = self.instance.berthctl("status")["port_spreads"]
        self.assertIn("port 'downlink': no RSS, queue 0 takes everything; Full-NAT: 2 local "
                      "address(es), ports 1024-65535", spreads)

    def test_2_a_udp_request_is_answered_from_the_vip(self):
        command = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                   "s.settimeout(2); s.bind(('198.18.2.1', 5353)); "
                   "s.sendto(b'question', ('%s', %d)); data, peer = s.recvfrom(100); "
                   "print(peer[0], peer[1], data.decode())" % (VIP, HTTP_PORT))
        result = run("ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c", command)
        self.assertEqual(result.stdout.split(), [VIP, str(HTTP_PORT), "bk1", "question"])

    def test_3_a_failed_backend_leaves_the_others_connections_alone(self):
        first = self.spread(VIP, range(43000, 43030))
        failing = "bk2"
        survivor_port = next(p for p, b in first.items() if b != failing)
        download = {}

        def slow_download():
            download["result"] = curl(VIP, "/slow?s=5", local_port=survivor_port, max_time=40)

        thread = threading.Thread(target=slow_download)
        thread.start()
        time.sleep(1)
        # explain shows the running download's session from the client's side and from its
        # backend's.
        explained = self.instance.berthctl("explain", "--src", "198.18.2.1:%d" % survivor_port,
                                           "--dst", "%s:%d" % (VIP, HTTP_PORT))
        session = explained["session"]
        self.assertEqual((session["client"], session["client_port"]), ("198.18.2.1", survivor_port))
        self.assertEqual(session["local_address"], LOCAL)
        self.assertEqual(session["backend"], first[survivor_port])
        self.assertEqual(explained["next_backend"], first[survivor_port])
        reply = self.instance.berthctl(
            "explain", "--src", "%s:%d" % (session["backend_address"], HTTP_PORT),
            "--dst", "%s:%d" % (LOCAL, session["local_port"]))
        self.assertEqual(reply["session"]["client_port"], survivor_port, reply["text"])
        self.assertIn("to the client from the VIP", reply["next"])
        self.topology.servers.stop(failing)
        try:
            self.wait_health(failing, "unhealthy", timeout=10)
            after = self.spread(VIP, range(43100, 43130))
            self.assertNotIn(failing, after.values())
            thread.join(timeout=60)
            status, body, backend = download["result"]
            self.assertEqual(status, 0, body)
            self.assertEqual(backend, first[survivor_port])
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(BIG_BYTES))
        finally:
            thread.join(timeout=60)
            self.topology.servers.start(failing, namespace_of(failing), dual=True)
            self.wait_health(failing, "healthy", timeout=10)

    def test_4_a_rate_limited_100_mb_download_survives_a_table_change(self):
        # Rate-limited by the client's reading: about 6 s at 16 MB/s.
        download = {}
        output = os.path.join(self.directory, "download")

        def fetch():
            result = run("ip", "netns", "exec", CLIENT, "curl", "-sS", "--max-time", "60",
                         "--limit-rate", "16M", "-o", output,
                         "http://%s:%d/bytes?n=%d" % (VIP, HTTP_PORT, DOWNLOAD_BYTES),
                         check=False, timeout=90)
            download["status"] = result.returncode
            download["stderr"] = result.stderr

        thread = threading.Thread(target=fetch)
        thread.start()
        time.sleep(2)
        self.assertTrue(thread.is_alive(), "still downloading when the table changes")
        self.reload(config_text(BACKENDS, {"bk1": 2, "bk2": 1, "bk3": 3}))
        weights = {b["name"]: b["weight"] for b in self.instance.berthctl("backends")["backends"]
                   if b["service"] == "web"}
        self.assertEqual(weights, {"bk1": 2, "bk2": 1, "bk3": 3}, "the new table serves")
        changed_mid_transfer = thread.is_alive()
        thread.join(timeout=90)
        self.reload(config_text(BACKENDS))
        self.assertTrue(changed_mid_transfer, "the table changed while the download ran")
        self.assertEqual(download["status"], 0, download["stderr"])
        digest = hashlib.sha256()
        with open(output, "rb") as received:
            for block in iter(lambda: received.read(1 << 20), b""):
                digest.update(block)
        self.assertEqual(digest.hexdigest(), pattern_sha256(DOWNLOAD_BYTES), "intact")
        os.unlink(output)

    def test_5_path_mtu_discovery_works_through_berth(self):
        # The client's MSS says 1460; the backend's full segments meet the router's 1280 link,
        # and only the translated "fragmentation needed" (or "packet too big") lets the
        # download finish. The backends forget what earlier cases taught them first.
        for backend in BACKENDS:
            run("ip", "netns", "exec", namespace_of(backend), "ip", "route", "flush", "cache")
            run("ip", "netns", "exec", namespace_of(backend), "ip", "-6", "route", "flush",
                "cache")
        before = self.counter("drop_nat_icmp_not_translatable")
        for vip, local, family in ((VIP, LOCAL, "-4"), (VIP6, LOCAL6, "-6")):
            status, body, backend = curl(vip, "/big", max_time=20)
            self.assertEqual(status, 0, body)
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(BIG_BYTES), vip)
            route = run("ip", "netns", "exec", namespace_of(backend), "ip", family, "route",
                        "get", local).stdout
            self.assertIn("mtu %d" % CLIENT_MTU, route, "%s learned the path's MTU" % backend)
            print("\n  %s's route to the local address: %s" % (backend, route.strip()),
                  file=sys.stderr)
        self.assertEqual(self.counter("drop_nat_icmp_not_translatable"), before)

    def test_6_a_pool_of_two_addresses_of_100_ports_refuses_connection_201(self):
        # One backend, 2 IPv4 local addresses x 100 ports, one worker: 200 connections at once.
        # berthd restarts for it (a port's pool needs a restart), and again after, since the
        # pool's tuples are held 60 s once their connections close.
        self.instance.stop()
        with open(self.instance.config, "w") as out:
            out.write(config_text(["bk1"], pool=(["198.18.1.20", "198.18.1.21", '"%s"' % LOCAL6],
                                                  "30000-30099")))
        self.instance.start()
        self.wait_health("bk1", "healthy", timeout=20)
        holder = os.path.join(self.directory, "hold.py")
        with open(holder, "w") as out:
            out.write(HOLDER % (VIP, HTTP_PORT, VIP, HTTP_PORT))
        try:
            result = run("ip", "netns", "exec", CLIENT, "/usr/bin/python3", holder, timeout=120)
            self.assertEqual(result.stdout.split(), ["held", "200", "refused", "answered", "200"],
                             result.stdout + result.stderr)
            self.assertGreaterEqual(self.counter("nat_ports_exhausted"), 1)
            self.assertEqual(self.counter("nat_opened"), 200)
        finally:
            self.instance.stop()
            with open(self.instance.config, "w") as out:
                out.write(config_text(BACKENDS))
            self.instance.start()
            for backend in BACKENDS:
                self.wait_health(backend, "healthy", timeout=20)

    def test_7_a_backend_that_cannot_route_to_the_local_address_fails_its_checks(self):
        # The probes come from the local addresses, held by the downlink's kernel interface
        # (host-sized; the IPv6 one deprecated, so the kernel's own traffic never takes it).
        shown = run("ip", "-n", LB, "-o", "addr", "show", "dev", TAP).stdout
        self.assertIn("inet %s/32" % LOCAL, shown)
        self.assertRegex(shown, r"inet6 %s/128 .*deprecated" % LOCAL6)
        # bk3 loses its way back to the local addresses, as it would with a missing route:
        # its SYN-ACKs go nowhere, so the probes time out and it turns unhealthy, while bk1
        # and bk2 stay healthy. Its way back restored, it serves again.
        namespace = namespace_of("bk3")
        run("ip", "-n", namespace, "route", "add", "blackhole", LOCAL + "/32")
        run("ip", "-n", namespace, "-6", "route", "add", "blackhole", LOCAL6 + "/128")
        try:
            self.wait_health("bk3", "unhealthy", timeout=10)
            # The log line of the change says where the probes came from.
            changes = [line for line in list(self.instance.lines)
                       if "backend 'bk3' (" in line and "healthy -> unhealthy" in line]
            for local in (LOCAL, LOCAL6):
                self.assertTrue(any("via %s from %s)" % (TAP, local) in line for line in changes),
                                changes)
            for backend in ("bk1", "bk2"):
                self.wait_health(backend, "healthy", timeout=1)
            served = self.spread(VIP, range(44000, 44020))
            self.assertNotIn("bk3", served.values())
        finally:
            run("ip", "-n", namespace, "route", "del", "blackhole", LOCAL + "/32", check=False)
            run("ip", "-n", namespace, "-6", "route", "del", "blackhole", LOCAL6 + "/128",
                check=False)
        self.wait_health("bk3", "healthy", timeout=10)

    def test_9_nat64_ipv6_clients_reach_ipv4_backends_and_path_mtu_discovery_works(self):
        # HTTP from the IPv6 client to the NAT64 VIP: every backend serves over IPv4, and wrk
        # sees no error.
        shares = self.spread(VIP64, range(45000, 45030))
        self.assertEqual(set(shares.values()), set(BACKENDS))
        requests, errors, non_2xx, text = self.wrk(VIP64)
        self.assertGreater(requests, 100, text)
        self.assertIsNone(errors, text)
        self.assertIsNone(non_2xx, text)
        print("\n  wrk to the NAT64 VIP %s: %d requests in 3 s, no error" % (VIP64, requests),
              file=sys.stderr)
        # The client's MSS (1440) lets the backends send 1480-byte IPv4 segments: 1500 bytes as
        # IPv6, too big for the router's 1280 link. Only the router's packet too big, translated
        # into fragmentation needed with the MTU less 20, lets the download finish.
        for backend in BACKENDS:
            run("ip", "netns", "exec", namespace_of(backend), "ip", "route", "flush", "cache")
        before = self.counter("drop_nat_icmp_not_translatable")
        status, body, backend = curl(VIP64, "/big", max_time=20)
        self.assertEqual(status, 0, body)
        self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(BIG_BYTES))
        route = run("ip", "netns", "exec", namespace_of(backend), "ip", "-4", "route", "get",
                    LOCAL).stdout
        self.assertIn("mtu %d" % (CLIENT_MTU - 20), route, "%s learned the path's MTU" % backend)
        print("\n  %s's route to the local address after a NAT64 download: %s" % (
            backend, route.strip()), file=sys.stderr)
        self.assertEqual(self.counter("drop_nat_icmp_not_translatable"), before)
        for event in ("translated_to_ipv4", "translated_to_ipv6", "icmp_translated"):
            self.assertGreater(self.counter("nat_" + event), 0, event)

    def wrk_through_proxy_protocol(self, port, log):
        """wrk to a PROXY protocol service: no error, and every request it made logged by the
        backend with the client's own address, read from the header."""
        before = len(log())
        requests, errors, non_2xx, text = self.wrk(VIP, port, "/who")
        self.assertGreater(requests, 100, text)
        self.assertIsNone(errors, text)
        self.assertIsNone(non_2xx, text)
        # A server logs a request once it has answered it, which may be just after wrk has read
        # the answer.
        deadline = time.monotonic() + 5
        while True:
            lines = [line for line in log()[before:] if line[2] == "/who"]
            if len(lines) >= requests or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertGreaterEqual(len(lines), requests, "every request logged")
        addresses = {line[0] for line in lines}
        self.assertEqual(addresses, {"198.18.2.1"}, "the client's own address, always")
        self.assertTrue(all(1024 <= int(line[1]) <= 65535 for line in lines), lines[:3])
        return requests

    def test_8a_nginx_logs_the_real_client_of_every_request(self):
        sent_before = self.counter("nat_proxy_header_sent")
        requests = self.wrk_through_proxy_protocol(NGINX_PORT, self.proxied.nginx_log)
        print("\n  wrk to nginx with proxy_protocol: %d requests in 3 s, each logged from "
              "198.18.2.1" % requests, file=sys.stderr)
        # Over IPv6 the header carries the IPv6 client, to an IPv4 backend through NAT64 too.
        for vip in (VIP6, VIP64):
            result = run("ip", "netns", "exec", CLIENT, "curl", "-sS", "--max-time", "5",
                         "http://[%s]:%d/who" % (vip, NGINX_PORT))
            self.assertEqual(result.stdout.strip(), "2001:db8:2::1", vip)
            asked = [line for line in self.proxied.nginx_log() if line[2] == "/who"]
            self.assertEqual(asked[-1][0], "2001:db8:2::1", vip)
        # One header per connection: wrk's 16 and curl's two.
        self.assertGreaterEqual(self.counter("nat_proxy_header_sent") - sent_before, 18)

    def test_8b_haproxy_logs_the_real_client_of_every_request(self):
        requests = self.wrk_through_proxy_protocol(HAPROXY_PORT, self.proxied.haproxy_log)
        print("\n  wrk to HAProxy with accept-proxy: %d requests in 3 s, each logged from "
              "198.18.2.1" % requests, file=sys.stderr)

    def test_8c_a_server_that_speaks_first_gets_the_header_before_it_speaks(self):
        # The client sends nothing until the server greets; the header rides the ACK that ends
        # its handshake.
        result = run("ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c",
                     GREETED % (VIP, GREETER_PORT), timeout=60)
        lines = result.stdout.split("\n")
        self.assertEqual(len([line for line in lines if line.startswith("greeted")]), 5,
                         result.stdout + result.stderr)
        for line in lines:
            if line.startswith("greeted"):
                _, port, greeting = line.split(" ", 2)
                self.assertEqual(greeting, "220 greeter sees 198.18.2.1:%s|221 bye" % port)
        # explain shows a greeted connection's session with its header acknowledged.
        holder = subprocess.Popen(
            ["ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c", GREETED_AND_HELD % (
                VIP, GREETER_PORT)], stdout=subprocess.PIPE, text=True)
        try:
            port = int(holder.stdout.readline().split()[1])
            explained = self.instance.berthctl("explain", "--src", "198.18.2.1:%d" % port,
                                               "--dst", "%s:%d" % (VIP, GREETER_PORT))
            self.assertEqual(explained["session"]["proxy_header"], "acknowledged",
                             explained["text"])
            self.assertEqual(explained["session"]["client_sequence_shift"], 28)
            self.assertIn("PROXY header acknowledged (the client's bytes +28 toward the backend)",
                          explained["text"])
        finally:
            e2e_support.stop_process(holder, stop_signal=signal.SIGTERM, timeout=10)
            holder.stdout.close()

    def test_8d_a_100_mb_download_with_loss_and_sack_completes_intact(self):
        # nftables in the client's namespace drops every 50th segment from the VIP: the
        # client SACKs around the holes, nginx recovers with SACK, and berth shifts the
        # client's numbers across all of it.
        namespace = namespace_of("bk1")
        recoveries_before = sack_recoveries(namespace)
        run("ip", "netns", "exec", CLIENT, "nft", "add", "table", "inet", "berth_loss")
        try:
            run("ip", "netns", "exec", CLIENT, "nft", "add", "chain", "inet", "berth_loss",
                "input", "{ type filter hook input priority 0; }")
            run("ip", "netns", "exec", CLIENT, "nft", "add", "rule", "inet", "berth_loss",
                "input", "tcp", "sport", str(NGINX_PORT), "numgen", "inc", "mod", "50", "0",
                "counter", "drop")
            output = os.path.join(self.directory, "proxied-download")
            result = run("ip", "netns", "exec", CLIENT, "curl", "-sS", "--max-time", "60",
                         "--limit-rate", "16M", "-o", output,
                         "http://%s:%d/files/big" % (VIP, NGINX_PORT), check=False, timeout=90)
            self.assertEqual(result.returncode, 0, result.stderr)
            dropped = run("ip", "netns", "exec", CLIENT, "nft", "list", "table", "inet",
                          "berth_loss").stdout
        finally:
            run("ip", "netns", "exec", CLIENT, "nft", "delete", "table", "inet", "berth_loss",
                check=False)
        digest = hashlib.sha256()
        with open(output, "rb") as received:
            for block in iter(lambda: received.read(1 << 20), b""):
                digest.update(block)
        os.unlink(output)
        self.assertEqual(digest.hexdigest(), pattern_sha256(DOWNLOAD_BYTES), "intact")
        recoveries = sack_recoveries(namespace) - recoveries_before
        self.assertGreater(recoveries, 0, "nginx recovered with SACK")
        print("\n  100 MB through the PROXY protocol with every 50th segment dropped: intact, "
              "%d SACK recoveries" % recoveries, file=sys.stderr)
        lost = int(re.search(r"counter packets (\d+)", dropped).group(1))
        self.assertGreater(lost, 100, dropped)


def sack_recoveries(namespace):
    """The kernel's count of loss recoveries that SACK drove, in `namespace`."""
    text = run("ip", "netns", "exec", namespace, "nstat", "-az", "TcpExtTCPSackRecovery").stdout
    match = re.search(r"TcpExtTCPSackRecovery\s+(\d+)", text)
    return int(match.group(1)) if match else 0


# Run in the client's namespace: five connections to a server that speaks first; each waits for
# the greeting without sending a byte, then says QUIT.
GREETED = """
import socket
for _ in range(5):
    connection = socket.create_connection(("%s", %d), timeout=5)
    greeting = connection.recv(200).decode().strip()
    connection.sendall(b"QUIT\\r\\n")
    bye = connection.recv(200).decode().strip()
    print("greeted", connection.getsockname()[1], greeting + "|" + bye)
    connection.close()
"""

# The same, once, and the connection held open (until the test stops it) after the greeting.
GREETED_AND_HELD = """
import socket, sys, time
connection = socket.create_connection(("%s", %d), timeout=5)
greeting = connection.recv(200).decode().strip()
print("greeted", connection.getsockname()[1], greeting, flush=True)
time.sleep(30)
"""

# Run in the client's namespace: opens 200 connections to the VIP and keeps them, sees the 201st
# refused (its SYNs are dropped: connect times out), then asks over each of the 200 and reads
# every answer.
HOLDER = """
import socket
held = []
for _ in range(200):
    held.append(socket.create_connection(("%s", %d), timeout=5))
print("held", len(held))
try:
    socket.create_connection(("%s", %d), timeout=3)
    print("opened")
except OSError:
    print("refused")
answered = 0
for connection in held:
    connection.sendall(b"GET /keep HTTP/1.1\\r\\nHost: vip\\r\\n\\r\\n")
    if connection.recv(4096).startswith(b"HTTP/1.1 200"):
        answered += 1
print("answered", answered)
"""


if __name__ == "__main__":
    e2e_support.main()
