#!/usr/bin/python3
"""End to end: one DPDK port for everything. berthd runs in a namespace of its own whose only
link to the world is its af_packet port; its kernel interface (a tap berthd makes, holding the
port's MAC and 198.18.0.10/24) is how that namespace's kernel reaches the segment. Through it:
the health checks of the backends, an echo server on the port's address, ping. VIP traffic
(L2 DSR to two backends) flows beside it.

  client 198.18.0.1 --+
  berthd's port ------+- bridge -+- bk1, bk2 198.18.0.11-12, VIP on lo
  (namespace lb: tap bx<TAG> 198.18.0.10/24, echo server on :7000)

The cases: health checks bound to the tap (via: p0) make the backends healthy; ping of the port's
address; 1 MiB echoed over TCP byte for byte while requests to the VIP go on; a UDP flood to the
port's address is policed in its own class while ping answers and the backends stay healthy;
the tap is gone once berthd stops.
The same cases again with kind: virtio-user where /dev/vhost-net exists, skipped otherwise.
Everything the test made is removed at the end, on failure too. Needs root.

Usage: exception_path_test.py BERTHD BERTHCTL
"""
import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import e2e_support
from e2e_support import TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
LB = "berth-lb-" + TAG
CLIENT = "berth-cl-" + TAG
BACKENDS = ["bk1", "bk2"]
NAMESPACES = [LB, CLIENT] + ["berth-%s-%s" % (name, TAG) for name in BACKENDS]
BRIDGE = "bbr" + TAG
PORT = "blb" + TAG
TAP = "bx" + TAG
PORT_ADDRESS = "198.18.0.10"
VIP = "198.18.100.1"
ECHO_PORT = 7000
PREFIX = "berth-exc-" + TAG
OTHER_PER_SECOND = 500
INTERVAL, FALL = 0.5, 3  # e2e_support.l2dsr_service_lines' defaults

ECHO_SERVER = r"""
import socket, sys, threading
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", int(sys.argv[1])))
listener.listen(16)
def serve(connection):
    with connection:
        while True:
            data = connection.recv(65536)
            if not data:
                return
            connection.sendall(data)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
"""


def namespace_of(backend):
    return "berth-%s-%s" % (backend, TAG)


def backend_address(backend):
    return "198.18.0.%d" % (10 + int(backend[2:]))


def backend_mac(backend):
    return "02:b0:00:00:00:%02x" % int(backend[2:])


def config_text(kind):
    lines = ["dataplane:",
             '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
             '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
             '        "--vdev", "net_af_packet0,iface=%s"]' % PORT,
             "  ports:",
             "    - name: p0",
             "      device: net_af_packet0",
             "      ipv4: %s" % PORT_ADDRESS,
             "      exception: { kind: %s, name: %s, per_second: { other: %d } }" % (
                 kind, TAP, OTHER_PER_SECOND),
             "services:"] + [
                 # The probes are bound to the port's tap (SO_BINDTODEVICE).
                 line.replace(" }", ", via: p0 }") if "health:" in line else line
                 for line in e2e_support.l2dsr_service_lines("web", VIP, "arp")]
    for backend in BACKENDS:
        lines.append('      - { name: %s, address: %s, mac: "%s" }' % (
            backend, backend_address(backend), backend_mac(backend)))
    return "\n".join(lines) + "\n"


class Topology:
    def __init__(self):
        self.servers = e2e_support.BackendServers()
        self.echo = None
        atexit.register(self.remove)
        e2e_support.make_bridge(BRIDGE)
        run("ip", "netns", "add", LB)
        run("ip", "-n", LB, "link", "set", "lo", "up")
        e2e_support.make_af_packet_port(PORT, BRIDGE, netns=LB)
        e2e_support.add_host(CLIENT, "c" + TAG, BRIDGE, "198.18.0.1/24")
        run("ip", "-n", CLIENT, "route", "add", VIP + "/32", "dev", "e0")
        for backend in BACKENDS:
            e2e_support.add_dsr_backend(self.servers, backend, namespace_of(backend),
                                        backend + TAG, BRIDGE, backend_address(backend) + "/24",
                                        backend_mac(backend), VIP)
        self.echo = subprocess.Popen(
            ["ip", "netns", "exec", LB, "/usr/bin/python3", "-c", ECHO_SERVER, str(ECHO_PORT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def remove(self):
        self.servers.stop_all()
        if self.echo is not None:
            self.echo.kill()
            self.echo.wait(timeout=10)
            self.echo = None
        for namespace in NAMESPACES:
            run("ip", "netns", "del", namespace, check=False)
        run("ip", "link", "del", BRIDGE, check=False)


def in_client(*command, timeout=30):
    return run("ip", "netns", "exec", CLIENT, *command, check=False, timeout=timeout)


class ExceptionPath(unittest.TestCase):
    KIND = "tap"

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-")
        cls.instance = e2e_support.berthd_on(config_text(cls.KIND), cls.directory, BERTHD,
                                             BERTHCTL, PREFIX, netns=LB)
        cls.topology = Topology()
        cls.instance.start()

    @classmethod
    def tearDownClass(cls):
        cls.instance.stop()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def counters(self):
        return self.instance.counters()

    def test_1_health_checks_reach_the_backends_through_the_tap(self):
        # berthd's namespace has no other way to the backends: the probes, and the kernel's ARP
        # for them, go out through the DPDK port and their answers come back to the tap. berthd
        # starts with every backend healthy, so first the probes' traffic must have flowed, then
        # they must stay healthy for longer than `fall` failed probes would take.
        deadline = time.monotonic() + 20
        while True:
            counters = self.counters()
            if counters["to_kernel_health"] > 0 and counters["to_kernel_arp_nd"] > 0:
                break
            self.assertLess(time.monotonic(), deadline, counters)
            time.sleep(0.1)
        time.sleep(FALL * INTERVAL + 1)
        self.assertEqual(self.instance.health(), {b: "healthy" for b in BACKENDS})
        counters = self.counters()
        self.assertGreater(counters["to_kernel_arp_nd"], 0, counters)
        self.assertGreater(counters["to_kernel_health"], 0, "the probes' answers, in their class")
        self.assertGreater(counters["from_kernel"], 0)
        self.assertEqual(counters["drop_kernel_queue_full"], 0)
        self.assertEqual(self.instance.berthctl("status")["exception_interfaces"],
                         ["%s (%s) on p0" % (TAP, self.KIND)])
        shown = run("ip", "-n", LB, "-o", "addr", "show", "dev", TAP).stdout
        self.assertIn(PORT_ADDRESS + "/24", shown)
        mac = run("ip", "-n", LB, "-o", "link", "show", "dev", TAP).stdout
        port_mac = run("ip", "-n", LB, "-o", "link", "show", "dev", PORT).stdout
        self.assertEqual(mac.split("link/ether ")[1].split()[0],
                         port_mac.split("link/ether ")[1].split()[0], "the tap has the port's MAC")

    def test_2_ping_of_the_port_address_is_answered_by_the_kernel(self):
        before = self.counters()["to_kernel_icmp"]
        result = in_client("ping", "-c", "3", "-i", "0.2", "-W", "2", PORT_ADDRESS)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertGreaterEqual(self.counters()["to_kernel_icmp"] - before, 3)

    def test_3_tcp_to_the_port_address_beside_vip_traffic(self):
        self.instance.wait_healthy(BACKENDS, timeout=20)
        failures = []
        stop = threading.Event()

        def requests():
            while not stop.is_set():
                status, body, _ = e2e_support.curl(CLIENT, VIP, max_time=5)
                if status != 0:
                    failures.append(body)

        loop = threading.Thread(target=requests)
        loop.start()
        try:
            data = os.urandom(1 << 20)
            # The client reads the echo while it sends. Reading only after sending all of it
            # deadlocked now and then: the echo server blocks on a full send buffer once the
            # client's receive buffer is full, stops reading, and the client's send stalls; the
            # buffers between them, small on this path whose class is policed to 500 frames a
            # second, held less than 1 MiB (sendall timed out after 20 s in one CI run).
            script = ("import socket,sys,threading\n"
                      "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=20)\n"
                      "data=sys.stdin.buffer.read()\n"
                      "got=[]\n"
                      "def read():\n"
                      "  while True:\n"
                      "    chunk=s.recv(65536)\n"
                      "    if not chunk: break\n"
                      "    got.append(chunk)\n"
                      "reader=threading.Thread(target=read)\n"
                      "reader.start()\n"
                      "s.sendall(data);s.shutdown(socket.SHUT_WR)\n"
                      "reader.join()\n"
                      "sys.stdout.buffer.write(b''.join(got))\n")
            started = time.monotonic()
            before = self.counters()
            echoed = subprocess.run(
                ["ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c", script, PORT_ADDRESS,
                 str(ECHO_PORT)], input=data, capture_output=True, timeout=60)
            took = time.monotonic() - started
            # A stalled echo says where its frames went: the exception path's counters that
            # moved meanwhile (policed, queue full, passed), and the client's TCP view.
            moved = {name: value - before.get(name, 0)
                     for name, value in self.counters().items()
                     if ("kernel" in name or "exception" in name) and value != before.get(name, 0)}
            self.assertEqual(echoed.returncode, 0, "%s\nexception path counters that moved: %s\n"
                             "client: %s" % (echoed.stderr, moved,
                                             in_client("nstat", "-az", "TcpRetransSegs",
                                                       "TcpExtTCPTimeouts").stdout))
            self.assertEqual(len(echoed.stdout), len(data))
            self.assertEqual(hashlib.sha256(echoed.stdout).hexdigest(),
                             hashlib.sha256(data).hexdigest(), "echoed byte for byte")
            print("\n  1 MiB echoed through the tap in %.2f s (%.1f Mbit/s each way), beside "
                  "requests to the VIP" % (took, 8 * len(data) / took / 1e6), file=sys.stderr)
        finally:
            stop.set()
            loop.join(timeout=30)
        self.assertEqual(failures, [], "every request to the VIP answered meanwhile")

    def test_4_a_flood_to_the_port_address_is_policed_in_its_own_class(self):
        before = self.counters()
        flood = ("import socket,sys,time\n"
                 "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                 "end=time.monotonic()+float(sys.argv[2])\n"
                 "sent=0\n"
                 "while time.monotonic()<end:\n"
                 "  for _ in range(100):\n"
                 "    s.sendto(b'x'*32,(sys.argv[1],9))\n"
                 "  sent+=100\n"
                 "print(sent)\n")
        flooder = subprocess.Popen(
            ["ip", "netns", "exec", CLIENT, "/usr/bin/python3", "-c", flood, PORT_ADDRESS, "3"],
            stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.5)
            ping = in_client("ping", "-c", "5", "-i", "0.2", "-W", "2", PORT_ADDRESS)
        finally:
            sent = int(flooder.communicate(timeout=30)[0])
        after = self.counters()
        policed = after["kernel_other_policed"] - before["kernel_other_policed"]
        passed = after["kernel_other_passed"] - before["kernel_other_passed"]
        print("\n  flood: %d datagrams sent in 3 s, %d policed, %d passed to the kernel" % (
            sent, policed, passed), file=sys.stderr)
        self.assertGreater(policed, 0, after)
        # The class's rate over the flood's 3 s, its burst, and the probes' own TCP.
        self.assertLess(passed, OTHER_PER_SECOND * 4 + 200)
        self.assertEqual(ping.returncode, 0, "ICMP has its own class: " + ping.stdout)
        self.assertGreater(after["kernel_health_passed"], before["kernel_health_passed"])
        self.assertEqual(self.instance.health(), {b: "healthy" for b in BACKENDS},
                         "the probes' answers have their own class too")

    def test_5_the_tap_goes_when_berthd_stops(self):
        self.instance.stop()
        result = run("ip", "-n", LB, "link", "show", "dev", TAP, check=False)
        self.assertNotEqual(result.returncode, 0, "still there: " + result.stdout)


class ExceptionPathVirtioUser(ExceptionPath):
    """The same cases with kind: virtio-user, where the kernel has vhost-net."""
    KIND = "virtio-user"

    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/dev/vhost-net"):
            raise unittest.SkipTest("virtio-user needs /dev/vhost-net (modprobe vhost_net), "
                                    "which this machine's kernel does not have")
        super().setUpClass()


if __name__ == "__main__":
    e2e_support.main()
