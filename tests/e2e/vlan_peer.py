"""The far end of a VLAN trunk, for vlan_trunk_test.py: a scapy process on a raw socket in its
own namespace, because this kernel has no 802.1Q devices. It is the gateway of the untagged
segment and of VLANs 10 and 20 (answering berth's ARP requests for them, on the tag they came
with, from a MAC per VLAN), and the client: it sends a SYN to the VIP on each segment and on
VLAN 30, which berth has no port on, and pings VLAN 10's port address. It records what berth
sends, and prints it as JSON when everything expected has come, or after `seconds`.

Usage: vlan_peer.py INTERFACE PORT_MAC VIP BACKEND SECONDS
"""
import json
import sys
import time

from scapy.all import ARP, ICMP, IP, IPv6, TCP, AsyncSniffer, Dot1Q, Ether, conf, sendp

INTERFACE, PORT_MAC, VIP, BACKEND, SECONDS = sys.argv[1:6]
VLANS = (0, 10, 20)  # 0: untagged
UNCONFIGURED_VLAN = 30
conf.verb = 0


def gateway_of(vlan):
    return "198.18.%d.1" % vlan


def gateway_mac_of(vlan):
    return "02:00:00:00:%02d:01" % vlan


def port_address_of(vlan):
    return "198.18.%d.10" % vlan


def tagged(frame, vlan):
    """`frame`'s Ethernet header, then a tag for `vlan` unless 0, then its payload."""
    header = Ether(dst=frame.dst, src=frame.src)
    return header / Dot1Q(vlan=vlan) / frame.payload if vlan else header / frame.payload


def vlan_of(frame):
    return frame[Dot1Q].vlan if Dot1Q in frame else 0


seen = {"arp_requests": [], "encapsulated": {}, "echo_replies": [], "untagged_on_a_vlan": []}


def on_frame(frame):
    if Ether not in frame or frame[Ether].src != PORT_MAC:
        return
    vlan = vlan_of(frame)
    if ARP in frame and frame[ARP].op == 1:
        seen["arp_requests"].append([vlan, frame[ARP].psrc, frame[ARP].pdst])
        if frame[ARP].pdst == gateway_of(vlan):
            answer = Ether(dst=frame.src, src=gateway_mac_of(vlan)) / ARP(
                op=2, hwsrc=gateway_mac_of(vlan), psrc=frame[ARP].pdst, hwdst=frame[ARP].hwsrc,
                pdst=frame[ARP].psrc)
            sendp(tagged(answer, vlan), iface=INTERFACE)
    elif IP in frame and frame[IP].dst == BACKEND and frame[IP].proto == 4:
        inner = frame[IP].payload
        if TCP in inner:
            seen["encapsulated"][str(inner[TCP].sport)] = [vlan, frame[Ether].dst, frame[IP].src]
    elif IP in frame and ICMP in frame and frame[ICMP].type == 0:
        seen["echo_replies"].append([vlan, frame[IP].src])
    if vlan == 0 and IP in frame and frame[IP].src != port_address_of(0):
        seen["untagged_on_a_vlan"].append(frame.summary())


def client_frames():
    frames = []
    for vlan in VLANS + (UNCONFIGURED_VLAN,):
        syn = Ether(dst=PORT_MAC, src=gateway_mac_of(vlan)) / IP(src="198.18.200.1", dst=VIP) / TCP(
            sport=40000 + vlan, dport=80, flags="S")
        frames.append(tagged(syn, vlan))
    ping = Ether(dst=PORT_MAC, src=gateway_mac_of(10)) / IP(
        src=gateway_of(10), dst=port_address_of(10)) / ICMP(type=8, id=7)
    frames.append(tagged(ping, 10))
    return frames


def complete():
    return (all(str(40000 + vlan) in seen["encapsulated"] for vlan in VLANS) and
            seen["echo_replies"])


def main():
    sniffer = AsyncSniffer(iface=INTERFACE, prn=on_frame, store=False,
                           lfilter=lambda frame: IPv6 not in frame)
    sniffer.start()
    print("listening", flush=True)
    deadline = time.monotonic() + float(SECONDS)
    while time.monotonic() < deadline and not complete():
        sendp(client_frames(), iface=INTERFACE)
        time.sleep(0.3)
    time.sleep(0.5)  # what is on its way
    sniffer.stop()
    print(json.dumps(seen), flush=True)


main()
