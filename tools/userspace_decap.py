#!/usr/bin/python3
"""A userspace decapsulator for test backends whose kernel lacks ipip, ip_gre or fou: it takes
the packets berthd sends a backend in ipip, gre or gue and hands the client's packet inside to
the backend's kernel through a tun device, where the kernel's TCP and UDP serve it as if the
kernel had decapsulated it. tools/backend-setup.sh starts it with --decap userspace, after it
has made the tun device; the end-to-end tests use it on kernels without those modules.

It reads the outer packets from raw IP sockets (protocol 4 and 41 for ipip, 47 for gre) and
from a UDP socket on the GUE port (GUE variant 1, the client's packet directly in the UDP
payload, as berthd sends it); holding those sockets also keeps the kernel from answering the
outer packets with ICMP unreachables. It is a test tool: one thread in Python, a few thousand
packets a second, no fragment reassembly; a production backend uses the kernel's modules.

Usage: userspace_decap.py --tun NAME --mode ipip|gre|gue [--gue-port N] [--pidfile FILE]
"""
import argparse
import fcntl
import os
import select
import socket
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
GRE_HEADER = 4  # berthd's GRE: no checksum, key or sequence number
ETHERTYPE_IPV4, ETHERTYPE_IPV6 = 0x0800, 0x86DD


def open_tun(name):
    descriptor = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(descriptor, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return descriptor


def inner_of_raw(data, family, protocol):
    """The client's packet in an outer packet a raw socket gave: IPv4 raw sockets include the
    outer header, IPv6 ones do not. None if it is not one berthd sends."""
    if family == socket.AF_INET:
        if len(data) < 20:
            return None
        data = data[(data[0] & 0x0F) * 4:]
    if protocol != socket.IPPROTO_GRE:
        return data
    if len(data) < GRE_HEADER:
        return None
    flags_and_version, ethertype = struct.unpack("!HH", data[:GRE_HEADER])
    if flags_and_version != 0 or ethertype not in (ETHERTYPE_IPV4, ETHERTYPE_IPV6):
        return None
    return data[GRE_HEADER:]


def inbound_sockets(mode, gue_port):
    """(socket, family, protocol) for each way the mode's packets arrive."""
    sockets = []
    for family in (socket.AF_INET, socket.AF_INET6):
        if mode == "gue":
            receiver = socket.socket(family, socket.SOCK_DGRAM)
            if family == socket.AF_INET6:
                receiver.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            receiver.bind(("0.0.0.0" if family == socket.AF_INET else "::", gue_port))
            sockets.append((receiver, family, socket.IPPROTO_UDP))
            continue
        protocols = [socket.IPPROTO_GRE] if mode == "gre" else [socket.IPPROTO_IPIP,
                                                                 socket.IPPROTO_IPV6]
        for protocol in protocols:
            sockets.append((socket.socket(family, socket.SOCK_RAW, protocol), family, protocol))
    return sockets


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tun", required=True)
    parser.add_argument("--mode", required=True, choices=["ipip", "gre", "gue"])
    parser.add_argument("--gue-port", type=int, default=6080)
    parser.add_argument("--pidfile")
    options = parser.parse_args()
    tun = open_tun(options.tun)
    sockets = inbound_sockets(options.mode, options.gue_port)
    if options.pidfile:
        with open(options.pidfile, "w") as out:
            out.write("%d\n" % os.getpid())
    by_descriptor = {entry[0].fileno(): entry for entry in sockets}
    poller = select.poll()
    for descriptor in by_descriptor:
        poller.register(descriptor, select.POLLIN)
    while True:
        for descriptor, _ in poller.poll():
            receiver, family, protocol = by_descriptor[descriptor]
            data = receiver.recv(65535)
            inner = data if protocol == socket.IPPROTO_UDP else inner_of_raw(data, family, protocol)
            if inner and inner[0] >> 4 in (4, 6):
                os.write(tun, inner)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
