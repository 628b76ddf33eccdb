#!/usr/bin/env python3
"""Writes a seed corpus of well-formed frames for the packet parser fuzzer, so that it starts
from every branch of the parser rather than having to discover the ethertypes first.

Usage: make_seeds.py DIRECTORY
"""
import os
import struct
import sys


def ethernet(ether_type, vlans=(), tpid=0x8100):
    header = bytes.fromhex("020000000001" "020000000002")
    for vlan in vlans:
        header += struct.pack("!HH", tpid, vlan)
    return header + struct.pack("!H", ether_type)


def ipv4(src, dst, protocol, payload_length, flags_offset=0x4000, options=b""):
    ihl = 5 + len(options) // 4
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + payload_length, 0, flags_offset,
                       64, protocol, 0, bytes(src), bytes(dst)) + options


def ipv6(src, dst, next_header, payload_length):
    return struct.pack("!IHBB16s16s", 0x60000000, payload_length, next_header, 64, src, dst)


def tcp(sport, dport):
    return struct.pack("!HHIIBBHHH", sport, dport, 0, 0, 0x50, 0x02, 0, 0, 0)


def udp(sport, dport, payload_length):
    return struct.pack("!HHHH", sport, dport, 8 + payload_length, 0)


def icmp(kind, code):
    return struct.pack("!BBHI", kind, code, 0, 0)


CLIENT, VIP = [198, 18, 0, 1], [198, 18, 100, 1]
CLIENT6 = bytes.fromhex("20010db8000000000000000000000001")
VIP6 = bytes.fromhex("20010db8010000000000000000000001")

SEEDS = {
    "tcp4": ethernet(0x0800) + ipv4(CLIENT, VIP, 6, 20) + tcp(40000, 80),
    "udp4_options": ethernet(0x0800) + ipv4(CLIENT, VIP, 17, 8, options=b"\x01" * 8) + udp(1, 53, 0),
    "qinq_tcp4": ethernet(0x0800, (100, 200), 0x88A8) + ipv4(CLIENT, VIP, 6, 20) + tcp(1, 80),
    "fragment4": ethernet(0x0800) + ipv4(CLIENT, VIP, 17, 8, flags_offset=0x2000) + udp(1, 53, 0),
    "later_fragment4": ethernet(0x0800) + ipv4(CLIENT, VIP, 17, 4, flags_offset=185) + b"abcd",
    "icmp_error4": ethernet(0x0800) + ipv4([198, 18, 0, 254], VIP, 1, 36) + icmp(3, 4)
    + ipv4(VIP, CLIENT, 6, 1480) + tcp(80, 40000)[:8],
    "tcp6": ethernet(0x86DD) + ipv6(CLIENT6, VIP6, 6, 20) + tcp(40000, 443),
    "udp6_extensions": ethernet(0x86DD) + ipv6(CLIENT6, VIP6, 0, 8 + 8 + 8 + 8)
    + bytes([43, 0]) + b"\0" * 6 + bytes([44, 0]) + b"\0" * 6 + bytes([17, 0, 0, 1]) + b"\0" * 4
    + udp(1000, 53, 0),
    "icmp6_too_big": ethernet(0x86DD) + ipv6(CLIENT6, VIP6, 58, 8 + 40 + 8) + icmp(2, 0)
    + ipv6(VIP6, CLIENT6, 6, 1400) + tcp(443, 40000)[:8],
    "arp": ethernet(0x0806) + b"\0" * 28,
}

os.makedirs(sys.argv[1], exist_ok=True)
for name, frame in SEEDS.items():
    with open(os.path.join(sys.argv[1], name), "wb") as seed:
        seed.write(frame)
