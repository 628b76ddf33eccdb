#!/usr/bin/python3
"""berthd end to end on net_pcap vdevs: a scapy-generated capture of more than 10,000 flows over
seven services (ipip, gue, gre over IPv6, l2dsr; a ring, a rendezvous and a bounded-load
service), with ARP and malformed frames mixed in, is replayed through berthd, and scapy (which
shares no code with berth) decodes what came out.

It checks that every output frame is a well-formed encapsulation with correct checksums and the
input packet intact inside, that every packet of a flow reaches one backend, and that this is the
backend the service's table (from `berthctl table --json`) gives for the flow's hash, computed
here with an independent CRC32-C, or for the bounded-load service, the first backend under its
bound in table order from the flow's slot, with the loads counted here; that backend shares match the table's within 2 points; and that the
malformed frames appear only as their named drop counters. Oversized DF packets mixed in get ICMP
"fragmentation needed" within dataplane.icmp's burst and rate, and an oversized ICMP error or
packet from 255.255.255.255 gets none.

Usage: berthd_pcap_test.py BERTHD BERTHCTL
"""
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from scapy.all import ARP, GRE, ICMP, IP, TCP, UDP, Ether, IPv6, PcapWriter, Raw, raw, rdpcap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from berthd_reports import request_reports_until  # noqa: E402

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)

PORT_MAC = "02:70:63:61:70:00"  # what the pcap PMD gives its first port
CLIENT_MAC = "02:00:00:00:00:02"
GATEWAY_MAC = "02:00:00:00:00:fe"
SEED = 0xBE27F10D  # kDefaultFlowHashSeed

CONFIG = """
dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}",
        "--lcores", "0@0,1@1", "--log-level", "lib.eal:error"]
  ports:
    - name: p0
      device: "net_pcap0,rx_pcap={input},tx_pcap={output}"
      ipv4: 198.18.0.10
      ipv6: "2001:db8::10"
      gateway_mac: "{gateway}"
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: ipip
    backends:
      - {{ name: web-1, address: 198.18.1.2 }}
      - {{ name: web-2, address: 198.18.2.2 }}
      - {{ name: web-3, address: 198.18.3.2 }}
      - {{ name: web-4, address: 198.18.4.2, weight: 2 }}
  - name: dns
    vip: 198.18.100.2
    port: 53
    protocol: udp
    forwarding: gue
    gue_port: 6080
    hash_fields: 3-tuple
    backends:
      - {{ name: dns-1, address: 198.18.1.3 }}
      - {{ name: dns-2, address: 198.18.2.3 }}
      - {{ name: dns-3, address: 198.18.3.3 }}
  - name: web6
    vip: "2001:db8:100::1"
    port: 443
    protocol: tcp
    forwarding: gre
    backends:
      - {{ name: v6-1, address: "2001:db8:1::2" }}
      - {{ name: v6-2, address: "2001:db8:2::2" }}
      - {{ name: v6-3, address: "2001:db8:3::2" }}
  - name: ring
    vip: 198.18.100.4
    port: 80
    protocol: tcp
    algorithm: ring
    backends:
      - {{ name: ring-1, address: 198.18.5.2 }}
      - {{ name: ring-2, address: 198.18.6.2 }}
      - {{ name: ring-3, address: 198.18.7.2, weight: 2 }}
  - name: hrw
    vip: 198.18.100.5
    port: 80
    protocol: tcp
    algorithm: rendezvous
    backends:
      - {{ name: hrw-1, address: 198.18.8.2 }}
      - {{ name: hrw-2, address: 198.18.9.2, weight: 2 }}
      - {{ name: hrw-3, address: 198.18.10.2 }}
  - name: bounded
    vip: 198.18.100.6
    port: 80
    protocol: tcp
    bounded_load: 1.25
    backends:
      - {{ name: bnd-1, address: 198.18.11.2 }}
      - {{ name: bnd-2, address: 198.18.12.2 }}
      - {{ name: bnd-3, address: 198.18.13.2 }}
      - {{ name: bnd-4, address: 198.18.14.2, weight: 2 }}
  - name: dsr
    vip: 198.18.100.3
    port: 8080
    protocol: tcp
    forwarding: l2dsr
    backends:
      - {{ name: dsr-1, address: 198.18.0.21, mac: "02:00:00:00:00:21" }}
      - {{ name: dsr-2, address: 198.18.0.22, mac: "02:00:00:00:00:22" }}
"""

# Every flow's backend is checked against the table; the shares are checked where the flow count
# makes 2 points more than 5 standard deviations of sampling noise (web: 12,000 flows).
SHARE_CHECKED = ("web",)
SERVICES = {  # name: (VIP, port, transport, IP version, flows)
    "web": ("198.18.100.1", 80, TCP, 4, 12000),
    "dns": ("198.18.100.2", 53, UDP, 4, 1500),
    "web6": ("2001:db8:100::1", 443, TCP, 6, 1500),
    "dsr": ("198.18.100.3", 8080, TCP, 4, 1500),
    "ring": ("198.18.100.4", 80, TCP, 4, 1000),
    "hrw": ("198.18.100.5", 80, TCP, 4, 1000),
    "bounded": ("198.18.100.6", 80, TCP, 4, 2000),
}
IPIP_SERVICES = {"198.18.100.1": "web", "198.18.100.4": "ring", "198.18.100.5": "hrw",
                 "198.18.100.6": "bounded"}
BOUNDED_LOAD = 1.25
# The publication of loads and a worker's own counts can miss a few flows placed in between
# (dataplane/counters.h): the bound is checked within this many flows.
BOUND_SLACK = 5
DSR_MACS = {"02:00:00:00:00:21": "198.18.0.21", "02:00:00:00:00:22": "198.18.0.22"}


def crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC_TABLE = crc32c_table()


def flow_hash(source, destination, sport, dport, protocol, three_tuple):
    """berth's documented flow hash (flow_hash.h): CRC32-C seeded, no final inversion, over
    source | destination | ports | protocol in network order; 3-tuple hashing zeroes the ports."""
    import ipaddress
    key = (ipaddress.ip_address(source).packed + ipaddress.ip_address(destination).packed +
           (b"\0\0\0\0" if three_tuple else sport.to_bytes(2, "big") + dport.to_bytes(2, "big")) +
           bytes([protocol]))
    crc = SEED
    for byte in key:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def ipv4_header_checksum_ok(header):
    """RFC 1071: the one's-complement sum of an IPv4 header's 16-bit words, its checksum
    included, is 0xFFFF. Summed here over the frame's bytes as captured, sharing no code with
    berth's checksum or scapy's."""
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def decode(frame):
    """(service, backend address, inner IP packet bytes, problems) of one output frame, its
    encapsulation checked: `problems` names each check that failed."""
    problems = []

    def check(condition, what):
        if not condition:
            problems.append(what)

    if IP in frame and frame[IP].dst in ("198.18.100.3",):  # l2dsr: the packet unchanged
        check(frame[Ether].dst in DSR_MACS, "an l2dsr backend's MAC")
        check(frame[Ether].src == PORT_MAC, "from the port's MAC")
        return "dsr", DSR_MACS.get(frame[Ether].dst), raw(frame[IP]), problems
    check((frame[Ether].src, frame[Ether].dst) == (PORT_MAC, GATEWAY_MAC), "port to gateway MACs")
    if IPv6 in frame:
        outer = frame[IPv6]
        check((outer.src, outer.nh, outer.hlim) == ("2001:db8::10", 47, 64), "outer IPv6 header")
        check(outer.plen == len(raw(outer.payload)), "outer IPv6 payload length")
        check(GRE in frame and frame[GRE].proto == 0x86DD, "GRE carrying IPv6")
        return "web6", outer.dst, raw(frame[GRE].payload), problems
    outer = frame[IP]
    captured = bytes(frame.original)
    check((outer.src, outer.ttl, outer.flags) == ("198.18.0.10", 64, "DF"), "outer IPv4 header")
    check(ipv4_header_checksum_ok(captured[14:14 + 4 * outer.ihl]), "outer IPv4 checksum")
    check(outer.len == len(raw(outer)), "outer IPv4 total length")
    if outer.proto == 4:
        return IPIP_SERVICES.get(IP(raw(outer.payload)).dst), outer.dst, raw(outer.payload), problems
    check(outer.proto == 17, "outer protocol ipip or UDP")
    check(UDP in frame and frame[UDP].dport == 6080, "gue's port")
    check(UDP in frame and frame[UDP].len == len(raw(frame[UDP])), "UDP length")
    return "dns", outer.dst, raw(frame[UDP].payload) if UDP in frame else b"", problems


def malformed_frames():
    """Frames berthd must drop, each with the counter it must land in."""
    ether4 = Ether(dst=PORT_MAC, src=CLIENT_MAC, type=0x0800)
    ether6 = Ether(dst=PORT_MAC, src=CLIENT_MAC, type=0x86DD)
    good4 = raw(IP(src="198.18.0.1", dst="198.18.100.1") / TCP(sport=1, dport=80))
    good6 = raw(IPv6(src="2001:db8::1", dst="2001:db8:100::1") / TCP(sport=1, dport=443))
    ihl_4 = bytes([0x44]) + good4[1:]
    long_total = good4[:2] + (400).to_bytes(2, "big") + good4[4:]
    long_payload = good6[:4] + (400).to_bytes(2, "big") + good6[6:]
    chain = raw(IPv6(src="2001:db8::1", dst="2001:db8:100::1", nh=0, plen=8)) + bytes([60, 3]) + bytes(6)
    short_tcp = raw(IP(src="198.18.0.1", dst="198.18.100.1", proto=6, len=30)) + bytes(10)
    return [
        (raw(Ether(dst=PORT_MAC, src=CLIENT_MAC))[:10], "parse_short_frame"),
        (raw(ether4) + ihl_4, "parse_ipv4_ihl_below_5"),
        (raw(ether4) + long_total, "parse_ipv4_total_length_beyond_frame"),
        (raw(ether6) + long_payload, "parse_ipv6_payload_length_beyond_frame"),
        (raw(ether6) + chain, "parse_ipv6_extension_chain_truncated"),
        (raw(ether4) + short_tcp, "parse_truncated_tcp"),
    ]


# Oversized packets: too big for the port's MTU once encapsulated (ipip adds 20 bytes to 1500).
TOO_BIG_FLOOD = 1000
TOO_BIG_BURST = 100     # dataplane.icmp's defaults
TOO_BIG_PER_SECOND = 1000


def too_big_frames(generator):
    """(frame, kind) for a flood of oversized DF packets to the ipip VIP from 198.18.200.0/24,
    one from 255.255.255.255, and an oversized ICMP error: the last two may get no ICMP error."""
    frames = []
    for _ in range(TOO_BIG_FLOOD):
        client = "198.18.200.%d" % (1 + generator.randrange(254))
        packet = IP(src=client, dst="198.18.100.1", flags="DF") / \
            TCP(sport=1024 + generator.randrange(64000), dport=80, flags="A") / Raw(b"x" * 1460)
        frames.append((raw(Ether(dst=PORT_MAC, src=CLIENT_MAC) / packet), "flood"))
    broadcast = IP(src="255.255.255.255", dst="198.18.100.1", flags="DF") / \
        TCP(sport=4000, dport=80) / Raw(b"x" * 1460)
    frames.append((raw(Ether(dst=PORT_MAC, src=CLIENT_MAC) / broadcast), "not_answerable"))
    quoted = IP(src="198.18.100.1", dst="198.18.0.1") / TCP(sport=80, dport=40000) / Raw(b"y" * 1420)
    error = IP(src="198.18.9.9", dst="198.18.100.1", flags="DF") / ICMP(type=3, code=4) / quoted
    frames.append((raw(Ether(dst=PORT_MAC, src=CLIENT_MAC) / error), "not_answerable"))
    return frames


def is_too_big_reply(frame):
    return IP in frame and frame[IP].proto == 1 and frame[IP].src == "198.18.100.1"


class BerthdOnPcap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-pcap-")
        cls.prefix = "berth-pcap-%d" % os.getpid()
        input_path = os.path.join(cls.directory, "in.pcap")
        output_path = os.path.join(cls.directory, "out.pcap")
        config_path = os.path.join(cls.directory, "berth.yaml")
        with open(config_path, "w") as config:
            config.write(CONFIG.format(prefix=cls.prefix, input=input_path, output=output_path,
                                       gateway=GATEWAY_MAC))

        generator = random.Random(20261129)
        cls.sent = {}  # (service, client, sport) -> list of IP packets sent
        frames = []
        keys = []  # the flow of each frame in `frames`
        ethernet = {4: raw(Ether(dst=PORT_MAC, src=CLIENT_MAC, type=0x0800)),
                    6: raw(Ether(dst=PORT_MAC, src=CLIENT_MAC, type=0x86DD))}
        for service, (vip, port, transport, version, flows) in SERVICES.items():
            for flow in range(flows):
                if version == 4:
                    client = "198.18.%d.%d" % (32 + generator.randrange(64), 1 + generator.randrange(254))
                    layer3 = IP(src=client, dst=vip, flags="DF")
                else:
                    client = "2001:db8:%x::%x" % (generator.randrange(1 << 16), 1 + generator.randrange(1 << 16))
                    layer3 = IPv6(src=client, dst=vip)
                sport = 1024 + generator.randrange(64000)
                for index in range(1 + flow % 2):  # flows of one and of two packets
                    payload = Raw(b"berth %s %d %d" % (service.encode(), flow, index))
                    layer4 = TCP(sport=sport, dport=port, flags="S" if index == 0 else "A") if transport is TCP \
                        else UDP(sport=sport, dport=port)
                    packet = raw(layer3 / layer4 / payload)
                    cls.sent.setdefault((service, client, sport), []).append(packet)
                    frames.append(ethernet[version] + packet)
                    keys.append((service, client, sport))
        order = list(range(len(frames)))
        generator.shuffle(order)
        frames = [frames[i] for i in order]
        # The order in which berthd first sees each flow: where bounded load decides.
        cls.first_seen = list(dict.fromkeys(keys[i] for i in order))
        cls.malformed = malformed_frames()
        for frame, _ in cls.malformed:
            frames.insert(generator.randrange(len(frames)), frame)
        cls.too_big = too_big_frames(generator)
        for frame, _ in cls.too_big:
            frames.insert(generator.randrange(len(frames)), frame)
        frames.insert(100, raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC) /
                               ARP(op=1, hwsrc=CLIENT_MAC, psrc="198.18.0.1", pdst="198.18.0.10")))
        cls.input_count = len(frames)
        with PcapWriter(input_path, linktype=1) as writer:  # Ethernet
            for frame in frames:
                writer.write(frame)

        counters_path = os.path.join(cls.directory, "counters.json")
        process = subprocess.Popen([BERTHD, "--", "--config", config_path, "--counters-json", counters_path,
                                    "--control-socket", os.path.join(cls.directory, "berth.sock")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        try:
            # Ask for the counters until every input frame has been received: the pcap PMD reads
            # the file once, as fast as the worker polls.
            request_reports_until(process, lines, lambda received: received >= cls.input_count, 60)
            process.send_signal(signal.SIGINT)
            _, cls.stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
            shutil.rmtree("/var/run/dpdk/" + cls.prefix, ignore_errors=True)
        reader.join(timeout=5)
        cls.returncode = process.returncode
        if os.path.exists(counters_path):
            with open(counters_path) as counters:
                cls.counters = json.load(counters)
        else:
            cls.counters = None
        cls.output = list(rdpcap(output_path)) if os.path.exists(output_path) else []
        # Each forwarded frame decoded once, for every case that looks inside.
        cls.decoded = [decode(frame) for frame in cls.output
                       if ARP not in frame and not is_too_big_reply(frame)]
        cls.tables = {}
        for service in SERVICES:
            table = subprocess.run([BERTHCTL, "table", "--config", config_path, "--service", service, "--json"],
                                   check=True, capture_output=True, text=True, timeout=60)
            cls.tables[service] = json.loads(table.stdout)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def setUp(self):
        if self.counters is None:
            self.fail("berthd wrote no counters (exit %s); its stderr:\n%s" % (self.returncode, self.stderr))

    def test_berthd_exits_cleanly_after_sigint(self):
        self.assertEqual(self.returncode, 0, self.stderr)

    def test_every_frame_is_received_and_counted(self):
        counters = self.counters["counters"]
        self.assertEqual(counters["rx_packets"], self.input_count)
        self.assertEqual(counters["tx_packets"], len(self.output))

    def test_malformed_frames_are_only_counted_drops(self):
        counters = self.counters["counters"]
        expected = collections.Counter(name for _, name in self.malformed)
        for name, count in expected.items():
            self.assertEqual(counters[name], count, name)
        too_big = ("drop_too_big_rate_limited", "drop_too_big_not_answerable")
        dropped = sum(value for name, value in counters.items()
                      if name.startswith(("parse_", "drop_")) and name not in too_big)
        self.assertEqual(dropped, len(self.malformed), "no drop other than the malformed frames")
        malformed = {frame for frame, _ in self.malformed}
        for frame in self.output:
            self.assertNotIn(raw(frame), malformed)

    def test_arp_for_the_port_address_is_answered(self):
        replies = [frame for frame in self.output if ARP in frame]
        self.assertEqual(len(replies), 1)
        self.assertEqual((replies[0][ARP].op, replies[0][ARP].psrc, replies[0][ARP].hwsrc),
                         (2, "198.18.0.10", PORT_MAC))

    def test_too_big_replies_are_limited_and_never_about_an_error_or_to_a_broadcast(self):
        counters = self.counters["counters"]
        replies = [frame for frame in self.output if is_too_big_reply(frame)]
        # Each reply quotes the start of a flood packet: 576 bytes in all, so 548 of it.
        quoted_starts = {raw(Ether(frame)[IP])[:548] for frame, kind in self.too_big if kind == "flood"}
        self.assertEqual(counters["drop_too_big_not_answerable"], 2)
        self.assertEqual(counters["icmp_too_big_replies"], len(replies))
        self.assertEqual(len(replies) + counters["drop_too_big_rate_limited"], TOO_BIG_FLOOD)
        # The burst at once, then the rate over the replay (one worker).
        window = self.counters["rx_window_s"]
        self.assertGreaterEqual(len(replies), min(TOO_BIG_BURST, TOO_BIG_FLOOD))
        self.assertLessEqual(len(replies), TOO_BIG_BURST + TOO_BIG_PER_SECOND * window + 2)
        print("\n  %d oversized DF packets over a %.3f s replay: %d replies, %d rate-limited" % (
            TOO_BIG_FLOOD, window, len(replies), counters["drop_too_big_rate_limited"]),
            file=sys.stderr)
        for reply in replies:
            self.assertEqual((reply[ICMP].type, reply[ICMP].code, reply[ICMP].nexthopmtu), (3, 4, 1480))
            self.assertTrue(reply[IP].dst.startswith("198.18.200."), "only to the flood's sources")
            self.assertIn(raw(reply[ICMP].payload), quoted_starts, "it quotes a flood packet")

    def test_every_flow_reaches_the_backend_its_table_gives_and_shares_match(self):
        addresses = {}
        config_backends = {
            "web": ["198.18.1.2", "198.18.2.2", "198.18.3.2", "198.18.4.2"],
            "dns": ["198.18.1.3", "198.18.2.3", "198.18.3.3"],
            "web6": ["2001:db8:1::2", "2001:db8:2::2", "2001:db8:3::2"],
            "dsr": ["198.18.0.21", "198.18.0.22"],
            "ring": ["198.18.5.2", "198.18.6.2", "198.18.7.2"],
            "hrw": ["198.18.8.2", "198.18.9.2", "198.18.10.2"],
            "bounded": ["198.18.11.2", "198.18.12.2", "198.18.13.2", "198.18.14.2"],
        }
        for service, table in self.tables.items():
            # berthctl lists backends sorted by name, as the config lists them here.
            addresses[service] = [config_backends[service][i] for i in range(len(table["backends"]))]
        backend_of_flow = {}
        slots_of_flow = {}
        flows_per_backend = collections.defaultdict(collections.Counter)
        inner_seen = collections.Counter()
        self.assertEqual(len(self.decoded), sum(len(packets) for packets in self.sent.values()))
        for service, backend, inner, problems in self.decoded:
            self.assertEqual(problems, [], "a well-formed encapsulation")
            inner_packet = IPv6(inner) if service == "web6" else IP(inner)
            transport = inner_packet[TCP] if TCP in inner_packet else inner_packet[UDP]
            key = (service, inner_packet.src, transport.sport)
            self.assertIn(inner, self.sent[key], "the inner packet arrives byte for byte")
            inner_seen[inner] += 1
            self.assertEqual(backend_of_flow.setdefault(key, backend), backend, "one backend per flow")
            vip, port, layer, version, _ = SERVICES[service]
            hashed = flow_hash(inner_packet.src, vip, transport.sport, port, 6 if layer is TCP else 17,
                               three_tuple=service == "dns")
            table = self.tables[service]
            slot = hashed % table["table_size"]
            if service == "bounded":
                # Judged below, in the order the flows arrived: the table's pick or a fallback.
                slots_of_flow[key] = slot
                continue
            expected = addresses[service][table["entries"][slot]]
            self.assertEqual(backend, expected, "the table's backend for %s" % (key,))
        self.assertTrue(all(count == 1 for count in inner_seen.values()), "no duplicates")
        self.check_bounded_load(backend_of_flow, slots_of_flow, addresses["bounded"])
        self.assertGreaterEqual(len(backend_of_flow), 10000)
        for (service, _, _), backend in backend_of_flow.items():
            flows_per_backend[service][backend] += 1
        for service in SHARE_CHECKED:
            table = self.tables[service]
            total_flows = sum(flows_per_backend[service].values())
            for index, entry in enumerate(table["backends"]):
                table_share = entry["slots"] / table["table_size"]
                flow_share = flows_per_backend[service][addresses[service][index]] / total_flows
                self.assertLess(abs(flow_share - table_share), 0.02,
                                "%s %s: %.3f of flows against %.3f of slots" %
                                (service, entry["name"], flow_share, table_share))

    def check_bounded_load(self, backend_of_flow, slots_of_flow, addresses):
        """Each flow of the bounded-load service, in the order berthd first saw them, went to the
        first backend in table order from its slot that was under its bound, C x (flows + 1) x
        its weighted share, with the loads counted from the flows placed before it (one worker).
        The counter of fallbacks agrees."""
        table = self.tables["bounded"]
        entries, size = table["entries"], table["table_size"]
        weights = [backend["weight"] for backend in table["backends"]]
        share = [BOUNDED_LOAD * weight / sum(weights) for weight in weights]
        load = [0] * len(weights)
        fallbacks = 0
        flows = [key for key in self.first_seen if key[0] == "bounded"]
        self.assertEqual(len(flows), len(slots_of_flow))
        for placed, key in enumerate(flows):
            chosen = addresses.index(backend_of_flow[key])
            slot = slots_of_flow[key]
            skipped = set()
            at = slot
            while entries[at] != chosen:
                skipped.add(entries[at])
                at = (at + 1) % size
            for backend in skipped:
                self.assertGreaterEqual(load[backend] + BOUND_SLACK, share[backend] * (placed + 1),
                                        "%s went past %s, which was under its bound" %
                                        (key, table["backends"][backend]["name"]))
            self.assertLess(load[chosen], share[chosen] * (placed + 1) + BOUND_SLACK,
                            "%s went to %s, at its bound" % (key, table["backends"][chosen]["name"]))
            fallbacks += bool(skipped)
            load[chosen] += 1
        self.assertGreater(fallbacks, 0, "some flows fell back")
        self.assertEqual(self.counters["counters"]["conntrack_bounded_load_fallbacks"], fallbacks)

    def test_per_backend_counters_match_what_was_sent(self):
        packets = collections.Counter(service for service, _, _, _ in self.decoded)
        for service, count in packets.items():
            self.assertEqual(self.counters["services"][service]["packets"], count, service)


if __name__ == "__main__":
    unittest.main(verbosity=2)
