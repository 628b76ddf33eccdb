#!/usr/bin/python3
"""berthd resolving its gateway with a real kernel on the other side, and holding it against a
spoofing host on the same segment: berthd on net_af_packet over a veth pair whose peer sits in a
network namespace as the gateway (198.18.0.254) and as the client. berthd must ask for the
gateway's MAC by ARP, learn it from the kernel's reply, answer the kernel's ARP for its own
address, and send a client's SYNs to the VIP on, in IP-in-IP, to the gateway's MAC.

Then crafted ARP from the namespace, with forged Ethernet sources (tests/support/
neighbor_frames.py): the four spoofs, two MACs alternating, a random-MAC flood. Every SYN must
still go to the gateway, no snapshot is published, and each spoof is counted under its reason.
A real change of the gateway's MAC must be followed within the refresh interval and its
timeout. A second berthd, whose port learns from announcements, takes a gratuitous-ARP flood
within its bounds (a publish per lock time, 10 log lines a second) and comes back to the real
gateway at its next refresh. tcpdump in the namespace captures what arrives; scapy decodes it.

Usage: berthd_neighbor_test.py BERTHD
"""
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

from scapy.all import IP, TCP, Ether, rdpcap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import ask, interrupt_and_wait  # noqa: E402

BERTHD = sys.argv.pop(1)
FRAMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                      "neighbor_frames.py")
TAG = "%d" % (os.getpid() % 100000)
GATEWAY = "198.18.0.254"
PORT_ADDRESS = "198.18.0.10"
CONFIG = """
dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}",
        "--lcores", "0@0,1@1", "--log-level", "lib.eal:error"]
  neighbors: {{ refresh_interval: 3, lock_time: 1 }}
  ports:
    - {{ name: lan, device: "net_af_packet0,iface={host_if}", ipv4: 198.18.0.10,
        gateway: 198.18.0.254, learn_announcements: {learn} }}
services:
  - {{ name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: ipip,
      backends: [ {{ name: web-1, address: 198.18.1.2 }} ] }}
"""


def sh(*command, check=True):
    return subprocess.run(command, check=check, capture_output=True, text=True, timeout=60)


class Segment:
    """A veth pair: berthd's port on this side, the gateway and client in a namespace."""

    def __init__(self, suffix):
        self.namespace = "berth-gw-%s%s" % (TAG, suffix)
        self.host_if = "bth%s%s" % (TAG, suffix)
        self.peer_if = "bgw%s%s" % (TAG, suffix)

    def netns(self, *command, check=True):
        return sh("ip", "netns", "exec", self.namespace, *command, check=check)

    def build(self):
        sh("ip", "netns", "add", self.namespace)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if,
           "netns", self.namespace)
        sh("ip", "link", "set", self.host_if, "up")
        self.netns("ip", "link", "set", "lo", "up")
        self.netns("ip", "addr", "add", GATEWAY + "/24", "dev", self.peer_if)
        self.netns("ip", "link", "set", self.peer_if, "up")
        # The client in the namespace reaches the VIP through berthd's port address.
        self.netns("ip", "route", "add", "198.18.100.1/32", "via", PORT_ADDRESS)
        # Kernel senders on veth leave checksums to offload, which af_packet does not finish.
        self.netns("ethtool", "-K", self.peer_if, "tx", "off", check=False)
        self.gateway_mac = self.mac_of_peer()
        self.berth_mac = sh("cat", "/sys/class/net/%s/address" % self.host_if).stdout.strip()

    def mac_of_peer(self):
        return self.netns("cat", "/sys/class/net/%s/address" % self.peer_if).stdout.strip()

    def teardown(self):
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.namespace, check=False)

    def send_frames(self, *arguments):
        result = self.netns("python3", FRAMES, arguments[0], self.peer_if, self.berth_mac,
                            PORT_ADDRESS, GATEWAY, *arguments[1:])
        return json.loads(result.stdout)

    def syns(self, first_port, count=10):
        """`count` client connections to the VIP, each from its own port: one SYN each at
        least, all sent at once."""
        self.netns("python3", "-c",
                   "import socket, time\n"
                   "held = []\n"
                   "for port in range(%d, %d):\n"
                   "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                   "    s.bind(('%s', port)); s.setblocking(False)\n"
                   "    s.connect_ex(('198.18.100.1', 80)); held.append(s)\n"
                   "time.sleep(0.5)\n" % (first_port, first_port + count, GATEWAY))


class Berthd:
    """berthd on a segment's port, its log lines kept with the time each arrived."""

    def __init__(self, segment, directory, learn_announcements):
        self.prefix = "berth-neighbor-%s-%s" % (TAG, segment.host_if)
        self.socket = os.path.join(directory, "berth.sock")
        config_path = os.path.join(directory, "berth.yaml")
        with open(config_path, "w") as config:
            config.write(CONFIG.format(prefix=self.prefix, host_if=segment.host_if,
                                       learn="true" if learn_announcements else "false"))
        self.process = subprocess.Popen([BERTHD, "--", "--config", config_path,
                                         "--control-socket", self.socket],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []  # (monotonic time, line)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line))

    def log(self):
        return "".join(line for _, line in list(self.lines))

    def wait_for_line(self, text, seconds, after=0.0):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.process.poll() is None:
            found = [line for at, line in list(self.lines) if at >= after and text in line]
            if found:
                return found[0]
            time.sleep(0.05)
        return None

    def lines_between(self, text, start, end):
        return [line for at, line in list(self.lines) if start <= at <= end and text in line]

    def generation(self):
        return ask(self.socket, "status")["snapshot_generation"]

    def neighbor(self):
        rows = ask(self.socket, "neighbors")["neighbors"]
        return next(row for row in rows if row["address"] == GATEWAY)

    def stop(self):
        returncode = interrupt_and_wait(self.process)
        shutil.rmtree("/var/run/dpdk/" + self.prefix, ignore_errors=True)
        return returncode


def capture_start(segment, directory, name="gateway.pcap"):
    path = os.path.join(directory, name)
    # Encapsulated packets, and berthd's own ARP: not the floods the namespace sends. Immediate
    # mode: otherwise libpcap takes frames from the kernel a block at a time, and frames of the
    # last block before the stop are lost.
    tcpdump = subprocess.Popen(["ip", "netns", "exec", segment.namespace, "tcpdump", "-i",
                                segment.peer_if, "-n", "-U", "--immediate-mode", "-w", path,
                                "ip proto 4 or (arp and ether src %s)" % segment.berth_mac],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # tcpdump attaches
    return tcpdump, path


def capture_stop(tcpdump, path):
    time.sleep(0.2)  # what is on the wire reaches tcpdump
    tcpdump.send_signal(signal.SIGINT)
    try:
        tcpdump.wait(timeout=10)
    except subprocess.TimeoutExpired:
        tcpdump.kill()
    return list(rdpcap(path)) if os.path.exists(path) else []


def syns_by_port(frames, first_port, count=10):
    """The Ethernet destination of each encapsulated SYN from ports [first, first + count)."""
    seen = {}
    for frame in frames:
        if IP not in frame or frame[IP].proto != 4:
            continue
        inner = IP(bytes(frame[IP].payload))
        if TCP in inner and first_port <= inner[TCP].sport < first_port + count:
            seen.setdefault(inner[TCP].sport, set()).add(frame[Ether].dst)
    return seen


class BerthdResolvesItsGatewayAndHoldsIt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-neighbor-")
        cls.segment = Segment("a")
        cls.berthd = None
        cls.capture = None
        cls.frames = []
        try:
            cls.segment.build()
            cls.capture = capture_start(cls.segment, cls.directory)
            cls.berthd = Berthd(cls.segment, cls.directory, learn_announcements=False)
            cls.learned_line = cls.berthd.wait_for_line("next hop 198.18.0.254 is at", 20)
            cls.neighbors = cls.segment.netns("ip", "neigh", "show", PORT_ADDRESS).stdout
            cls.segment.syns(41000)
            cls.run_spoofs()
            cls.segment.syns(42000)
            cls.change_the_gateways_mac()
            cls.segment.syns(43000)
            cls.row = cls.berthd.neighbor()
            cls.flush = ask(cls.berthd.socket, "neighbors", action="flush")
            cls.stats = ask(cls.berthd.socket, "stats")["stats"]["counters"]
            print(json.dumps({"flood": cls.flood, "flood_log_lines": len(cls.flood_lines),
                              "refused": cls.row_after_flood["refused"],
                              "followed_change_s": round(cls.followed_after, 3),
                              "neighbor_counters": {k: v for k, v in cls.stats.items()
                                                    if k.startswith("neighbor_")}}),
                  file=sys.stderr)
        finally:
            cls.returncode = cls.berthd.stop() if cls.berthd else None
            if cls.capture:
                cls.frames += capture_stop(*cls.capture)
            cls.segment.teardown()
            shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def run_spoofs(cls):
        cls.generation_before = cls.berthd.generation()
        cls.spoofs = cls.segment.send_frames("spoofs")
        start = time.monotonic()
        cls.flood = cls.segment.send_frames("flood", "20000", "2", "mixed")
        end = time.monotonic() + 0.2
        time.sleep(0.2)
        cls.flood_lines = cls.berthd.lines_between("next hop", start, end)
        cls.window = end - start
        cls.generation_after = cls.berthd.generation()
        cls.row_after_flood = cls.berthd.neighbor()

    @classmethod
    def change_the_gateways_mac(cls):
        cls.old_gateway_mac = cls.segment.gateway_mac
        cls.new_gateway_mac = "02:00:00:00:fe:02"
        # A capture across the address change lost what followed it in three runs of five under
        # ASAN: a new one captures that.
        cls.frames += capture_stop(*cls.capture)
        cls.capture = None
        changed = time.monotonic()
        cls.segment.netns("ip", "link", "set", "dev", cls.segment.peer_if, "address",
                          cls.new_gateway_mac)
        cls.capture = capture_start(cls.segment, cls.directory, "changed.pcap")
        cls.moved_line = cls.berthd.wait_for_line("moved from", 10, after=changed)
        cls.followed_after = time.monotonic() - changed

    def test_berthd_learns_the_gateways_mac_by_arp(self):
        self.assertIsNotNone(self.learned_line, self.berthd.log())
        self.assertIn(self.old_gateway_mac, self.learned_line)
        requests = [f for f in self.frames if f.haslayer("ARP") and f["ARP"].op == 1 and
                    f["ARP"].psrc == PORT_ADDRESS]
        self.assertTrue(requests, "berthd asked for the gateway")
        self.assertEqual(requests[0]["ARP"].pdst, GATEWAY)

    def test_berthd_answers_arp_for_its_port_address(self):
        self.assertIn("lladdr", self.neighbors, "the kernel resolved 198.18.0.10 through berthd")

    def test_every_syn_goes_to_the_gateway_before_and_after_the_spoofs(self):
        for first in (41000, 42000):
            seen = syns_by_port(self.frames, first)
            self.assertEqual(len(seen), 10, "10 of 10 SYNs from %d reached the gateway" % first)
            for port, destinations in seen.items():
                self.assertEqual(destinations, {self.old_gateway_mac}, port)

    def test_the_syn_is_encapsulated_for_the_backend(self):
        frame = next(f for f in self.frames if IP in f and f[IP].proto == 4)
        self.assertEqual((frame[IP].src, frame[IP].dst), (PORT_ADDRESS, "198.18.1.2"))
        inner = IP(bytes(frame[IP].payload))
        self.assertEqual((inner.src, inner.dst, inner[TCP].dport), (GATEWAY, "198.18.100.1", 80))
        self.assertEqual(inner[TCP].flags, "S")

    def test_spoofs_and_the_flood_change_nothing_and_are_counted(self):
        self.assertEqual(self.spoofs["frames"], 1004)
        self.assertEqual(self.generation_after, self.generation_before, "no snapshot published")
        self.assertEqual(self.row_after_flood["mac"], self.old_gateway_mac)
        for reason in ("unsolicited", "source_mismatch", "announcement", "not_a_reply"):
            self.assertGreaterEqual(self.stats["neighbor_refused_" + reason], 1, reason)
        # Every spoof and every flood frame claims another MAC: each is refused by a worker or,
        # answering berthd's refresh beside the gateway, by the management thread.
        self.assertGreaterEqual(self.row_after_flood["refused"], 1004 + 19000)
        self.assertLessEqual(len(self.flood_lines), 10 + 10 * self.window, self.flood_lines)

    def test_a_real_gateway_change_is_followed_within_the_refresh(self):
        self.assertIsNotNone(self.moved_line, self.berthd.log())
        self.assertIn("to " + self.new_gateway_mac, self.moved_line)
        # The 3 s refresh interval, the two requests of 1 s each that the old MAC left
        # unanswered while the new one answered, and the loop's turns.
        self.assertLess(self.followed_after, 3 + 2 * 1 + 1)
        seen = syns_by_port(self.frames, 43000)
        self.assertEqual(len(seen), 10)
        for destinations in seen.values():
            self.assertEqual(destinations, {self.new_gateway_mac})
        self.assertEqual(self.row["mac"], self.new_gateway_mac)
        self.assertEqual(self.row["state"], "reachable")
        self.assertEqual(self.row["changes"], 2)
        self.assertEqual(self.stats["neighbor_changes"], 2)

    def test_neighbors_flush_asks_again(self):
        self.assertTrue(self.flush["ok"], self.flush)
        self.assertIn("asking 1 next hop(s) again", self.flush["text"])

    def test_berthd_stops_cleanly(self):
        self.assertEqual(self.returncode, 0)


class BerthdLearningAnnouncementsStaysBounded(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-neighbor-")
        cls.segment = Segment("b")
        cls.berthd = None
        try:
            cls.segment.build()
            cls.berthd = Berthd(cls.segment, cls.directory, learn_announcements=True)
            cls.learned_line = cls.berthd.wait_for_line("next hop 198.18.0.254 is at", 20)
            cls.generation_before = cls.berthd.generation()
            start = time.monotonic()
            cls.flood = cls.segment.send_frames("flood", "15000", "3", "gratuitous")
            end = time.monotonic() + 0.2
            time.sleep(0.2)
            cls.generation_after = cls.berthd.generation()
            cls.flood_lines = cls.berthd.lines_between("next hop", start, end)
            cls.window = end - start
            cls.row_after_flood = cls.berthd.neighbor()
            print(json.dumps({"flood": cls.flood, "flood_log_lines": len(cls.flood_lines),
                              "publishes": cls.generation_after - cls.generation_before}),
                  file=sys.stderr)
            # The next refresh finds the gateway again: the announced MAC answers nothing.
            deadline = time.monotonic() + 10
            cls.row = cls.row_after_flood
            while time.monotonic() < deadline and cls.row["mac"] != cls.segment.gateway_mac:
                time.sleep(0.1)
                cls.row = cls.berthd.neighbor()
        finally:
            cls.returncode = cls.berthd.stop() if cls.berthd else None
            cls.segment.teardown()
            shutil.rmtree(cls.directory, ignore_errors=True)

    def test_publishes_stay_within_one_per_lock_time(self):
        self.assertIsNotNone(self.learned_line, self.berthd.log())
        seconds = self.flood["seconds"]
        publishes = self.generation_after - self.generation_before
        self.assertGreaterEqual(publishes, 1, "announcements are learned on this port")
        self.assertLessEqual(publishes, seconds / 1.0 + 2, "1 s lock time")
        self.assertNotEqual(self.row_after_flood["mac"], None)

    def test_log_lines_stay_within_ten_a_second(self):
        # A burst of 10, then 10 a second, over the window the lines were gathered in.
        self.assertLessEqual(len(self.flood_lines), 10 + 10 * self.window, self.flood_lines)
        self.assertTrue(any("held back" in line for line in self.flood_lines), self.flood_lines)

    def test_the_real_gateway_is_back_after_the_flood(self):
        self.assertEqual(self.row["mac"], self.segment.gateway_mac, self.berthd.log()[-3000:])

    def test_berthd_stops_cleanly(self):
        self.assertEqual(self.returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
