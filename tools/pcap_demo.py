#!/usr/bin/env python3
"""berth's live demo on a machine without a NIC: generates a capture of many flows to the VIPs of
a config, replays it through berthd on a net_pcap vdev, decodes what berthd sent with its own
decoder (plain Python, no berth code), and prints per-backend shares against the Maglev table,
the drop counters and the packets per second berthd saw.

Usage: pcap_demo.py --berthd PATH --berthctl PATH --config FILE [--flows N] [--packets N]
       pcap_demo.py ... --write-capture PATH    (the capture only, for perf/)
"""
import argparse
import collections
import ipaddress
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from berthd_reports import request_reports_until  # noqa: E402

PORT_MAC = bytes.fromhex("027063617000")  # the MAC the pcap PMD gives its first port
CLIENT_MAC = bytes.fromhex("020000000002")
OTHER_MAC = bytes.fromhex("020000000099")


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_header(source, destination, protocol, payload_length, ihl=5):
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + payload_length, 0, 0x4000, 64,
                         protocol, 0, source, destination)
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:]


def ipv6_header(source, destination, next_header, payload_length):
    return struct.pack("!IHBB16s16s", 6 << 28, payload_length, next_header, 64, source, destination)


def transport(protocol, source_port, destination_port, payload):
    if protocol == 6:  # a SYN, as a new connection's first packet
        return struct.pack("!HHIIBBHHH", source_port, destination_port, 1, 0, 5 << 4, 0x02, 65535,
                           0, 0) + payload
    return struct.pack("!HHHH", source_port, destination_port, 8 + len(payload), 0) + payload


def frame(destination_mac, ether_type, body):
    data = destination_mac + CLIENT_MAC + struct.pack("!H", ether_type) + body
    return data + b"\0" * max(0, 60 - len(data))  # Ethernet minimum, without the FCS


def parse_listener(text):
    protocol, endpoint = text.split(" ", 1)
    address, port = endpoint.rsplit(":", 1)
    return {"tcp": 6, "udp": 17}[protocol], ipaddress.ip_address(address.strip("[]")), int(port)


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for index, data in enumerate(frames):
            out.write(struct.pack("<IIII", index // 1000000, index % 1000000, len(data), len(data)))
            out.write(data)


def read_pcap(path):
    with open(path, "rb") as source:
        data = source.read()
    frames, offset = [], 24
    while offset + 16 <= len(data):
        length = struct.unpack_from("<I", data, offset + 8)[0]
        frames.append(data[offset + 16:offset + 16 + length])
        offset += 16 + length
    return frames


def malformed_frames():
    """Frames berthd must drop, with the counter each lands in."""
    good = ipv4_header(bytes([198, 18, 0, 1]), bytes([198, 18, 100, 1]), 6, 20) + transport(6, 1, 80, b"")
    bad_ihl = bytes([0x44]) + good[1:]
    short_tcp = ipv4_header(bytes([198, 18, 0, 1]), bytes([198, 18, 100, 1]), 6, 10) + b"\0" * 10
    return [
        (PORT_MAC + CLIENT_MAC[:4], "parse_short_frame"),
        (frame(PORT_MAC, 0x0800, bad_ihl), "parse_ipv4_ihl_below_5"),
        (frame(PORT_MAC, 0x0800, short_tcp), "parse_truncated_tcp"),
        (frame(OTHER_MAC, 0x0800, good), "drop_not_for_us"),
    ]


def arp_request(sender, target):
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, CLIENT_MAC, sender, b"\0" * 6, target)
    return frame(b"\xff" * 6, 0x0806, body)


class Decoded:
    def __init__(self):
        self.backend_of_flow = {}
        self.split_flows = set()
        self.bad_checksums = 0
        self.arp_replies = 0
        self.undecoded = 0


def decode(frames, backend_by_address, backend_by_mac):
    """Maps each output frame to (service, backend) by its outer destination (or destination MAC
    for l2dsr), and the flow by its inner source address and port."""
    result = Decoded()
    for data in frames:
        ether_type = struct.unpack_from("!H", data, 12)[0]
        if ether_type == 0x0806:
            result.arp_replies += 1
            continue
        backend = backend_by_mac.get(data[0:6])
        inner = None
        if backend is not None:  # l2dsr: the client's packet as it came
            inner = data[14:]
        elif ether_type == 0x0800:
            outer = data[14:34]
            if checksum(outer) != 0:
                result.bad_checksums += 1
            protocol, destination = outer[9], outer[16:20]
            backend = backend_by_address.get(destination)
            offset = {4: 34, 41: 34, 47: 38, 17: 42}.get(protocol)
            inner = data[offset:] if offset else None
        elif ether_type == 0x86DD:
            protocol, destination = data[20], data[38:54]
            backend = backend_by_address.get(destination)
            offset = {4: 54, 41: 54, 47: 58, 17: 62}.get(protocol)
            inner = data[offset:] if offset else None
        if backend is None or inner is None:
            result.undecoded += 1
            continue
        if inner[0] >> 4 == 4:
            header_length = (inner[0] & 0x0F) * 4
            flow = (inner[12:16], struct.unpack_from("!H", inner, header_length)[0])
        else:
            flow = (inner[8:24], struct.unpack_from("!H", inner, 40)[0])
        key = (backend[0], flow)
        if result.backend_of_flow.setdefault(key, backend[1]) != backend[1]:
            result.split_flows.add(key)
    return result


def run_berthd(arguments, expected_frames, timeout):
    """Runs berthd until it has received every frame of the capture, then stops it with SIGINT."""
    process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    request_reports_until(process, lines, lambda received: received >= expected_frames, timeout)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    return process.returncode, stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--berthd", required=True)
    parser.add_argument("--berthctl", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--flows", type=int, default=100000)
    parser.add_argument("--packets", type=int, default=200000)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--write-capture", metavar="PATH",
                        help="only write the capture (flows only, no malformed frames) and exit")
    options = parser.parse_args()
    if options.flows <= 0 or options.packets < options.flows:
        parser.error("--flows must be positive and --packets at least --flows")

    names = json.loads(subprocess.run([options.berthctl, "analyze", "--config", options.config,
                                       "--json", "--max-failures", "1"],
                                      check=True, capture_output=True, text=True).stdout)
    services = []
    for entry in names["services"]:
        table = json.loads(subprocess.run([options.berthctl, "table", "--config", options.config,
                                           "--service", entry["name"], "--json"],
                                          check=True, capture_output=True, text=True).stdout)
        table["protocol"], table["vip"], table["port"] = parse_listener(table["listener"])
        services.append(table)

    generator = random.Random(1)
    frames = []
    flows_per_service = options.flows // len(services)
    packets_per_flow = options.packets // options.flows
    for service in services:
        vip = service["vip"]
        for _ in range(flows_per_service):
            sport = 1024 + generator.randrange(64000)
            if vip.version == 4:
                client = bytes([198, 18, 32 + generator.randrange(32), 1 + generator.randrange(254)])
                body = transport(service["protocol"], sport, service["port"], b"berth")
                packet = ipv4_header(client, vip.packed, service["protocol"], len(body)) + body
                ether_type = 0x0800
            else:
                client = bytes.fromhex("20010db8c000") + generator.randbytes(10)
                body = transport(service["protocol"], sport, service["port"], b"berth")
                packet = ipv6_header(client, vip.packed, service["protocol"], len(body)) + body
                ether_type = 0x86DD
            frames.extend([frame(PORT_MAC, ether_type, packet)] * packets_per_flow)
    generator.shuffle(frames)
    if options.write_capture:
        write_pcap(options.write_capture, frames)
        return 0
    malformed = malformed_frames() * 10
    for data, _ in malformed:
        frames.insert(generator.randrange(len(frames)), data)
    frames.insert(0, arp_request(bytes([198, 18, 0, 1]), bytes([198, 18, 0, 10])))

    directory = tempfile.mkdtemp(prefix="berth-demo-")
    try:
        input_path = os.path.join(directory, "in.pcap")
        output_path = os.path.join(directory, "out.pcap")
        counters_path = os.path.join(directory, "counters.json")
        write_pcap(input_path, frames)
        flow_count = flows_per_service * len(services)
        print("== %d flows in %d packets to %d services (%s), plus %d malformed or stray frames "
              "and an ARP request" % (flow_count, flow_count * packets_per_flow, len(services),
                                      ", ".join(s["listener"] for s in services), len(malformed)))
        print("== berthd --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap -- --config %s" % options.config)
        returncode, stderr = run_berthd(
            [options.berthd, "--vdev", "net_pcap0,rx_pcap=%s,tx_pcap=%s" % (input_path, output_path),
             "--", "--config", options.config, "--counters-json", counters_path,
             "--control-socket", os.path.join(directory, "berth.sock")],
            len(frames), options.timeout)
        for line in stderr.splitlines():
            if line.startswith("berthd:"):
                print("   " + line)
        if returncode != 0 or not os.path.exists(counters_path):
            print("berthd failed (exit %s):\n%s" % (returncode, stderr), file=sys.stderr)
            return 1
        with open(counters_path) as source:
            report = json.load(source)
        output = read_pcap(output_path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    backend_by_address, backend_by_mac = {}, {}
    for service in services:
        for backend in service["backends"]:
            backend_by_address[ipaddress.ip_address(backend["address"]).packed] = (service["service"], backend["name"])
    decoded = decode(output, backend_by_address, backend_by_mac)
    flows = collections.Counter(decoded.backend_of_flow.items())
    per_backend = collections.Counter()
    for (service, _), backend in decoded.backend_of_flow.items():
        per_backend[(service, backend)] += 1

    print("== what berthd sent, decoded: %d frames" % len(output))
    worst = 0.0
    for service in services:
        total = sum(per_backend[(service["service"], b["name"])] for b in service["backends"])
        print("service %s (%s, %s): %d flows" % (service["service"], service["listener"],
                                                  service["forwarding"], total))
        print("  %-10s %-16s %8s %8s %12s" % ("backend", "address", "flows", "share", "table share"))
        for backend in service["backends"]:
            count = per_backend[(service["service"], backend["name"])]
            share = count / total if total else 0.0
            table_share = backend["slots"] / service["table_size"]
            worst = max(worst, abs(share - table_share))
            print("  %-10s %-16s %8d %7.2f%% %11.2f%%" % (backend["name"], backend["address"], count,
                                                        100 * share, 100 * table_share))
    print("every flow on one backend: %s; outer IPv4 checksums wrong: %d; frames not decoded: %d"
          % ("yes" if not decoded.split_flows else "NO (%d split)" % len(decoded.split_flows),
             decoded.bad_checksums, decoded.undecoded))
    print("largest gap between a backend's flow share and its table share: %.2f points" % (100 * worst))
    counters = report["counters"]
    drops = ", ".join("%s %d" % (name, value) for name, value in counters.items()
                      if value and name.startswith(("parse_", "drop_")))
    print("drop counters: %s" % (drops or "none"))
    print("answered: %d ARP/ND request(s), %d ICMP too-big" % (counters["arp_nd_replies"],
                                                             counters["icmp_too_big_replies"]))
    print("berthd received %d frames in %.4f s: %.2f Mpps on one worker (net_pcap reads and writes "
          "the capture files through libpcap, which bounds this figure)"
          % (counters["rx_packets"], report["rx_window_s"], report["rx_pps"] / 1e6))
    ok = (not decoded.split_flows and decoded.bad_checksums == 0 and decoded.undecoded == 0
          and counters["rx_packets"] == len(frames) and len(flows) > 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
