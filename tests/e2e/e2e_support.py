"""What the end-to-end tests share: hosts in network namespaces on a bridge, the HTTP backends,
curl from a client namespace, and berthd run as a process with berthctl beside it.

Every name a test makes carries its PID (TAG), and everything is removed by name at exit, from
atexit, so a failing or timed-out test leaves nothing behind.
"""
import atexit
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "%d" % (os.getpid() % 100000)
HTTP_PORT = 8080
BIG_BYTES = 5 * 1024 * 1024
BIG_SHA256 = hashlib.sha256((bytes(range(251)) * (BIG_BYTES // 251 + 1))[:BIG_BYTES]).hexdigest()
# berthd's EAL lcores in every e2e test: the main lcore (the management loop, and the exception
# path's thread it starts) on CPU 1, beside the kernel's side of the test (BIRD, the backends,
# curl), and the busy-polling worker alone on CPU 0, as an appliance keeps its workers off the
# housekeeping CPU. With the management loop, which wakes hundreds of times a second, sharing
# CPU 0 with two busy workers, this VM's scheduler left CPU 0's kworker runnable and unrun for
# 16 of 30 s; the kernel logged "workqueue lockup" on CPU 0 for up to 530 s, and anything that
# waited on that CPU's work queue (a process exiting, a link deleted) waited that long. With
# this placement: 0 of 60 s.
LCORES = "0@1,1@0"


def run(*command, check=True, timeout=30):
    return subprocess.run(command, check=check, capture_output=True, text=True, timeout=timeout)


def stop_process(process, stop_signal=signal.SIGINT, timeout=30):
    """Asks a process to stop, and kills it if it has not within `timeout` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(stop_signal)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def main():
    """Runs the test module's cases as root, cleaning up even after a timeout's SIGTERM."""
    if os.geteuid() != 0:
        print("needs root (network namespaces)")
        sys.exit(77)
    # A timeout's SIGTERM still removes the namespaces, links and processes (atexit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    unittest.main(module="__main__", verbosity=2)


def l2dsr_service_lines(name, vip, announce, interval=0.5, rise=2, fall=3):
    """A config's lines for an L2 DSR HTTP service with health checks, up to its backends."""
    return ["  - name: %s" % name,
            "    vip: %s" % vip,
            "    port: %d" % HTTP_PORT,
            "    protocol: tcp",
            "    forwarding: l2dsr",
            "    announce: %s" % announce,
            "    health: { type: http, path: /healthz, interval: %s, timeout: 0.4, rise: %d, "
            "fall: %d }" % (interval, rise, fall),
            "    backends:"]


def make_bridge(name, address_cidr=None):
    """A bridge in the host namespace, holding the host's own address on it if one is given."""
    run("ip", "link", "add", name, "type", "bridge")
    if address_cidr:
        run("ip", "addr", "add", address_cidr, "dev", name)
    run("ip", "link", "set", name, "up")


def make_af_packet_port(name, bridge, netns=None):
    """A veth for berthd's net_af_packet, its peer on the bridge; IPv6 off to keep it quiet.

    With `netns`, the port lies in that namespace, where its berthd must run. Two berthd
    processes with af_packet ports in one namespace can collide: the PMD names its PACKET_FANOUT
    group (pid ^ ifindex) & 0xffff, groups are per namespace, and the second to join a group
    bound to another interface gets EINVAL."""
    in_namespace = ["ip", "netns", "exec", netns] if netns else []
    into_namespace = ["netns", netns] if netns else []
    run("ip", "link", "add", name, *into_namespace, "type", "veth", "peer", "name", name + "p")
    run(*in_namespace, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % name)
    run("sysctl", "-qw", "net.ipv6.conf.%sp.disable_ipv6=1" % name)
    if netns:
        # The namespace's kernel sees the port's packets too (af_packet copies them; a NIC DPDK
        # owns would not): it must not answer ARP on the port for the namespace's own addresses,
        # nor take IP packets arriving there. Strict reverse-path filtering drops those, whose
        # sources are routed elsewhere (through berthd's kernel interface): a socket bound to
        # that interface would otherwise answer the port's copy with a reset.
        run(*in_namespace, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1")
        run(*in_namespace, "sysctl", "-qw", "net.ipv4.conf.%s.rp_filter=1" % name)
    run("ip", "link", "set", name + "p", "master", bridge, "up")
    run(*in_namespace, "ip", "link", "set", name, "up")


def add_host(namespace, peer, bridge, address_cidr, mac=None, interface="e0"):
    """A namespace whose `interface` is a veth to `bridge`, with that address."""
    run("ip", "netns", "add", namespace)
    run("ip", "link", "add", peer, "type", "veth", "peer", "name", interface, "netns", namespace)
    run("ip", "link", "set", peer, "master", bridge, "up")
    if mac:
        run("ip", "-n", namespace, "link", "set", interface, "address", mac)
    run("ip", "-n", namespace, "addr", "add", address_cidr, "dev", interface)
    run("ip", "-n", namespace, "link", "set", interface, "up")
    run("ip", "-n", namespace, "link", "set", "lo", "up")
    # A kernel sender on veth leaves its TCP and UDP checksums to an offload that never runs for
    # a frame berthd reads through af_packet, so the namespace fills them in itself.
    run("ip", "netns", "exec", namespace, "ethtool", "-K", interface, "tx", "off")


BACKEND_SETUP = os.path.join(HERE, "..", "..", "tools", "backend-setup.sh")


def make_dsr_backend(namespace, vip):
    """A backend for L2 direct server return, set up as docs/quickstart.md says, by
    tools/backend-setup.sh: the VIP on its loopback, ARP for it ignored."""
    run("ip", "netns", "exec", namespace, "/bin/bash", BACKEND_SETUP, "l2dsr", vip)


def add_dsr_backend(servers, name, namespace, peer, bridge, address_cidr, mac, vip,
                    default_via=None):
    """A backend host on `bridge` set up for L2 DSR of `vip`, its HTTP server started."""
    add_host(namespace, peer, bridge, address_cidr, mac)
    make_dsr_backend(namespace, vip)
    if default_via:
        run("ip", "-n", namespace, "route", "add", "default", "via", default_via)
    servers.start(name, namespace)


class BackendServers:
    """backend_server.py in each backend's namespace, answering with the backend's name."""

    def __init__(self):
        self.servers = {}
        atexit.register(self.stop_all)

    def start(self, name, namespace, dual=False):
        self.servers[name] = subprocess.Popen(
            ["ip", "netns", "exec", namespace, "/usr/bin/python3",
             os.path.join(HERE, "backend_server.py"), name, str(HTTP_PORT)] +
            (["dual"] if dual else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while run("ip", "netns", "exec", namespace, "curl", "-s", "--max-time", "1",
                  "http://127.0.0.1:%d/healthz" % HTTP_PORT, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("%s's server did not start" % name)
            time.sleep(0.1)

    def stop(self, name):
        server = self.servers.pop(name)
        server.kill()
        server.wait(timeout=10)

    def stop_all(self):
        for name in list(self.servers):
            self.stop(name)


def curl(namespace, vip, path="/", local_port=None, max_time=10, extra=()):
    """A request from `namespace` (an IPv6 VIP too; `extra`: more curl options): (curl's status,
    body, the X-Backend header)."""
    host = "[%s]" % vip if ":" in vip else vip
    command = ["ip", "netns", "exec", namespace, "curl", "-sS", "--max-time", str(max_time),
               "-w", "\n--berth-headers--%{header_json}", *extra,
               "http://%s:%d%s" % (host, HTTP_PORT, path)]
    if local_port:
        command[5:5] = ["--local-port", str(local_port)]
    result = subprocess.run(command, capture_output=True, timeout=max_time + 10)
    if result.returncode != 0:
        return result.returncode, result.stderr, None
    body, _, headers = result.stdout.rpartition(b"\n--berth-headers--")
    backend = json.loads(headers).get("x-backend", [None])[0]
    return 0, body, backend


def berthd_on(config_text, directory, berthd, berthctl, file_prefix, netns=None):
    """A Berthd, not started, on `config_text` written to DIRECTORY/berth.yaml, with its
    control socket beside it."""
    config = os.path.join(directory, "berth.yaml")
    with open(config, "w") as out:
        out.write(config_text)
    return Berthd(berthd, berthctl, config, os.path.join(directory, "berth.sock"), file_prefix,
                  netns=netns)


class Berthd:
    """berthd as a process on `config`, its output kept in `lines`, and berthctl beside it."""

    def __init__(self, berthd, berthctl, config, control, file_prefix, netns=None):
        self.berthd, self.berthctl_path = berthd, berthctl
        self.config, self.control, self.file_prefix = config, control, file_prefix
        # berthd's default beside the control socket: berth.sock gives berth-ro.sock.
        self.read_only = control[:-len(".sock")] + "-ro.sock" if control.endswith(".sock") \
            else control + "-ro"
        self.netns = netns
        self.process = None
        self.reader = None
        self.lines = []
        atexit.register(self.stop)

    def start(self, timeout=30):
        self.lines = []
        command = [self.berthd, "--", "--config", self.config, "--control-socket", self.control]
        if self.netns:
            command = ["ip", "netns", "exec", self.netns] + command
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        lines, process = self.lines, self.process
        self.reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout
        # The datapath's "forwarding: N service(s), ..." line; a refused config's message may
        # quote a "forwarding:" field, and then berthd has exited, which the loop sees.
        started = re.compile(r"forwarding: \d+ service\(s\)")
        while not any(started.search(line) for line in list(self.lines)):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("berthd did not start:\n" + "".join(self.lines))
            time.sleep(0.05)

    def running(self):
        return self.process is not None and self.process.poll() is None

    def stop(self):
        if self.running():
            stop_process(self.process)
        self.release()

    def kill(self):
        """SIGKILL: no cleanup of its own, as when the process or its machine dies."""
        self.process.kill()
        self.process.wait(timeout=10)
        self.release()

    def release(self):
        if self.process is not None and self.process.poll() is not None:
            self.reader.join(timeout=10)  # the output ends with the process
            self.process.stdout.close()
        shutil.rmtree("/var/run/dpdk/" + self.file_prefix, ignore_errors=True)

    def berthctl(self, *command):
        """berthd's JSON reply; a refusal raises, with berthctl's message."""
        result = subprocess.run([self.berthctl_path] + list(command) +
                                ["--json", "--socket", self.control],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())
        return json.loads(result.stdout)

    def counters(self):
        return self.berthctl("stats")["stats"]["counters"]

    def health(self):
        return {b["name"]: b["health"] for b in self.berthctl("backends")["backends"]}

    def wait_healthy(self, backends, timeout=15):
        self.wait_health(backends, "healthy", timeout)

    def wait_health(self, backends, state, timeout=15):
        deadline = time.monotonic() + timeout
        while not all(self.health().get(b) == state for b in backends):
            if time.monotonic() > deadline:
                raise AssertionError("not all of %s %s: %s" % (backends, state, self.health()))
            time.sleep(0.1)
