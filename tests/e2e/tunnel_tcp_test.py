#!/usr/bin/python3
"""End to end with real kernel TCP through berthd's tunnel modes: ipip, gre and gue, one service
each, in front of two backend namespaces set up by tools/backend-setup.sh as docs/quickstart.md
shows. This kernel has no ipip, ip_gre or fou module, so the backends decapsulate with
tools/userspace_decap.py (--decap userspace); the script's other steps (the VIPs on lo, the ARP
and reverse-path sysctls) run for real, and a kernel-mode set-up on such a kernel must name the
missing module.

  client 198.18.0.1 (the gateway berthd sends the tunnels to; it routes them on) --+
  berthd 198.18.0.10 ----------------------------------------------------------------+- bridge
  bk1, bk2 198.18.0.11-12: the three VIPs on lo, decapsulators for ipip, gre, gue ----+
  (the host 198.18.0.254 probes the backends' own addresses)

Per mode: requests over many source ports reach both backends, each from the backend the
table picked for it, and a 5 MB download arrives byte for byte. Needs root.

Usage: tunnel_tcp_test.py BERTHD BERTHCTL
"""
import atexit
import hashlib
import os
import shutil
import sys
import tempfile
import unittest

import e2e_support
from e2e_support import BIG_SHA256, HTTP_PORT, TAG, run

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
CLIENT = "berth-tc-" + TAG
BACKENDS = ["bk1", "bk2"]
BRIDGE = "btb" + TAG
PORT = "btl" + TAG
PREFIX = "berth-e2e-tunnel-" + TAG
GUE_PORT = 6080
VIPS = {"ipip": "198.18.100.1", "gre": "198.18.100.2", "gue": "198.18.100.3"}


def namespace_of(backend):
    return "berth-t%s-%s" % (backend, TAG)


def backend_address(backend):
    return "198.18.0.%d" % (10 + int(backend[2:]))


def config_text():
    lines = ["dataplane:",
             '  eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "%s",' % PREFIX,
             '        "--lcores", "%s", "--log-level", "lib.eal:error",' % e2e_support.LCORES,
             '        "--vdev", "net_af_packet0,iface=%s"]' % PORT,
             "  ports:",
             "    - { name: p0, device: net_af_packet0, ipv4: 198.18.0.10, gateway: 198.18.0.1 }",
             "services:"]
    for mode, vip in VIPS.items():
        lines += ["  - name: %s" % mode,
                  "    vip: %s" % vip,
                  "    port: %d" % HTTP_PORT,
                  "    protocol: tcp",
                  "    forwarding: %s" % mode]
        if mode == "gue":
            lines.append("    gue_port: %d" % GUE_PORT)
        lines += ["    announce: arp",
                  "    health: { type: http, path: /healthz, interval: 0.5, timeout: 0.4, "
                  "rise: 2, fall: 3 }",
                  "    backends:"]
        for backend in BACKENDS:
            lines.append("      - { name: %s, address: %s }" % (backend, backend_address(backend)))
    return "\n".join(lines) + "\n"


def backend_setup(namespace, *arguments, check=True):
    return run("ip", "netns", "exec", namespace, "/bin/bash", e2e_support.BACKEND_SETUP,
               *arguments, check=check)


class Topology:
    """The namespaces, veths and bridge, made once and removed by name at exit."""

    def __init__(self):
        self.servers = e2e_support.BackendServers()
        self.namespaces = [CLIENT]
        atexit.register(self.remove)
        e2e_support.make_bridge(BRIDGE, "198.18.0.254/24")
        e2e_support.make_af_packet_port(PORT, BRIDGE)
        e2e_support.add_host(CLIENT, "c" + TAG, BRIDGE, "198.18.0.1/24")
        # The client is also the router berthd sends the tunnels through, back onto the bridge.
        for key in ("ip_forward=1", "conf.all.send_redirects=0", "conf.e0.send_redirects=0"):
            run("ip", "netns", "exec", CLIENT, "sysctl", "-qw", "net.ipv4." + key)
        for vip in VIPS.values():
            run("ip", "-n", CLIENT, "route", "add", vip + "/32", "dev", "e0")
        for backend in BACKENDS:
            namespace = namespace_of(backend)
            self.namespaces.append(namespace)
            e2e_support.add_host(namespace, "t" + backend + TAG, BRIDGE,
                                 backend_address(backend) + "/24")
            for mode, vip in VIPS.items():
                backend_setup(namespace, mode, vip, "--gue-port", str(GUE_PORT), "--decap",
                              "userspace")
            self.servers.start(backend, namespace)

    def remove(self):
        self.servers.stop_all()
        for namespace in self.namespaces:
            # The decapsulators live in their namespace's processes; end them with it.
            pids = run("ip", "netns", "pids", namespace, check=False).stdout.split()
            for pid in pids:
                run("kill", pid, check=False)
            run("ip", "netns", "del", namespace, check=False)
        self.namespaces = []
        for link in (PORT, BRIDGE):
            run("ip", "link", "del", link, check=False)


class TunnelTcp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-e2e-tunnel-")
        cls.topology = Topology()
        cls.instance = e2e_support.berthd_on(config_text(), cls.directory, BERTHD, BERTHCTL,
                                             PREFIX)
        cls.instance.start()
        cls.instance.wait_healthy(BACKENDS)

    @classmethod
    def tearDownClass(cls):
        cls.instance.stop()
        cls.topology.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def check_mode(self, mode):
        vip = VIPS[mode]
        seen = set()
        for local_port in range(42000, 42040):
            status, body, backend = e2e_support.curl(CLIENT, vip, "/", local_port)
            self.assertEqual(status, 0, body)
            self.assertEqual(body.decode().strip(), backend)
            explained = self.instance.berthctl(
                "explain", "--src", "198.18.0.1:%d" % local_port,
                "--dst", "%s:%d" % (vip, HTTP_PORT))
            self.assertEqual(explained["table_backend"], backend)
            seen.add(backend)
        self.assertEqual(seen, set(BACKENDS), "both backends serve %s" % mode)
        status, body, _ = e2e_support.curl(CLIENT, vip, "/big", max_time=30)
        self.assertEqual(status, 0, body)
        self.assertEqual(hashlib.sha256(body).hexdigest(), BIG_SHA256)

    def test_ipip(self):
        self.check_mode("ipip")

    def test_gre(self):
        self.check_mode("gre")

    def test_gue(self):
        self.check_mode("gue")

    def test_a_kernel_set_up_names_a_missing_module(self):
        namespace = "berth-tm-" + TAG
        run("ip", "netns", "add", namespace)
        self.topology.namespaces.append(namespace)
        result = backend_setup(namespace, "ipip", "198.18.100.9", check=False)
        if os.path.exists("/sys/module/ipip"):
            self.assertEqual(result.returncode, 0, result.stderr)
        elif shutil.which("modprobe"):
            self.assertEqual(result.returncode, 1)
            self.assertIn("this kernel has no ipip module", result.stderr)
            self.assertIn("--decap userspace", result.stderr)
        else:
            self.assertEqual(result.returncode, 1)
            self.assertIn("ipip is not loaded and there is no modprobe to load it",
                          result.stderr)
        # Its other steps ran all the same: the VIP is on lo.
        self.assertIn("198.18.100.9/32", run("ip", "-n", namespace, "addr", "show", "lo").stdout)


if __name__ == "__main__":
    e2e_support.main()
