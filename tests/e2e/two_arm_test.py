#!/usr/bin/python3
"""End to end: two-arm. berthd has two af_packet ports, an uplink on the clients' segment and a
downlink on the backends', and nothing else joins the two but a router the backends answer
through. Traffic received on the uplink goes to the backends through the downlink; berth's
answers to clients leave through the uplink.

  client 198.18.0.1 ---- bridge A ---- berthd's uplink 198.18.0.10 (egress: downlink)
                            |
                         router 198.18.0.254 / 198.18.1.254
                            |
  bk1, bk2 198.18.1.11-12 - bridge B ---- berthd's downlink 198.18.1.10, MTU 1400
  (VIP on lo, default via the router)

The cases: HTTP to the L2 DSR VIP reaches both backends, which sit only on the downlink's
segment; a UDP datagram with DF too big for the downlink (IPIP to a backend through the router)
is answered with "fragmentation needed" on the uplink, and the client's kernel takes the MTU.
Everything the test made is removed at the end, on failure too. Needs root.

Usage: two_arm_test.py BERTHD BERTHCTL
"""
import atexit
import shutil
import sys
import tempfile
import time
import unittest

import e2e_support
from e2e_support import HTTP_PORT, TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
LB = "berth-2a-" + TAG
CLIENT = "berth-2c-" + TAG
ROUTER = "berth-2r-" + TAG
BACKENDS = ["bk1", "bk2"]
NAMESPACES = [LB, CLIENT, ROUTER] + ["berth-2%s-%s" % (name, TAG) for name in BACKENDS]
CLIENT_BRIDGE = "b2a" + TAG
BACKEND_BRIDGE = "b2b" + TAG
UPLINK = "b2u" + TAG
DOWNLINK = "b2d" + TAG
PREFIX = "berth-two-arm-" + TAG
VIP = "198.18.100.1"
UDP_PORT = 5353
DOWNLINK_MTU = 1400


def namespace_of(backend):
    return "berth-2%s-%s" % (backend, TAG)


def backend_address(backend):
    return "198.18.1.%d" % (10 + int(backend[2:]))


def backend_mac(backend):
    return "02:b2:00:00:00:%02x" % int(backend[2:])


def config_text():
    lines = [
        "dataplane:",
        '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
        '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
        '        "--vdev", "net_af_packet0,iface=%s", "--vdev", "net_af_packet1,iface=%s"]' % (
            UPLINK, DOWNLINK),
        "  ports:",
        "    - { name: uplink, device: net_af_packet0, ipv4: 198.18.0.10, egress: downlink }",
        "    - { name: downlink, device: net_af_packet1, ipv4: 198.18.1.10, mtu: %d," % DOWNLINK_MTU,
        "        gateway: 198.18.1.254 }",
        "services:",
        "  - name: web",
        "    vip: %s" % VIP,
        "    port: %d" % HTTP_PORT,
        "    protocol: tcp",
        "    forwarding: l2dsr",
        "    announce: arp",
        "    backends:",
    ] + ['      - { name: %s, address: %s, mac: "%s" }' % (
        backend, backend_address(backend), backend_mac(backend)) for backend in BACKENDS] + [
        "  - name: dns",
        "    vip: %s" % VIP,
        "    port: %d" % UDP_PORT,
        "    protocol: udp",
        "    backends: [ { name: d1, address: %s } ]" % backend_address("bk1"),
    ]
    return "\n".join(lines) + "\n"


class Topology:
    def __init__(self):
        self.servers = e2e_support.BackendServers()
        atexit.register(self.remove)
        e2e_support.make_bridge(CLIENT_BRIDGE)
        e2e_support.make_bridge(BACKEND_BRIDGE)
        run("ip", "netns", "add", LB)
        run("ip", "-n", LB, "link", "set", "lo", "up")
        e2e_support.make_af_packet_port(UPLINK, CLIENT_BRIDGE, netns=LB)
        e2e_support.make_af_packet_port(DOWNLINK, BACKEND_BRIDGE, netns=LB)
        e2e_support.add_host(CLIENT, "c2" + TAG, CLIENT_BRIDGE, "198.18.0.1/24")
        run("ip", "-n", CLIENT, "route", "add", VIP + "/32", "dev", "e0")
        e2e_support.add_host(ROUTER, "r2a" + TAG, CLIENT_BRIDGE, "198.18.0.254/24")
        run("ip", "link", "add", "r2b" + TAG, "type", "veth", "peer", "name", "e1", "netns", ROUTER)
        run("ip", "link", "set", "r2b" + TAG, "master", BACKEND_BRIDGE, "up")
        run("ip", "-n", ROUTER, "addr", "add", "198.18.1.254/24", "dev", "e1")
        run("ip", "-n", ROUTER, "link", "set", "e1", "up")
        run("ip", "netns", "exec", ROUTER, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for backend in BACKENDS:
            e2e_support.add_dsr_backend(self.servers, backend, namespace_of(backend),
                                        "2" + backend + TAG, BACKEND_BRIDGE,
                                        backend_address(backend) + "/24", backend_mac(backend),
                                        VIP, default_via="198.18.1.254")

    def remove(self):
        self.servers.stop_all()
        for namespace in NAMESPACES:
            run("ip", "netns", "del", namespace, check=False)
        for bridge in (CLIENT_BRIDGE, BACKEND_BRIDGE):
            run("ip", "link", "del", bridge, check=False)


# Sends one UDP datagram of `size` bytes with DF from a connected socket, waits for an answer
# from the network, and sends again: EMSGSIZE then says the kernel took an MTU from an ICMP
# "fragmentation needed". Prints the path MTU the socket ends with.
OVERSIZED_SENDER = r"""
import errno, socket, sys, time
vip, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER: IP_PMTUDISC_DO
sender.connect((vip, port))
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        sender.send(b"x" * (size - 28))
    except OSError as error:
        if error.errno == errno.EMSGSIZE:
            break
        raise
    time.sleep(0.3)
print(sender.getsockopt(socket.IPPROTO_IP, 14))  # IP_MTU
"""


class TwoArm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-two-arm-")
        cls.instance = e2e_support.berthd_on(config_text(), cls.directory, BERTHD, BERTHCTL,
                                             PREFIX, netns=LB)
        cls.topology = Topology()
        cls.instance.start()

    @classmethod
    def tearDownClass(cls):
        cls.instance.stop()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def test_1_vip_traffic_reaches_backends_that_only_the_downlink_sees(self):
        answered_by = set()
        deadline = time.monotonic() + 20
        port = 41000
        while answered_by != set(BACKENDS):
            self.assertLess(time.monotonic(), deadline, "answered by %s" % answered_by)
            status, body, backend = e2e_support.curl(CLIENT, VIP, local_port=port, max_time=3)
            port += 1
            if status == 0:
                self.assertEqual(body.decode().strip(), backend)
                answered_by.add(backend)
        counters = self.instance.counters()
        self.assertEqual(counters["drop_no_egress_queue"], 0)
        self.assertEqual(counters["drop_next_hop_unresolved"], 0, counters)

    def test_2_fragmentation_needed_goes_back_through_the_uplink(self):
        before = self.instance.counters()["icmp_too_big_replies"]
        result = run("ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c", OVERSIZED_SENDER,
                     VIP, str(UDP_PORT), "1450", check=False, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        # The downlink's MTU less IPIP's 20 bytes: what the client may send through berth.
        self.assertEqual(int(result.stdout.strip()), DOWNLINK_MTU - 20, self.instance.lines[-20:])
        self.assertGreater(self.instance.counters()["icmp_too_big_replies"], before)


if __name__ == "__main__":
    e2e_support.main()
