#!/usr/bin/python3
"""VLAN ports inside berthd (docs/vlans.md), on one net_pcap device with an untagged port and
ports on VLANs 10 and 20, each with its own address and gateway; VLAN 10's has a tap. Read back
from the output pcap by scapy: VIP traffic leaves encapsulated through the gateway of the VLAN
it came in on, tagged with that VLAN (untagged from the untagged port); berth's ARP request for
VLAN 20's gateway leaves tagged 20; an ARP request for VLAN 10's address is answered on VLAN 10
and not on the untagged segment; a ping of VLAN 10's address reaches its tap untagged, and the
kernel's own frames (its ARP for the pinging client) leave tagged 10. A frame on VLAN 30, which
no port has, is dropped as vlan_not_configured. Run by the sanitizer build too. Needs root
(/dev/net/tun).

Usage: berthd_vlan_pcap_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import interrupt_and_wait, wait_for_line  # noqa: E402

from scapy.all import ARP, ICMP, IP, TCP, Dot1Q, Ether, rdpcap, wrpcap  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
PREFIX = "berth-vlan-pcap-%d" % os.getpid()
TAP = "bvl%d" % (os.getpid() % 100000)
PORT_MAC = "02:70:63:61:70:00"  # what the pcap PMD gives its first port
CLIENT_MAC = "02:00:00:00:00:02"
VIP = "198.18.100.1"
BACKEND = "198.18.1.2"
GATEWAY_MAC = {0: "02:00:00:00:00:fe", 10: "02:00:00:00:10:fe"}
PORT_ADDRESS = {0: "198.18.0.10", 10: "198.18.10.10", 20: "198.18.20.10"}

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "0@0,1@1",
        "--vdev", "net_pcap0,rx_pcap={input},tx_pcap={output}", "--log-level", "lib.eal:error"]
  ports:
    - {{ name: untagged, device: net_pcap0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }}
    - {{ name: v10, device: net_pcap0, vlan: 10, ipv4: 198.18.10.10,
        gateway_mac: "02:00:00:00:10:fe", exception: {{ kind: tap, name: {tap} }} }}
    - {{ name: v20, device: net_pcap0, vlan: 20, ipv4: 198.18.20.10, gateway: 198.18.20.1 }}
services:
  - name: web
    vip: {vip}
    port: 80
    protocol: tcp
    backends: [ {{ name: a, address: {backend} }} ]
"""


def on_vlan(vlan, destination=PORT_MAC):
    frame = Ether(dst=destination, src=CLIENT_MAC)
    return frame / Dot1Q(vlan=vlan) if vlan is not None else frame


def syn(vlan, source_port):
    return on_vlan(vlan) / IP(src="198.18.0.1", dst=VIP) / TCP(sport=source_port, dport=80, flags="S")


def frames():
    return [
        syn(None, 40000),
        syn(10, 40010),
        syn(20, 40020),  # VLAN 20's gateway is not resolved: next_hop_unresolved
        syn(30, 40030),  # no port on VLAN 30
        on_vlan(10) / IP(src="198.18.10.1", dst=PORT_ADDRESS[10]) / ICMP(type=8, id=7, seq=1),
        on_vlan(10, "ff:ff:ff:ff:ff:ff") /
        ARP(op=1, hwsrc=CLIENT_MAC, psrc="198.18.10.1", pdst=PORT_ADDRESS[10]),
        on_vlan(None, "ff:ff:ff:ff:ff:ff") /
        ARP(op=1, hwsrc=CLIENT_MAC, psrc="198.18.0.1", pdst=PORT_ADDRESS[10]),
    ]


def vlan_of(frame):
    return frame[Dot1Q].vlan if Dot1Q in frame else None


class BerthdVlanPcap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/dev/net/tun"):
            raise unittest.SkipTest("no /dev/net/tun")
        cls.directory = tempfile.mkdtemp(prefix="berthd-vlan-")
        input_path = os.path.join(cls.directory, "in.pcap")
        output_path = os.path.join(cls.directory, "out.pcap")
        wrpcap(input_path, frames())
        config = os.path.join(cls.directory, "berth.yaml")
        with open(config, "w") as out:
            out.write(CONFIG.format(prefix=PREFIX, input=input_path, output=output_path, tap=TAP,
                                    vip=VIP, backend=BACKEND))
        socket = os.path.join(cls.directory, "berth.sock")
        process = subprocess.Popen([BERTHD, "--", "--config", config, "--control-socket", socket,
                                    "--drain-state", "off"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        try:
            wait_for_line(lines, process, "forwarding:")
            wait_for_line(lines, process, "kernel interface %s (tap) on v10" % TAP)
            # The replay is over within a loop or two. Then the kernel answers the ping, asking
            # for the client's MAC first, and berth asks for VLAN 20's gateway.
            deadline = time.monotonic() + 20
            while True:
                reply = subprocess.run([BERTHCTL, "stats", "--json", "--socket", socket],
                                       capture_output=True, text=True, timeout=30)
                assert reply.returncode == 0, reply.stderr
                counters = json.loads(reply.stdout)["stats"]["counters"]
                if counters["rx_packets"] == len(frames()) and counters["from_kernel"] > 0:
                    break
                assert time.monotonic() < deadline, counters
                time.sleep(0.2)
            cls.counters = counters
            cls.tap_gone = None
        finally:
            cls.returncode = interrupt_and_wait(process)
            reader.join(timeout=10)
            cls.log = "".join(lines)
            shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        cls.sent = rdpcap(output_path)
        cls.tap_gone = subprocess.run(["ip", "link", "show", "dev", TAP],
                                      capture_output=True).returncode != 0
        shutil.rmtree(cls.directory, ignore_errors=True)

    def summaries(self):
        return [f.summary() for f in self.sent]

    def test_berthd_stops_cleanly_and_removes_the_tap(self):
        self.assertEqual(self.returncode, 0, self.log)
        self.assertTrue(self.tap_gone)

    def test_vip_traffic_leaves_through_its_vlans_gateway_with_its_tag(self):
        forwarded = [f for f in self.sent if IP in f and f[IP].dst == BACKEND]
        by_client_port = {f[TCP].sport: f for f in forwarded}
        self.assertEqual(sorted(by_client_port), [40000, 40010], self.summaries())
        for vlan, client_port in ((0, 40000), (10, 40010)):
            frame = by_client_port[client_port]
            self.assertEqual(vlan_of(frame), vlan or None)
            self.assertEqual(frame[Ether].dst, GATEWAY_MAC[vlan])
            self.assertEqual(frame[Ether].src, PORT_MAC)
            self.assertEqual(frame[IP].src, PORT_ADDRESS[vlan], "the outer source is the VLAN's")
        self.assertEqual(self.counters["drop_next_hop_unresolved"], 1, "VLAN 20's SYN")
        self.assertEqual(self.counters["drop_vlan_not_configured"], 1, "VLAN 30's SYN")

    def test_berths_arp_request_for_a_vlans_gateway_is_tagged(self):
        requests = [f for f in self.sent if ARP in f and f[ARP].op == 1 and f[ARP].pdst == "198.18.20.1"]
        self.assertTrue(requests, self.summaries())
        for request in requests:
            self.assertEqual(vlan_of(request), 20)
            self.assertEqual(request[ARP].psrc, PORT_ADDRESS[20])

    def test_arp_for_a_vlan_address_is_answered_on_that_vlan_only(self):
        replies = [f for f in self.sent if ARP in f and f[ARP].op == 2]
        self.assertEqual(len(replies), 1, self.summaries())
        self.assertEqual(vlan_of(replies[0]), 10)
        self.assertEqual(replies[0][ARP].psrc, PORT_ADDRESS[10])
        self.assertEqual(self.counters["drop_arp_nd_not_answered"], 1, "the untagged question")

    def test_the_vlans_kernel_interface_gets_its_frames_and_its_own_leave_tagged(self):
        self.assertEqual(self.counters["to_kernel_icmp"], 1, "the ping of VLAN 10's address")
        self.assertEqual(self.counters["kernel_icmp_passed"], 1)
        from_kernel = [f for f in self.sent
                       if ARP in f and f[ARP].op == 1 and f[ARP].pdst == "198.18.10.1"]
        self.assertTrue(from_kernel, "the kernel asks for the client it answers: %s" % self.summaries())
        for frame in from_kernel:
            self.assertEqual(vlan_of(frame), 10)
            self.assertEqual(frame[Ether].src, PORT_MAC)
            self.assertEqual(frame[ARP].psrc, PORT_ADDRESS[10])


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("needs root (/dev/net/tun)")
        sys.exit(77)
    unittest.main(verbosity=2)
