#!/usr/bin/python3
"""End to end: a VLAN trunk on one DPDK port. berthd's af_packet port carries an untagged port
and ports on VLANs 10 and 20, each with its own address and a gateway it resolves by ARP;
VLAN 10's has a tap. This kernel has no 802.1Q devices, so the far end of the trunk is a scapy
process on a raw socket (vlan_peer.py): the gateway of every segment and the client.

  peer (scapy, namespace vp<TAG>) --- bridge --- berthd's port (namespace vl<TAG>)
    untagged: gateway 198.18.0.1     port 198.18.0.10
    VLAN 10:  gateway 198.18.10.1    port 198.18.10.10, tap bvt<TAG>
    VLAN 20:  gateway 198.18.20.1    port 198.18.20.10

The cases: berth asks for each gateway on its own VLAN, from that VLAN's address; a SYN to the
VIP on each segment leaves encapsulated through that segment's gateway, tagged as it came, from
the segment's address; one on VLAN 30 is dropped as vlan_not_configured; a ping of VLAN 10's
address is answered by the kernel behind the tap, the reply tagged 10. Everything the test made
is removed at the end, on failure too. Needs root.

Usage: vlan_trunk_test.py BERTHD BERTHCTL
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import e2e_support
from e2e_support import HERE, TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
LB = "berth-vl-" + TAG
PEER = "berth-vp-" + TAG
BRIDGE = "bvb" + TAG
PORT = "bvp" + TAG
TAP = "bvt" + TAG
PREFIX = "berth-vlan-" + TAG
VIP = "198.18.100.1"
BACKEND = "198.18.1.2"
PEER_SECONDS = 30


def config_text():
    return "\n".join([
        "dataplane:",
        '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
        '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
        '        "--vdev", "net_af_packet0,iface=%s"]' % PORT,
        "  ports:",
        "    - { name: untagged, device: net_af_packet0, ipv4: 198.18.0.10, gateway: 198.18.0.1 }",
        "    - { name: v10, device: net_af_packet0, vlan: 10, ipv4: 198.18.10.10,",
        "        gateway: 198.18.10.1, exception: { kind: tap, name: %s } }" % TAP,
        "    - { name: v20, device: net_af_packet0, vlan: 20, ipv4: 198.18.20.10,",
        "        gateway: 198.18.20.1 }",
        "services:",
        "  - { name: web, vip: %s, port: 80, protocol: tcp," % VIP,
        "      backends: [ { name: a, address: %s } ] }" % BACKEND,
    ]) + "\n"


def remove_topology():
    for namespace in (LB, PEER):
        run("ip", "netns", "del", namespace, check=False)
    run("ip", "link", "del", BRIDGE, check=False)


def make_topology():
    atexit.register(remove_topology)
    e2e_support.make_bridge(BRIDGE)
    run("ip", "netns", "add", LB)
    run("ip", "-n", LB, "link", "set", "lo", "up")
    e2e_support.make_af_packet_port(PORT, BRIDGE, netns=LB)
    run("ip", "netns", "add", PEER)
    run("ip", "link", "add", "bvq" + TAG, "type", "veth", "peer", "name", "e0", "netns", PEER)
    run("ip", "link", "set", "bvq" + TAG, "master", BRIDGE, "up")
    # The peer's kernel has no address here and must stay quiet: scapy speaks for it.
    run("ip", "netns", "exec", PEER, "sysctl", "-qw", "net.ipv6.conf.e0.disable_ipv6=1")
    run("ip", "-n", PEER, "link", "set", "e0", "up")


def mac_of(namespace, interface):
    shown = run("ip", "-n", namespace, "-o", "link", "show", "dev", interface).stdout
    return shown.split("link/ether ")[1].split()[0]


class VlanTrunk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-vlan-")
        cls.instance = e2e_support.berthd_on(config_text(), cls.directory, BERTHD, BERTHCTL,
                                             PREFIX, netns=LB)
        make_topology()
        # The peer listens before berthd starts, so it answers berth's first ARP requests.
        peer = subprocess.Popen(
            ["ip", "netns", "exec", PEER, "/usr/bin/python3", os.path.join(HERE, "vlan_peer.py"),
             "e0", mac_of(LB, PORT), VIP, BACKEND, str(PEER_SECONDS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        atexit.register(lambda: peer.poll() is None and peer.kill())
        assert peer.stdout.readline().strip() == "listening", peer.stderr.read()
        cls.instance.start()
        try:
            output, errors = peer.communicate(timeout=PEER_SECONDS + 30)
            assert peer.returncode == 0, errors
            cls.seen = json.loads(output.strip().splitlines()[-1])
            cls.counters = cls.instance.counters()
        finally:
            cls.instance.stop()
        cls.log = "".join(cls.instance.lines)

    @classmethod
    def tearDownClass(cls):
        remove_topology()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def test_1_berth_asks_for_each_gateway_on_its_vlan_from_its_address(self):
        asked = {(vlan, source, target) for vlan, source, target in self.seen["arp_requests"]}
        for vlan in (0, 10, 20):
            self.assertIn((vlan, "198.18.%d.10" % vlan, "198.18.%d.1" % vlan), asked, self.log)
        for vlan, source, _ in asked:
            self.assertEqual(source, "198.18.%d.10" % vlan, "an ARP request on the wrong VLAN")

    def test_2_vip_traffic_leaves_through_its_segments_gateway_tagged_as_it_came(self):
        encapsulated = self.seen["encapsulated"]
        for vlan in (0, 10, 20):
            self.assertIn(str(40000 + vlan), encapsulated, (self.seen, self.log))
            self.assertEqual(encapsulated[str(40000 + vlan)],
                             [vlan, "02:00:00:00:%02d:01" % vlan, "198.18.%d.10" % vlan])
        self.assertNotIn("40030", encapsulated)
        self.assertGreater(self.counters["drop_vlan_not_configured"], 0)
        self.assertEqual(self.seen["untagged_on_a_vlan"], [])

    def test_3_the_kernel_behind_vlan_10s_tap_answers_a_ping_tagged(self):
        self.assertIn([10, "198.18.10.10"], self.seen["echo_replies"], self.seen)
        self.assertTrue(all(vlan == 10 for vlan, _ in self.seen["echo_replies"]))
        self.assertGreater(self.counters["to_kernel_icmp"], 0)
        self.assertGreater(self.counters["from_kernel"], 0)

    def test_4_the_tap_goes_with_berthd(self):
        self.assertNotEqual(
            run("ip", "-n", LB, "link", "show", "dev", TAP, check=False).returncode, 0)


if __name__ == "__main__":
    e2e_support.main()
