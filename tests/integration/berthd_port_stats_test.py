#!/usr/bin/python3
"""What the NIC reports of itself reaches `berthctl stats`, Prometheus and telemetry
(docs/nics.md):
  1. imissed: berthd polls an af_xdp port on a veth. While berthd is stopped (SIGSTOP holds its
     worker), 20,000 frames arrive; the socket's ring holds 2,048 and the kernel drops the rest,
     which af_xdp reports as imissed (from the socket's XDP_STATISTICS). Once berthd runs again, imissed is non-zero in the stats
     reply, in berth_port_imissed_total and under /berth/ports, with the link's gauges.
  2. rx_nombuf: berthd polls a net_tap port whose pool (mbufs: 528) barely covers its 512 RX
     descriptors, which the tap PMD keeps filled. A flood from the tap's kernel side leaves the
     PMD without mbufs to refill them: rx_nombuf counts.
  3. ports tell what they do not know: af_packet counts no drops, so `stats`, its JSON, Prometheus
     and telemetry say imissed is not reported instead of showing 0; neither it nor af_xdp
     reports the descriptors in use, which the start-up log says.
  4. af_xdp starts with the smallest descriptor counts the config takes (64): its pool covers
     the 2,048 mbufs the driver puts in its fill ring.
  5. a worker lcore on the management lcore's CPU is warned about; one on its own CPU is not.
DPDK 22.11's af_packet reads no drop count from the kernel (it never asks PACKET_STATISTICS), so
af_xdp stands in for it in 1. Needs root (veth, /dev/net/tun).

Usage: berthd_port_stats_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import interrupt_and_wait, scrape, wait_for_line  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
TAG = "%d" % (os.getpid() % 100000)
VETH, PEER, TAP = "bps%s" % TAG, "bpp%s" % TAG, "bpt%s" % TAG
FLOOD = 20000
# A frame berthd drops at once (no IP after the Ethernet header): only the port's counters count.
FRAME = bytes.fromhex("ffffffffffff0200000000010800") + bytes(46)

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "{lcores}",
        "--vdev", "{vdev}", "--log-level", "lib.eal:error"]
  ports:
    - {{ name: wan, device: {device}, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
        queues: 1, {port_settings} }}
metrics:
  listen: 127.0.0.1:{metrics_port}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends: [ {{ name: a, address: 198.18.1.2 }} ]
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def flood(interface, count):
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sender:
        sender.bind((interface, 0))
        for _ in range(count):
            try:
                sender.send(FRAME)
            except (BlockingIOError, OSError):
                pass


class Daemon:
    """berthd on one port, with its control socket, metrics endpoint and telemetry."""

    def __init__(self, name, vdev, device, port_settings, lcores="0@0,1@1"):
        self.prefix = "berth-port-stats-%s-%d" % (name, os.getpid())
        self.directory = tempfile.mkdtemp(prefix="berthd-port-stats-")
        self.metrics_port = free_port()
        config = os.path.join(self.directory, "berth.yaml")
        with open(config, "w") as out:
            out.write(CONFIG.format(prefix=self.prefix, vdev=vdev, device=device, lcores=lcores,
                                    port_settings=port_settings, metrics_port=self.metrics_port))
        self.control = os.path.join(self.directory, "berth.sock")
        self.process = subprocess.Popen(
            [BERTHD, "--", "--config", config, "--control-socket", self.control,
             "--drain-state", "off"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout),
                                       daemon=True)
        self.reader.start()
        wait_for_line(self.lines, self.process, "forwarding:")

    def stats(self):
        reply = subprocess.run([BERTHCTL, "stats", "--json", "--socket", self.control],
                               capture_output=True, text=True, timeout=30)
        assert reply.returncode == 0, reply.stderr
        return json.loads(reply.stdout)

    def port_total(self, name):
        return self.stats()["ports"][0]["totals"][name]

    def wait_for_total(self, name, timeout=20):
        """The port's total `name` once it is above 0: readings come once a second."""
        deadline = time.monotonic() + timeout
        while self.port_total(name) == 0:
            assert time.monotonic() < deadline, json.dumps(self.stats()["ports"])
            time.sleep(0.2)
        return self.port_total(name)

    def metrics(self):
        status, body = scrape("http://127.0.0.1:%d/metrics" % self.metrics_port)
        assert status == 200
        return body.decode()

    def telemetry(self, command):
        path = "/var/run/dpdk/%s/dpdk_telemetry.v2" % self.prefix
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as client:
            client.connect(path)
            client.recv(16384)  # the greeting
            client.send(command.encode())
            return json.loads(client.recv(1 << 20).decode())[command.split(",")[0]]

    def stop(self):
        returncode = interrupt_and_wait(self.process)
        self.reader.join(timeout=10)
        self.process.stdout.close()
        shutil.rmtree("/var/run/dpdk/" + self.prefix, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)
        return returncode, "".join(self.lines)


def metric(text, name, port="wan"):
    prefix = '%s{port="%s"} ' % (name, port)
    for line in text.splitlines():
        if line.startswith(prefix):
            return int(line[len(prefix):])
    raise AssertionError("no %s in the metrics" % prefix)


class Imissed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["ip", "link", "add", VETH, "type", "veth", "peer", "name", PEER],
                       check=True)
        cls.daemon = None
        try:
            for link in (VETH, PEER):
                subprocess.run(["ip", "link", "set", link, "up"], check=True)
            # 2,048 descriptors: with the default 1,024, DPDK 22.11's af_xdp counted none of
            # the same flood's drops (docs/nics.md).
            cls.daemon = Daemon("xdp", "net_af_xdp0,iface=%s" % VETH, "net_af_xdp0",
                                "rx_descriptors: 2048")
            os.kill(cls.daemon.process.pid, signal.SIGSTOP)
            try:
                flood(PEER, FLOOD)
            finally:
                os.kill(cls.daemon.process.pid, signal.SIGCONT)
            cls.imissed = cls.daemon.wait_for_total("imissed")
            cls.stats = cls.daemon.stats()
            cls.metrics = cls.daemon.metrics()
            cls.names = cls.daemon.telemetry("/berth/ports")
            cls.port = cls.daemon.telemetry("/berth/ports,wan")
            cls.unknown = cls.daemon.telemetry("/berth/ports,nope")
        finally:
            if cls.daemon is not None:
                cls.returncode, cls.log = cls.daemon.stop()
            subprocess.run(["ip", "link", "del", VETH], capture_output=True)

    def test_berthd_stops_cleanly(self):
        self.assertEqual(self.returncode, 0, self.log)

    def test_imissed_counts_what_the_kernel_dropped_while_berthd_was_held(self):
        port = self.stats["ports"][0]
        self.assertEqual(port["port"], "wan")
        self.assertEqual(port["driver"], "net_af_xdp")
        # The socket's ring took some of the flood; the kernel dropped the rest.
        self.assertGreater(self.imissed, FLOOD // 2, json.dumps(port))
        self.assertLessEqual(self.imissed + port["totals"]["ipackets"], FLOOD + 100)
        self.assertIn("xstats", port)
        self.assertEqual(port["xstats"].get("rx_missed_errors"), port["totals"]["imissed"])
        self.assertIn("imissed", self.stats["text"])

    def test_prometheus_shows_imissed_and_the_link(self):
        self.assertGreater(metric(self.metrics, "berth_port_imissed_total"), FLOOD // 2)
        self.assertEqual(metric(self.metrics, "berth_port_link_up"), 1)
        self.assertGreater(metric(self.metrics, "berth_port_link_speed_mbps"), 0)
        self.assertIn('berth_port_xstat_total{port="wan",name="rx_missed_errors"}', self.metrics)

    def test_telemetry_shows_the_same(self):
        self.assertEqual(self.names["ports"], ["wan"])
        self.assertGreater(self.port["imissed"], FLOOD // 2)
        self.assertEqual(self.port["driver"], "net_af_xdp")
        self.assertEqual(self.port["link_up"], 1)
        self.assertIn("imissed_per_s", self.port)
        self.assertIn("rx_missed_errors", self.port["xstat_names"])
        self.assertIn("no port named 'nope'", self.unknown)


class RxNombuf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/dev/net/tun"):
            raise unittest.SkipTest("no /dev/net/tun")
        cls.daemon = Daemon("tap", "net_tap0,iface=%s" % TAP, "net_tap0",
                            "rx_descriptors: 512, tx_descriptors: 512, mbufs: 528")
        try:
            flood(TAP, FLOOD)
            cls.rx_nombuf = cls.daemon.wait_for_total("rx_nombuf")
            cls.metrics = cls.daemon.metrics()
        finally:
            cls.returncode, cls.log = cls.daemon.stop()

    def test_a_small_pool_is_warned_about_and_rx_nombuf_counts(self):
        self.assertEqual(self.returncode, 0, self.log)
        self.assertIn("mbufs 528, below the", self.log)
        self.assertIn("528 mbufs", self.log)
        self.assertGreater(self.rx_nombuf, 0)
        self.assertGreater(metric(self.metrics, "berth_port_rx_nombuf_total"), 0)


class VethPair:
    """A veth pair, up, deleted on exit."""

    def __enter__(self):
        subprocess.run(["ip", "link", "add", VETH, "type", "veth", "peer", "name", PEER],
                       check=True)
        for link in (VETH, PEER):
            subprocess.run(["ip", "link", "set", link, "up"], check=True)
        return self

    def __exit__(self, *exception):
        subprocess.run(["ip", "link", "del", VETH], capture_output=True)


class PortsSayWhatTheyDoNotKnow(unittest.TestCase):
    def test_af_packet_reports_no_drops_and_stats_say_so(self):
        with VethPair():
            # The management lcore on the worker's CPU, which berthd warns about.
            daemon = Daemon("packet", "net_af_packet0,iface=%s" % VETH, "net_af_packet0",
                            "rx_descriptors: 64, tx_descriptors: 64", lcores="0@0,1@0")
            try:
                flood(PEER, 100)
                stats = daemon.stats()
                metrics = daemon.metrics()
                port = daemon.telemetry("/berth/ports,wan")
            finally:
                returncode, log = daemon.stop()
        self.assertEqual(returncode, 0, log)
        self.assertFalse(stats["ports"][0]["drops_reported"])
        self.assertRegex(stats["text"],
                         r"imissed +not reported: net_af_packet counts no frames it drops")
        self.assertNotIn('berth_port_imissed_total{port="wan"}', metrics)
        self.assertEqual(metric(metrics, "berth_port_drops_reported"), 0)
        self.assertEqual(port["drops_reported"], 0)
        self.assertIn("of 64 RX and 64 TX descriptors asked (net_af_packet does not report the "
                      "descriptors in use; its kernel ring holds framecnt frames", log)
        self.assertIn("warning: worker lcore 1 shares CPU 0 with the management lcore 0", log)

    def test_af_xdp_starts_with_64_descriptors_and_says_it_does_not_report_them(self):
        with VethPair():
            daemon = Daemon("xdp-small", "net_af_xdp0,iface=%s" % VETH, "net_af_xdp0",
                            "rx_descriptors: 64, tx_descriptors: 64")
            try:
                stats = daemon.stats()
                metrics = daemon.metrics()
            finally:
                returncode, log = daemon.stop()
        self.assertEqual(returncode, 0, log)
        self.assertIn("of 64 RX and 64 TX descriptors asked (net_af_xdp does not report the "
                      "descriptors in use)", log)
        self.assertTrue(stats["ports"][0]["drops_reported"])
        self.assertEqual(metric(metrics, "berth_port_drops_reported"), 1)
        self.assertNotIn("shares CPU", log)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("needs root (veth, /dev/net/tun)")
        sys.exit(77)
    unittest.main(verbosity=2)
