#!/usr/bin/python3
"""The exception path inside berthd, on a net_pcap port with a tap: frames that are not berth's
(ping and TCP to the port's address, a broadcast ARP for another address, a health check's
answer, LLDP) reach the kernel each in its class, VIP traffic is still forwarded, and what the
kernel sends on the tap (its ARP for the client it answers, IPv6 neighbour discovery) leaves
through the port with the port's MAC, read back from the output pcap by scapy. Run by the
sanitizer build too, so the rings, the thread and the teardown are checked for leaks and
overruns. Needs root (/dev/net/tun).

Usage: berthd_exception_pcap_test.py BERTHD BERTHCTL
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

from scapy.all import ARP, ICMP, IP, TCP, Ether, Raw, rdpcap, wrpcap  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
PREFIX = "berth-exception-pcap-%d" % os.getpid()
TAP = "bxp%d" % (os.getpid() % 100000)
PORT_MAC = "02:70:63:61:70:00"  # what the pcap PMD gives its first port
CLIENT_MAC = "02:00:00:00:00:02"
PORT4, PORT6 = "198.18.0.10", "2001:db8::10"
CLIENT4 = "198.18.0.1"
BACKEND = "198.18.1.2"

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "0@0,1@1",
        "--vdev", "net_pcap0,rx_pcap={input},tx_pcap={output}", "--log-level", "lib.eal:error"]
  ports:
    - name: p0
      device: net_pcap0
      ipv4: {port4}
      ipv6: "{port6}"
      gateway_mac: "02:00:00:00:00:fe"
      exception: {{ kind: tap, name: {tap} }}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: {{ type: tcp, interval: 60, timeout: 1 }}
    backends: [ {{ name: a, address: {backend} }} ]
"""


def frames():
    to_port = Ether(dst=PORT_MAC, src=CLIENT_MAC)
    return [
        to_port / IP(src=CLIENT4, dst=PORT4) / ICMP(type=8, id=7, seq=1),
        to_port / IP(src=CLIENT4, dst=PORT4) / TCP(sport=40000, dport=22, flags="S"),
        to_port / IP(src=BACKEND, dst=PORT4) / TCP(sport=80, dport=40001, flags="SA"),
        Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC) /
        ARP(op=1, hwsrc=CLIENT_MAC, psrc=CLIENT4, pdst="198.18.0.99"),
        Ether(dst="01:80:c2:00:00:0e", src=CLIENT_MAC, type=0x88cc) / Raw(b"\x00" * 46),
        to_port / IP(src=CLIENT4, dst="198.18.100.1") / TCP(sport=40002, dport=80, flags="S"),
    ]


class BerthdExceptionPcap(unittest.TestCase):
    def setUp(self):
        if not os.path.exists("/dev/net/tun"):
            self.skipTest("no /dev/net/tun")
        self.directory = tempfile.mkdtemp(prefix="berthd-exception-")
        self.input = os.path.join(self.directory, "in.pcap")
        self.output = os.path.join(self.directory, "out.pcap")
        wrpcap(self.input, frames())
        self.config = os.path.join(self.directory, "berth.yaml")
        with open(self.config, "w") as out:
            out.write(CONFIG.format(prefix=PREFIX, input=self.input, output=self.output,
                                    port4=PORT4, port6=PORT6, tap=TAP, backend=BACKEND))
        self.socket = os.path.join(self.directory, "berth.sock")

    def tearDown(self):
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)

    def stats(self):
        reply = subprocess.run([BERTHCTL, "stats", "--json", "--socket", self.socket],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(reply.returncode, 0, reply.stderr)
        return json.loads(reply.stdout)["stats"]["counters"]

    def test_frames_reach_the_kernel_in_their_classes_and_its_own_leave_by_the_port(self):
        process = subprocess.Popen([BERTHD, "--", "--config", self.config, "--control-socket",
                                    self.socket, "--drain-state", "off"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        try:
            wait_for_line(lines, process, "forwarding:")
            wait_for_line(lines, process, "kernel interface %s (tap) on p0" % TAP)
            # The replay is over within a loop or two; the kernel answers the ping and the SYN,
            # asking for the client's MAC first.
            deadline = time.monotonic() + 20
            while True:
                counters = self.stats()
                # The kernel's frames are counted when queued for the worker, and in tx_packets
                # once it has sent them: wait for both, with the VIP's SYN forwarded.
                if (counters["from_kernel"] > 0 and counters["rx_packets"] == len(frames()) and
                        counters["tx_packets"] == 1 + counters["from_kernel"]):
                    break
                self.assertLess(time.monotonic(), deadline, counters)
                time.sleep(0.2)
            self.assertEqual(counters["to_kernel_icmp"], 1, "the ping")
            self.assertEqual(counters["to_kernel_other"], 2, "the SYN to :22, and LLDP")
            self.assertEqual(counters["to_kernel_health"], 1, "the probed backend's answer")
            self.assertEqual(counters["to_kernel_arp_nd"], 1, "the broadcast ARP")
            passed = sum(counters["kernel_%s_passed" % c]
                         for c in ("bgp", "arp_nd", "health", "icmp", "other"))
            self.assertEqual(passed, 5)
            self.assertEqual(counters["drop_kernel_queue_full"], 0)
        finally:
            self.assertEqual(interrupt_and_wait(process), 0, "".join(lines))
            reader.join(timeout=10)
        sent = rdpcap(self.output)
        forwarded = [f for f in sent if IP in f and f[IP].dst == BACKEND]
        self.assertEqual(len(forwarded), 1, "the VIP's SYN, encapsulated to the backend")
        # The rest is the kernel's: its ARP for the client it answers, and, depending on how soon
        # berthd stopped, IPv6 neighbour discovery and MLD for its link-local address.
        from_kernel = [f for f in sent if f not in forwarded]
        self.assertTrue(any(ARP in f and f[ARP].pdst == CLIENT4 for f in from_kernel),
                        [f.summary() for f in sent])
        for frame in from_kernel:
            self.assertEqual(frame[Ether].src, PORT_MAC, "the tap has the port's MAC")
        result = subprocess.run(["ip", "link", "show", "dev", TAP], capture_output=True)
        self.assertNotEqual(result.returncode, 0, "the tap goes with berthd")


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("needs root (/dev/net/tun)")
        sys.exit(77)
    unittest.main(verbosity=2)
