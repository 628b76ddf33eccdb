#!/usr/bin/python3
"""Outer checksums left to the NIC give the same bytes as berth's own (docs/nics.md). berthd runs
on a net_tap port, whose PMD offers IPv4 header and UDP checksum offload, twice: with
checksum_offload (the default), where the log says the NIC fills them, and with
checksum_offload: false, where berth writes them. The same TCP frames go in through the tap's
kernel side to an ipip service with an IPv4 backend and a gue service with an IPv6 backend, of
lengths from an empty SYN to a full MTU, with odd and even payloads. The tap's MAC is fixed
(mac=fixed), so the two runs' frames differ in nothing berth does not write. What leaves is read back
from the kernel side: the two runs' frames are byte for byte the same, and scapy, recomputing
every outer checksum itself, finds each one right. Needs root (/dev/net/tun).

Usage: berthd_checksum_offload_test.py BERTHD BERTHCTL
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import ask, interrupt_and_wait, wait_for_line  # noqa: E402

from scapy.all import IP, IPv6, TCP, UDP, Ether, Raw  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
PREFIX = "berth-csum-%d" % os.getpid()
TAP = "bcs%d" % (os.getpid() % 100000)
GATEWAY_MAC = "02:00:00:00:00:fe"
CLIENT_MAC = "02:00:00:00:00:02"
GUE_VIP, IPIP_VIP = "198.18.100.1", "198.18.100.2"
GUE_BACKEND, IPIP_BACKEND = "fd00:198:18:1::2", "198.18.1.2"
ETH_P_ALL = 0x0003

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "0@0,1@1",
        "--vdev", "net_tap0,iface={tap},mac=fixed", "--log-level", "lib.eal:error"]
  ports:
    - {{ name: wan, device: net_tap0, ipv4: 198.18.0.10, ipv6: "fd00:198:18::10",
        gateway_mac: "{gateway}", queues: 1, checksum_offload: {offload} }}
services:
  - name: six
    vip: {gue_vip}
    port: 80
    protocol: tcp
    forwarding: gue
    gue_port: 6080
    backends: [ {{ name: s1, address: "{gue_backend}" }} ]
  - name: four
    vip: {ipip_vip}
    port: 80
    protocol: tcp
    backends: [ {{ name: f1, address: {ipip_backend} }} ]
"""

# Payload lengths: none, odd and even, and what fills a 1,500-byte outer packet over IPv6 (40
# outer, 8 UDP, 20 inner IP and 20 TCP bytes in front of the payload).
PAYLOADS = [0, 1, 2, 17, 100, 255, 1000, 1500 - 40 - 8 - 20 - 20]


def client_frames(port_mac):
    frames = []
    for index, length in enumerate(PAYLOADS):
        payload = bytes((index * 37 + i * 11) & 0xFF for i in range(length))
        for vip in (GUE_VIP, IPIP_VIP):
            frame = (Ether(dst=port_mac, src=CLIENT_MAC) /
                     IP(src="198.18.0.%d" % (1 + index), dst=vip, id=index) /
                     TCP(sport=40000 + index, dport=80, flags="PA" if length else "S"))
            frames.append(bytes(frame / Raw(payload) if length else frame))
    return frames


def run_berthd(offload):
    """The frames berthd sent to the gateway for client_frames(), in order, and its log."""
    directory = tempfile.mkdtemp(prefix="berthd-csum-")
    config = os.path.join(directory, "berth.yaml")
    with open(config, "w") as out:
        out.write(CONFIG.format(prefix=PREFIX, tap=TAP, gateway=GATEWAY_MAC,
                                offload="true" if offload else "false", gue_vip=GUE_VIP,
                                gue_backend=GUE_BACKEND, ipip_vip=IPIP_VIP,
                                ipip_backend=IPIP_BACKEND))
    control = os.path.join(directory, "berth.sock")
    process = subprocess.Popen([BERTHD, "--", "--config", config, "--control-socket", control,
                                "--drain-state", "off"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    sent = []
    try:
        wait_for_line(lines, process, "forwarding:")
        port_mac = re.search(r"port 'wan': net_tap, DPDK port \d+, MAC (\S+),",
                             "".join(lines)).group(1)
        capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        capture.bind((TAP, 0))
        capture.settimeout(0.2)
        frames = client_frames(port_mac)
        for frame in frames:
            capture.send(frame)
        deadline = time.monotonic() + 20
        while len(sent) < len(frames) and time.monotonic() < deadline:
            try:
                data, address = capture.recvfrom(65536)
            except socket.timeout:
                continue
            # What berthd wrote to the tap arrives here as received (not PACKET_OUTGOING), and
            # only its forwarded frames go to the gateway.
            if address[2] != socket.PACKET_OUTGOING and data[:6] == bytes.fromhex(
                    GATEWAY_MAC.replace(":", "")):
                sent.append(data)
        capture.close()
        counters = ask(control, "stats")["stats"]["counters"]
    finally:
        returncode = interrupt_and_wait(process)
        reader.join(timeout=10)
        process.stdout.close()
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
    return sent, "".join(lines), returncode, counters


class BerthdChecksumOffload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/dev/net/tun"):
            raise unittest.SkipTest("no /dev/net/tun")
        cls.offloaded, cls.offloaded_log, cls.offloaded_rc, cls.offloaded_counters = \
            run_berthd(True)
        cls.software, cls.software_log, cls.software_rc, cls.software_counters = \
            run_berthd(False)

    def test_the_log_says_who_writes_the_checksums(self):
        self.assertIn("outer checksums by the NIC: IPv4 header, UDP (GUE over IPv6)",
                      self.offloaded_log)
        self.assertIn("outer checksums in software (checksum_offload: false)", self.software_log)
        self.assertEqual(self.offloaded_rc, 0, self.offloaded_log)
        self.assertEqual(self.software_rc, 0, self.software_log)

    def test_every_frame_is_forwarded_in_both_runs(self):
        expected = 2 * len(PAYLOADS)
        self.assertEqual(len(self.offloaded), expected, self.offloaded_counters)
        self.assertEqual(len(self.software), expected, self.software_counters)

    def test_the_bytes_are_the_same(self):
        for index, (offloaded, software) in enumerate(zip(self.offloaded, self.software)):
            self.assertEqual(offloaded.hex(), software.hex(), "frame %d: %s" % (
                index, Ether(software).summary()))

    def test_scapy_finds_every_outer_checksum_right(self):
        gue = ipip = 0
        for data in self.offloaded:
            frame = Ether(data)
            if IPv6 in frame and UDP in frame:
                self.assertEqual(frame[IPv6].dst, GUE_BACKEND)
                self.assertNotEqual(frame[UDP].chksum, 0, "GUE over IPv6 carries a UDP checksum")
                rebuilt = IPv6(bytes(frame[IPv6]))
                rebuilt[UDP].chksum = None
                self.assertEqual(frame[UDP].chksum, IPv6(bytes(rebuilt))[UDP].chksum,
                                 frame.summary())
                gue += 1
            else:
                self.assertEqual(frame[IP].dst, IPIP_BACKEND)
                outer = frame[IP]
                rebuilt = IP(bytes(outer))
                rebuilt.chksum = None
                self.assertEqual(outer.chksum, IP(bytes(rebuilt))[IP].chksum, frame.summary())
                ipip += 1
        self.assertEqual((gue, ipip), (len(PAYLOADS), len(PAYLOADS)))


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("needs root (/dev/net/tun)")
        sys.exit(77)
    unittest.main(verbosity=2)
