#!/usr/bin/python3
"""berthd.service's sandbox against what berthd does: PID 1 here is not systemd, so a system-call
filter that breaks berthd would ship green. berthd runs under `strace -f` over a start,
forwarding on af_packet, on af_xdp and through a tap exception interface, a reload and a stop,
and the test fails on any system call outside the unit's SystemCallFilter (as
`systemd-analyze syscall-filter` expands its groups), any socket family outside its
RestrictAddressFamilies, any writable and executable mapping (MemoryDenyWriteExecute), any
write under /proc/sys or /sys (ProtectKernelTunables) and any real-time scheduling
(RestrictRealtime). Needs root (veth, /dev/net/tun, af_xdp).

Usage: berthd_syscalls_test.py BERTHD BERTHCTL UNIT_FILE
"""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import wait_for_line  # noqa: E402

BERTHD, BERTHCTL, UNIT = sys.argv[1:4]
del sys.argv[1:4]
TAG = "%d" % (os.getpid() % 100000)
PACKET, PACKET_PEER = "sca%s" % TAG, "scb%s" % TAG
XDP, XDP_PEER = "scc%s" % TAG, "scd%s" % TAG
TAP = "sct%s" % TAG
PREFIX = "berth-syscalls-%s" % TAG

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "0@0,1@1",
        "--vdev", "net_af_packet0,iface={packet}", "--vdev", "net_af_xdp0,iface={xdp}",
        "--log-level", "lib.eal:error"]
  ports:
    - {{ name: wan, device: net_af_packet0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
        exception: {{ kind: tap, name: {tap} }} }}
    - {{ name: lan, device: net_af_xdp0, ipv4: 198.18.2.10, gateway_mac: "02:00:00:00:00:fd",
        queues: 1 }}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: {{ type: tcp, address: 127.0.0.1, port: 1, interval: 0.2, timeout: 0.1 }}
    backends:
{backends}
"""


def config(backends):
    return CONFIG.format(prefix=PREFIX, packet=PACKET, xdp=XDP, tap=TAP, backends="".join(
        "      - { name: web-%d, address: 198.18.1.%d }\n" % (i, i + 1) for i in range(backends)))


def mac_of(interface):
    with open("/sys/class/net/%s/address" % interface) as f:
        return f.read().strip()


def expand_groups(tokens):
    """System calls named by a SystemCallFilter value, groups expanded by systemd-analyze."""
    listing = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True,
                             check=True).stdout
    groups, current = {}, None
    for line in listing.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())

    def expand(token, seen):
        if not token.startswith("@"):
            return {token}
        if token in seen:
            return set()
        seen.add(token)
        names = set()
        for member in groups[token]:
            names |= expand(member, seen)
        return names

    names = set()
    for token in tokens:
        names |= expand(token, set())
    return names


def unit_filters():
    """The unit's system calls allowed and socket families, as systemd combines its lines."""
    allowed, denied, families = set(), set(), set()
    with open(UNIT) as f:
        for line in f:
            name, _, value = line.strip().partition("=")
            if name == "SystemCallFilter":
                if value.startswith("~"):
                    denied |= expand_groups(value[1:].split())
                else:
                    allowed |= expand_groups(value.split())
            elif name == "RestrictAddressFamilies":
                families |= set(value.split())
    return allowed - denied, families


class Syscalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthd-syscalls-")
        for link, peer in ((PACKET, PACKET_PEER), (XDP, XDP_PEER)):
            subprocess.run(["ip", "link", "add", link, "type", "veth", "peer", "name", peer],
                           check=True)
            for name in (link, peer):
                subprocess.run(["ip", "link", "set", name, "up"], check=True)
        cls.config = os.path.join(cls.directory, "berth.yaml")
        with open(cls.config, "w") as f:
            f.write(config(2))
        cls.control = os.path.join(cls.directory, "berth.sock")
        cls.trace = os.path.join(cls.directory, "strace.txt")
        cls.process = subprocess.Popen(
            ["strace", "-f", "-qq", "-s", "200", "-e", "signal=none", "-o", cls.trace,
             BERTHD, "--", "--config", cls.config, "--control-socket", cls.control,
             "--drain-state", os.path.join(cls.directory, "drains.json")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.process.stdout), daemon=True).start()
        wait_for_line(cls.lines, cls.process, "forwarding:", timeout=120)
        # Signals go to berthd itself: strace, sent one, would detach from it instead.
        with open("/proc/%d/task/%d/children" % (cls.process.pid, cls.process.pid)) as f:
            cls.berthd_pid = int(f.read().split()[0])
        cls.exercise()
        os.kill(cls.berthd_pid, signal.SIGTERM)
        cls.returncode = cls.process.wait(timeout=120)
        cls.calls, cls.families, cls.findings = cls.read_trace()

    @classmethod
    def tearDownClass(cls):
        if cls.process.poll() is None:
            cls.process.kill()
            cls.process.wait()
        for link in (PACKET, XDP, TAP):
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def stats(cls):
        reply = subprocess.run([BERTHCTL, "stats", "--json", "--socket", cls.control],
                               capture_output=True, text=True, timeout=60)
        assert reply.returncode == 0, reply.stderr
        return json.loads(reply.stdout)

    @classmethod
    def exercise(cls):
        """Frames through both ports and the exception path, a control request, a reload."""
        from scapy.all import ARP, ICMP, IP, TCP, Ether, sendp  # noqa: E402  (slow to import)
        wan, lan = mac_of(PACKET), mac_of(XDP)
        deadline = time.monotonic() + 60
        while True:
            sendp([Ether(dst=wan) / IP(src="198.18.0.1", dst="198.18.100.1") /
                   TCP(sport=40000 + i, dport=80, flags="S") for i in range(20)],
                  iface=PACKET_PEER, verbose=False)
            sendp(Ether(dst=wan) / IP(src="198.18.0.1", dst="198.18.0.10") / ICMP(),
                  iface=PACKET_PEER, verbose=False)
            sendp([Ether(dst=lan) / IP(src="198.18.2.1", dst="198.18.100.1") /
                   TCP(sport=41000 + i, dport=80, flags="S") for i in range(20)] +
                  [Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:fd") /
                   ARP(op=1, psrc="198.18.2.1", pdst="198.18.2.10", hwsrc="02:00:00:00:00:fd")],
                  iface=XDP_PEER, verbose=False)
            reply = cls.stats()
            ports = {port["port"]: port["totals"] for port in reply["ports"]}
            counters = reply["stats"]["counters"]
            kernel = sum(v for k, v in counters.items() if k.startswith("to_kernel_"))
            if (min(ports[p]["ipackets"] for p in ports) > 0 and ports["lan"]["opackets"] > 0
                    and counters["tx_packets"] > 0 and kernel > 0):
                break
            assert time.monotonic() < deadline, json.dumps(reply)
            time.sleep(1)
        with open(cls.config, "w") as f:
            f.write(config(3))
        after = len(cls.lines)
        os.kill(cls.berthd_pid, signal.SIGHUP)
        line = wait_for_line(cls.lines, cls.process, "reload of", after, timeout=60)
        assert "applied" in line, line

    @classmethod
    def read_trace(cls):
        calls = collections.Counter()
        families = set()
        findings = []
        with open(cls.trace) as f:
            for line in f:
                match = re.match(r"\d+\s+(\w+)\((.*)", line)
                if not match:
                    continue  # "<... resumed>", exits
                call, rest = match.groups()
                calls[call] += 1
                if call in ("socket", "socketpair"):
                    families.add(rest.split(",")[0])
                if call in ("mmap", "mprotect", "pkey_mprotect") and re.search(
                        r"PROT_WRITE\|PROT_EXEC|PROT_EXEC\|PROT_WRITE|PROT_READ\|PROT_WRITE\|PROT_EXEC",
                        rest):
                    findings.append("writable and executable memory: " + line.strip())
                if call in ("open", "openat") and re.search(r'"/(proc/sys|sys)/', rest) and re.search(
                        r"O_WRONLY|O_RDWR", rest):
                    findings.append("a kernel tunable opened for writing: " + line.strip())
                if call in ("sched_setscheduler", "sched_setattr") and re.search(
                        r"SCHED_(FIFO|RR|DEADLINE)", rest):
                    findings.append("real-time scheduling: " + line.strip())
        return calls, families, findings

    def test_berthd_forwarded_reloaded_and_stopped_cleanly(self):
        self.assertEqual(self.returncode, 0, "".join(self.lines[-30:]))
        self.assertGreater(self.calls["sendto"] + self.calls["write"], 0)

    def test_every_system_call_is_in_the_units_filter(self):
        allowed, _ = unit_filters()
        self.assertGreater(len(allowed), 300)
        outside = {call: count for call, count in self.calls.items() if call not in allowed}
        self.assertEqual(outside, {}, "system calls SystemCallFilter refuses (with EPERM)")

    def test_every_socket_family_is_in_the_units_list(self):
        _, families = unit_filters()
        self.assertIn("AF_PACKET", self.families, "af_packet opened its socket")
        self.assertIn("AF_XDP", self.families, "af_xdp opened its socket")
        self.assertEqual(self.families - families, set(), "families RestrictAddressFamilies refuses")

    def test_nothing_the_other_settings_forbid(self):
        self.assertEqual(self.findings, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
