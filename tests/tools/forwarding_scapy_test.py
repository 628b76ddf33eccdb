#!/usr/bin/python3
"""Decodes berth's forwarding output with scapy, which shares no code with berth: every outer
header field and checksum is checked by an independent implementation, and Full-NAT's
rewritten packets and translated ICMP errors field by field.

Usage: forwarding_scapy_test.py FORWARDING_SAMPLES_BINARY
"""
import os
import subprocess
import sys
import tempfile
import unittest

from scapy.all import GRE, Dot1Q, ICMP, IP, TCP, UDP, Ether, IPv6, ICMPv6PacketTooBig, ICMPv6ND_NA, \
    ICMPv6NDOptDstLLAddr, IPerror, IPerror6, Raw, TCPerror, raw, rdpcap

SAMPLES = sys.argv.pop(1)


def checksum_ok(packet, layer):
    """True when scapy computes the same checksum as the one on the wire. The field is looked up
    in the layer's own fields: scapy's attribute lookup would fall through to inner layers."""
    names = [field.name for field in packet[layer].fields_desc]
    field = "chksum" if "chksum" in names else "cksum"
    sent = packet[layer].getfieldval(field)
    copy = packet.copy()
    setattr(copy[layer], field, None)
    return Ether(raw(copy))[layer].getfieldval(field) == sent


class ForwardingOutput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "samples.pcap")
            subprocess.run([SAMPLES, path], check=True, timeout=60)
            cls.frames = list(rdpcap(path))

    def test_sample_count(self):
        self.assertEqual(len(self.frames), 20)

    def check_outer_v4(self, frame, protocol):
        self.assertEqual(frame[Ether].dst, "02:00:00:00:00:fe")
        self.assertEqual(frame[Ether].src, "02:00:00:00:00:10")
        self.assertEqual(frame[Ether].type, 0x0800, "untagged towards the gateway")
        outer = frame[IP]
        self.assertEqual((outer.src, outer.dst, outer.proto, outer.ttl), ("198.18.0.10", "198.18.1.2", protocol, 64))
        self.assertEqual(outer.flags, "DF")
        self.assertTrue(checksum_ok(frame, IP), "outer IPv4 checksum")
        self.assertEqual(outer.len, len(raw(outer)))

    def check_outer_v6(self, frame, next_header):
        outer = frame[IPv6]
        self.assertEqual((outer.src, outer.dst, outer.nh, outer.hlim), ("2001:db8::10", "2001:db8:1::2", next_header, 64))
        self.assertEqual(outer.fl, 0x9e3779b9 & 0xFFFFF)
        self.assertEqual(outer.plen, len(raw(outer.payload)))

    def check_inner_v4(self, inner):
        self.assertEqual((inner.src, inner.dst), ("198.18.0.1", "198.18.100.1"))
        self.assertEqual((inner[TCP].sport, inner[TCP].dport), (40000, 80))
        self.assertEqual(len(inner[Raw].load), 100)

    def test_ipip_v4(self):
        frame = self.frames[0]
        self.check_outer_v4(frame, 4)
        self.check_inner_v4(frame[IP].payload)

    def test_ipip_v6(self):
        frame = self.frames[1]
        self.check_outer_v6(frame, 41)
        inner = frame[IPv6].payload
        self.assertEqual((inner.src, inner.dst, inner[TCP].dport), ("2001:db8::1", "2001:db8:100::1", 443))

    def test_gre_v4(self):
        frame = self.frames[2]
        self.check_outer_v4(frame, 47)
        self.assertEqual(frame[GRE].proto, 0x0800)
        self.check_inner_v4(frame[GRE].payload)

    def test_gre_v6(self):
        frame = self.frames[3]
        self.check_outer_v6(frame, 47)
        self.assertEqual(frame[GRE].proto, 0x86DD)

    def test_gue_v4(self):
        frame = self.frames[4]
        self.check_outer_v4(frame, 17)
        udp = frame[UDP]
        self.assertEqual(udp.dport, 6080)
        self.assertEqual(udp.sport, 0xC000 | (0x9e3779b9 & 0x3FFF))
        self.assertEqual(udp.len, 8 + 20 + 20 + 100)
        self.check_inner_v4(IP(raw(udp.payload)))

    def test_gue_v6_udp_checksum(self):
        frame = self.frames[5]
        self.check_outer_v6(frame, 17)
        self.assertNotEqual(frame[UDP].chksum, 0)
        self.assertTrue(checksum_ok(frame, UDP), "outer UDP checksum over IPv6")
        inner = IPv6(raw(frame[UDP].payload))
        self.assertEqual(inner.dst, "2001:db8:100::1")

    def test_l2dsr(self):
        frame = self.frames[6]
        self.assertEqual((frame[Ether].dst, frame[Ether].src), ("02:00:00:00:00:fe", "02:00:00:00:00:10"))
        self.assertEqual(frame.vlan, 42, "the VLAN tag stays")
        self.check_inner_v4(frame[IP])

    def test_icmp_fragmentation_needed(self):
        frame = self.frames[7]
        self.assertEqual((frame[IP].src, frame[IP].dst), ("198.18.100.1", "198.18.0.1"))
        self.assertTrue(checksum_ok(frame, IP))
        icmp = frame[ICMP]
        self.assertEqual((icmp.type, icmp.code, icmp.nexthopmtu), (3, 4, 1480))
        self.assertTrue(checksum_ok(frame, ICMP))
        self.assertEqual(len(raw(frame[IP])), 576)

    def test_icmpv6_packet_too_big(self):
        frame = self.frames[8]
        too_big = frame[ICMPv6PacketTooBig]
        self.assertEqual(too_big.mtu, 1440)
        self.assertTrue(checksum_ok(frame, ICMPv6PacketTooBig))
        self.assertEqual(len(raw(frame[IPv6])), 1280)

    def test_neighbor_advertisement(self):
        frame = self.frames[9]
        advert = frame[ICMPv6ND_NA]
        self.assertEqual((advert.tgt, advert.S, advert.O, advert.R), ("2001:db8:100::1", 1, 1, 0))
        self.assertEqual(frame[ICMPv6NDOptDstLLAddr].lladdr, "02:00:00:00:00:10")
        self.assertEqual(frame[IPv6].hlim, 255)
        self.assertTrue(checksum_ok(frame, ICMPv6ND_NA))

    def test_gue_v6_on_a_vlan(self):
        frame = self.frames[10]
        self.assertEqual(frame[Dot1Q].vlan, 7)
        self.assertEqual(frame[Dot1Q].type, 0x86DD)
        self.check_outer_v6(frame, 17)
        self.assertTrue(checksum_ok(frame, UDP), "outer UDP checksum over IPv6, after the tag")
        self.assertEqual(IPv6(raw(frame[UDP].payload)).dst, "2001:db8:100::1")

    # Full-NAT (docs/fullnat.md): both ends rewritten, every checksum right, the payload as sent.
    def test_fullnat_client_tcp_v4(self):
        frame = self.frames[11]
        self.assertEqual((frame[Ether].dst, frame[Ether].src), ("02:00:00:00:00:fe", "02:00:00:00:00:10"))
        self.assertNotIn(Dot1Q, frame, "onto the untagged next hop")
        self.assertEqual((frame[IP].src, frame[IP].dst, frame[IP].ttl), ("198.18.1.20", "198.18.1.2", 64))
        self.assertEqual((frame[TCP].sport, frame[TCP].dport), (20001, 8080))
        self.assertTrue(checksum_ok(frame, IP), "IPv4 header checksum")
        self.assertTrue(checksum_ok(frame, TCP), "TCP checksum over the new pseudo-header")
        self.assertEqual(frame[Raw].load, bytes([0xAB]) * 100)

    def test_fullnat_client_udp_v4(self):
        frame = self.frames[12]
        self.assertEqual((frame[IP].src, frame[IP].dst), ("198.18.1.20", "198.18.1.2"))
        self.assertEqual((frame[UDP].sport, frame[UDP].dport), (20002, 53))
        self.assertTrue(checksum_ok(frame, IP))
        self.assertTrue(checksum_ok(frame, UDP))

    def test_fullnat_reply_tcp_v6(self):
        frame = self.frames[13]
        self.assertEqual((frame[IPv6].src, frame[IPv6].dst), ("2001:db8:100::1", "2001:db8::1"))
        self.assertEqual((frame[TCP].sport, frame[TCP].dport), (443, 40000))
        self.assertTrue(checksum_ok(frame, TCP), "TCP checksum over the IPv6 pseudo-header")

    def test_fullnat_fragmentation_needed_for_the_backend(self):
        frame = self.frames[14]
        self.assertEqual((frame[IP].src, frame[IP].dst), ("198.18.0.254", "198.18.1.2"))
        self.assertTrue(checksum_ok(frame, IP))
        self.assertEqual((frame[ICMP].type, frame[ICMP].code, frame[ICMP].nexthopmtu), (3, 4, 1280))
        self.assertTrue(checksum_ok(frame, ICMP), "ICMP checksum over the rewritten embedded packet")
        embedded = frame[IPerror]
        self.assertEqual((embedded.src, embedded.dst), ("198.18.1.2", "198.18.1.20"))
        self.assertEqual((frame[TCPerror].sport, frame[TCPerror].dport), (80, 20001))
        self.assertTrue(checksum_ok(frame, IPerror), "the embedded IPv4 header's checksum")
        # The embedded TCP segment is whole, so its checksum is checked too.
        segment = IP(raw(embedded))
        sent = segment[TCP].chksum
        segment[TCP].chksum = None
        self.assertEqual(IP(raw(segment))[TCP].chksum, sent, "the embedded TCP checksum")

    def test_fullnat_packet_too_big_for_the_backend(self):
        frame = self.frames[15]
        self.assertEqual((frame[IPv6].src, frame[IPv6].dst), ("2001:db8::fe", "2001:db8:1::2"))
        self.assertEqual(frame[ICMPv6PacketTooBig].mtu, 1280)
        self.assertTrue(checksum_ok(frame, ICMPv6PacketTooBig), "ICMPv6 checksum, pseudo-header included")
        embedded = frame[IPerror6]
        self.assertEqual((embedded.src, embedded.dst), ("2001:db8:1::2", "2001:db8:1::20"))
        self.assertEqual((frame[TCPerror].sport, frame[TCPerror].dport), (443, 20001))

    # NAT64 (RFC 7915, docs/fullnat.md): each header field by the RFC's rules, every checksum
    # right, ICMP errors' types and MTUs mapped and their embedded packets translated.
    def test_nat64_client_segment_becomes_ipv4(self):
        frame = self.frames[16]
        self.assertEqual(frame[Ether].type, 0x0800)
        self.assertNotIn(Dot1Q, frame, "onto the untagged next hop")
        ip = frame[IP]
        self.assertEqual((ip.version, ip.ihl, ip.tos, ip.ttl, ip.proto), (4, 5, 0x28, 61, 6))
        self.assertEqual((ip.src, ip.dst), ("198.18.1.20", "198.18.1.2"))
        self.assertEqual(ip.len, 20 + 20 + 100)
        self.assertEqual((ip.id, ip.flags, ip.frag), (0x1234, 0, 0), "140 bytes: DF clear")
        self.assertTrue(checksum_ok(frame, IP), "IPv4 header checksum")
        self.assertEqual((frame[TCP].sport, frame[TCP].dport), (20001, 8080))
        self.assertTrue(checksum_ok(frame, TCP), "TCP checksum over the IPv4 pseudo-header")
        self.assertEqual(frame[Raw].load, bytes([0xAB]) * 100)

    def test_nat64_backend_datagram_becomes_ipv6_with_a_checksum(self):
        frame = self.frames[17]
        self.assertEqual(frame[Ether].type, 0x86DD)
        ip6 = frame[IPv6]
        self.assertEqual((ip6.version, ip6.tc, ip6.fl, ip6.hlim, ip6.nh), (6, 0x10, 0, 60, 17))
        self.assertEqual((ip6.src, ip6.dst), ("2001:db8:100::1", "2001:db8::1"))
        self.assertEqual(ip6.plen, 8 + 40)
        self.assertEqual((frame[UDP].sport, frame[UDP].dport), (53, 5353))
        self.assertNotEqual(frame[UDP].chksum, 0, "IPv6 requires a UDP checksum")
        self.assertTrue(checksum_ok(frame, UDP), "computed over the IPv6 pseudo-header")

    def test_nat64_packet_too_big_becomes_fragmentation_needed(self):
        frame = self.frames[18]
        ip = frame[IP]
        self.assertEqual((ip.src, ip.dst, ip.proto), ("198.18.1.20", "198.18.1.2", 1))
        self.assertTrue(checksum_ok(frame, IP))
        self.assertEqual((frame[ICMP].type, frame[ICMP].code), (3, 4))
        self.assertEqual(frame[ICMP].nexthopmtu, 1280 - 20, "the MTU less the headers' difference")
        self.assertTrue(checksum_ok(frame, ICMP), "ICMPv4 checksum, no pseudo-header")
        embedded = frame[IPerror]
        self.assertEqual((embedded.src, embedded.dst, embedded.ttl), ("198.18.1.2", "198.18.1.20", 63))
        self.assertEqual(embedded.len, 20 + 20 + 40)
        self.assertTrue(checksum_ok(frame, IPerror), "the embedded IPv4 header's checksum")
        self.assertEqual((frame[TCPerror].sport, frame[TCPerror].dport), (8080, 20001))
        # Quoted whole, so the embedded TCP checksum is checked over the IPv4 pseudo-header.
        segment = IP(raw(embedded))
        sent = segment[TCP].chksum
        segment[TCP].chksum = None
        self.assertEqual(IP(raw(segment))[TCP].chksum, sent, "the embedded TCP checksum")

    def test_nat64_fragmentation_needed_becomes_packet_too_big(self):
        frame = self.frames[19]
        ip6 = frame[IPv6]
        self.assertEqual((ip6.src, ip6.dst, ip6.nh), ("2001:db8:100::1", "2001:db8::1", 58))
        too_big = frame[ICMPv6PacketTooBig]
        self.assertEqual(too_big.mtu, 1280, "1200 + 20, raised to IPv6's minimum")
        self.assertTrue(checksum_ok(frame, ICMPv6PacketTooBig), "ICMPv6 checksum, pseudo-header included")
        embedded = frame[IPerror6]
        self.assertEqual((embedded.src, embedded.dst, embedded.nh), ("2001:db8::1", "2001:db8:100::1", 6))
        self.assertEqual(embedded.plen, 20 + 1400, "the client's segment's own length")
        self.assertEqual((frame[TCPerror].sport, frame[TCPerror].dport), (40000, 443))


if __name__ == "__main__":
    unittest.main(verbosity=2)
