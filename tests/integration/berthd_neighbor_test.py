#!/usr/bin/python3
"""berthd resolving its gateway with a real kernel on the other side: berthd on net_af_packet over
a veth pair whose peer sits in a network namespace as the gateway (198.18.0.254) and as the
client. berthd must ask for the gateway's MAC by ARP, learn it from the kernel's reply, answer the
kernel's ARP for its own address, and then send a client's SYN to the VIP on, in IP-in-IP, to the
gateway's MAC. tcpdump in the namespace captures what arrives; scapy decodes it.

Usage: berthd_neighbor_test.py BERTHD
"""
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

from scapy.all import IP, TCP, Ether, rdpcap

BERTHD = sys.argv.pop(1)
TAG = "%d" % (os.getpid() % 100000)
NAMESPACE = "berth-gw-" + TAG
HOST_IF = "bth" + TAG          # berthd's port
PEER_IF = "bgw" + TAG          # the gateway's and client's interface, in the namespace
CONFIG = """
dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}",
        "--lcores", "0@0,1@1", "--log-level", "lib.eal:error"]
  ports:
    - {{ name: lan, device: "net_af_packet0,iface={host_if}", ipv4: 198.18.0.10,
        gateway: 198.18.0.254 }}
services:
  - {{ name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: ipip,
      backends: [ {{ name: web-1, address: 198.18.1.2 }} ] }}
"""


def sh(*command, check=True):
    return subprocess.run(command, check=check, capture_output=True, text=True, timeout=30)


def netns(*command, check=True):
    return sh("ip", "netns", "exec", NAMESPACE, *command, check=check)


class BerthdResolvesItsGateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-neighbor-")
        cls.prefix = "berth-neighbor-" + TAG
        cls.process = None
        cls.tcpdump = None
        try:
            cls.build_topology()
            cls.run_berthd_and_client()
        finally:
            cls.teardown_everything()

    @classmethod
    def build_topology(cls):
        sh("ip", "netns", "add", NAMESPACE)
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", PEER_IF, "netns", NAMESPACE)
        sh("ip", "link", "set", HOST_IF, "up")
        netns("ip", "link", "set", "lo", "up")
        netns("ip", "addr", "add", "198.18.0.254/24", "dev", PEER_IF)
        netns("ip", "link", "set", PEER_IF, "up")
        # The client in the namespace reaches the VIP through berthd's port address.
        netns("ip", "route", "add", "198.18.100.1/32", "via", "198.18.0.10")
        # Kernel senders on veth leave checksums to offload, which af_packet does not finish.
        netns("ethtool", "-K", PEER_IF, "tx", "off", check=False)
        cls.gateway_mac = netns("cat", "/sys/class/net/%s/address" % PEER_IF).stdout.strip()

    @classmethod
    def run_berthd_and_client(cls):
        config_path = os.path.join(cls.directory, "berth.yaml")
        with open(config_path, "w") as config:
            config.write(CONFIG.format(prefix=cls.prefix, host_if=HOST_IF))
        cls.capture = os.path.join(cls.directory, "gateway.pcap")
        cls.tcpdump = subprocess.Popen(["ip", "netns", "exec", NAMESPACE, "tcpdump", "-i", PEER_IF, "-n",
                                        "-U", "-w", cls.capture, "ip proto 4 or arp"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)  # tcpdump attaches
        cls.process = subprocess.Popen([BERTHD, "--", "--config", config_path,
                                        "--control_socket", os.path.join(cls.directory, "berth.sock")], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
        cls.stderr_lines = []
        threading.Thread(target=lambda: cls.stderr_lines.extend(cls.process.stderr), daemon=True).start()
        deadline = time.monotonic() + 20
        cls.learned_line = None
        while time.monotonic() < deadline and cls.process.poll() is None and cls.learned_line is None:
            time.sleep(0.1)
            cls.learned_line = next((l for l in list(cls.stderr_lines) if "next hop 198.18.0.254" in l), None)
        # The client connects to the VIP: its SYNs (and retries) go through berthd.
        client = subprocess.Popen(["ip", "netns", "exec", NAMESPACE, "python3", "-c",
                                   "import socket; s = socket.socket(); s.settimeout(3); "
                                   "s.connect_ex(('198.18.100.1', 80))"])
        client.wait(timeout=20)
        time.sleep(0.5)
        cls.neighbors = netns("ip", "neigh", "show", "198.18.0.10").stdout

    @classmethod
    def teardown_everything(cls):
        if cls.process is not None and cls.process.poll() is None:
            cls.process.send_signal(signal.SIGINT)
            try:
                cls.stdout, _ = cls.process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                cls.process.kill()
                cls.stdout = ""
        cls.returncode = cls.process.returncode if cls.process else None
        if cls.tcpdump is not None:
            cls.tcpdump.send_signal(signal.SIGINT)
            try:
                cls.tcpdump.wait(timeout=10)
            except subprocess.TimeoutExpired:
                cls.tcpdump.kill()
        cls.frames = list(rdpcap(cls.capture)) if os.path.exists(getattr(cls, "capture", "")) else []
        sh("ip", "link", "del", HOST_IF, check=False)
        sh("ip", "netns", "del", NAMESPACE, check=False)
        shutil.rmtree("/var/run/dpdk/" + cls.prefix, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def test_berthd_learns_the_gateways_mac_by_arp(self):
        self.assertIsNotNone(self.learned_line, "".join(self.stderr_lines))
        self.assertIn(self.gateway_mac, self.learned_line)
        requests = [f for f in self.frames if f.haslayer("ARP") and f["ARP"].op == 1 and
                    f["ARP"].psrc == "198.18.0.10"]
        self.assertTrue(requests, "berthd asked for the gateway")
        self.assertEqual(requests[0]["ARP"].pdst, "198.18.0.254")

    def test_berthd_answers_arp_for_its_port_address(self):
        self.assertIn("lladdr", self.neighbors, "the kernel resolved 198.18.0.10 through berthd")

    def test_the_clients_syn_reaches_the_gateway_in_ipip(self):
        encapsulated = [f for f in self.frames if IP in f and f[IP].proto == 4]
        self.assertTrue(encapsulated, "no IP-in-IP frame reached the gateway")
        frame = encapsulated[0]
        self.assertEqual(frame[Ether].dst, self.gateway_mac)
        self.assertEqual((frame[IP].src, frame[IP].dst), ("198.18.0.10", "198.18.1.2"))
        inner = IP(bytes(frame[IP].payload))
        self.assertEqual((inner.src, inner.dst, inner[TCP].dport), ("198.18.0.254", "198.18.100.1", 80))
        self.assertEqual(inner[TCP].flags, "S")

    def test_berthd_stops_cleanly(self):
        self.assertEqual(self.returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
