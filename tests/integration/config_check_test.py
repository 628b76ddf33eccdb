#!/usr/bin/python3
"""The config mistakes an operator makes first, through `berthctl check` and berthd alike: both
name every error of a file in one pass, each with its line; both warn of a service that can
serve nothing; an EAL option berthd's command line adds is checked with the config's before the
EAL runs; when the EAL fails, berthd prints the arguments it was given and the likely cause
(no hugepages here, a file prefix another berthd holds);
a memif client whose server is not there is told so, and a PCI port that cannot be opened
is named with what the host says of the device.
`check --json` carries the same errors, warnings and what it did not check. berthd runs on
net_null without hugepages where it starts.

Usage: config_check_test.py BERTHD BERTHCTL
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
PREFIX = "berth-config-check-%d" % os.getpid()

EAL = ('["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1", '
       '"--vdev", "net_null0", "--log-level", "lib.eal:error"]' % PREFIX)
PORT = '{ name: wan, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }'

SEVERAL_ERRORS = """dataplane:
  eal: ["--in-memroy", "--no-pci"]
  ports:
    - { name: wan, device: eth0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcpx
    backends:
      - { name: a, address: 198.18.1.2, weight: -1 }
"""
SEVERAL_ERRORS_LINES = [
    ":2:8: dataplane.eal: '--in-memroy' is not an EAL option; did you mean '--in-memory'?",
    ":4:28: dataplane.ports[0].device: 'eth0' is neither a PCI address",
    ":9:15: services[0].protocol: must be tcp or udp, got 'tcpx'",
    ":11:49: services[0].backends[0].weight: must be an integer from 0 to",
]

SERVES_NOTHING = """dataplane:
  eal: %s
  ports: [ %s ]
services:
  - name: drained
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends: [ { name: a, address: 198.18.1.2, weight: 0 } ]
  - name: empty
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    backends: []
""" % (EAL, PORT)
SERVES_NOTHING_WARNINGS = [
    "services[0].backends: every backend of service 'drained' has weight 0 (drained)",
    "services[1].backends: service 'empty' has no backends",
]

MEMIF_CLIENT = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--log-level", "lib.eal:error"]
  ports: [ { name: wan, device: net_memif0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services: []
""" % PREFIX

IN_MEMORY = """dataplane:
  eal: ["--in-memory", "--no-pci", "--lcores", "0@0,1@1", "--vdev", "net_null0",
        "--log-level", "lib.eal:error"]
  ports: [ %s ]
services: []
""" % PORT


def hugepages_reserved():
    total = 0
    for size in os.listdir("/sys/kernel/mm/hugepages"):
        with open("/sys/kernel/mm/hugepages/%s/nr_hugepages" % size) as count:
            total += int(count.read())
    return total


class ConfigCheck(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="berth-config-check-")

    def tearDown(self):
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree("/var/run/dpdk/" + PREFIX, ignore_errors=True)

    def write(self, text):
        path = os.path.join(self.directory, "berth.yaml")
        with open(path, "w") as out:
            out.write(text)
        return path

    def check(self, path, *options):
        return subprocess.run([BERTHCTL, "check", "--config", path] + list(options),
                              capture_output=True, text=True, timeout=30)

    def berthd(self, path, eal=(), stop_after_start=False):
        """berthd on the file; with stop_after_start, stopped once it forwards."""
        command = [BERTHD] + list(eal) + ["--", "--config", path, "--control-socket",
                                          os.path.join(self.directory, "berth.sock"),
                                          "--drain-state", "off"]
        if not stop_after_start:
            return subprocess.run(command, capture_output=True, text=True, timeout=60)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "forwarding:" in line:
                process.send_signal(2)
        process.wait(timeout=30)
        process.stdout.close()
        return subprocess.CompletedProcess(command, process.returncode, "".join(lines), "")

    def test_every_error_of_a_file_in_one_pass(self):
        path = self.write(SEVERAL_ERRORS)
        check = self.check(path)
        berthd = self.berthd(path)
        self.assertEqual(check.returncode, 1)
        self.assertIn("%s: 4 error(s); berthd would refuse this file" % path, check.stderr)
        self.assertNotEqual(berthd.returncode, 0)
        for line in SEVERAL_ERRORS_LINES:
            self.assertIn(path + line, check.stderr)
            self.assertIn(path + line, berthd.stderr)
        reply = json.loads(self.check(path, "--json").stdout)
        self.assertFalse(reply["valid"])
        self.assertEqual(len(reply["errors"]), 4)
        for error, line in zip(reply["errors"], SEVERAL_ERRORS_LINES):
            self.assertTrue(error.startswith(path + line), error)

    def test_a_service_that_can_serve_nothing_is_warned_about_by_both(self):
        path = self.write(SERVES_NOTHING)
        check = self.check(path)
        self.assertEqual(check.returncode, 0, check.stderr)
        berthd = self.berthd(path, stop_after_start=True)
        self.assertEqual(berthd.returncode, 0, berthd.stdout)
        for warning in SERVES_NOTHING_WARNINGS:
            self.assertIn("warning: %s:" % path, check.stdout)
            self.assertIn(warning, check.stdout)
            self.assertIn(warning, berthd.stdout)
        reply = json.loads(self.check(path, "--json").stdout)
        self.assertTrue(reply["valid"])
        self.assertEqual(len(reply["warnings"]), 2)
        self.assertTrue(any(line.startswith("EAL: whether this host has the hugepages")
                            for line in reply["not_checked"]), reply["not_checked"])
        self.assertIn("not checked: backends: whether each is set up", check.stdout)

    def test_the_command_lines_eal_options_are_checked_with_the_configs(self):
        # --no-huge on berthd's command line against the config's --in-memory: named before the
        # EAL runs, with the merged arguments, instead of the EAL's usage text.
        path = self.write(IN_MEMORY)
        berthd = self.berthd(path, eal=["--no-huge", "-m", "256"])
        self.assertNotEqual(berthd.returncode, 0)
        self.assertIn("EAL arguments (berthd's command line, then dataplane.eal): --no-huge -m 256 "
                      "--in-memory --no-pci", berthd.stderr)
        self.assertIn("'--no-huge' and '--in-memory' together", berthd.stderr)
        self.assertNotIn("Usage:", berthd.stdout + berthd.stderr)
        typo = self.berthd(path, eal=["--in-memroy"])
        self.assertIn("did you mean '--in-memory'?", typo.stderr)

    def test_a_failed_eal_shows_its_arguments_and_the_likely_cause(self):
        path = self.write(IN_MEMORY)
        without_hugepages = hugepages_reserved() == 0
        berthd = self.berthd(path, stop_after_start=not without_hugepages)
        if without_hugepages:
            self.assertNotEqual(berthd.returncode, 0)
            self.assertIn("the EAL was given: --in-memory --no-pci --lcores 0@0,1@1",
                          berthd.stderr)
            self.assertIn("likely: no hugepages are reserved on this host", berthd.stderr)
        else:
            # A host with hugepages starts it; the advice is pinned by the unit tests.
            self.assertNotIn("likely:", berthd.stdout)

    def test_a_memif_client_without_its_server_says_what_it_needs(self):
        path = self.write(MEMIF_CLIENT)
        socket = os.path.join(self.directory, "no-server.sock")
        berthd = self.berthd(path, eal=["--vdev", "net_memif0,role=client,socket=%s,"
                                        "socket-abstract=no" % socket])
        self.assertNotEqual(berthd.returncode, 0)
        self.assertIn("rte_eth_dev_start failed: Operation not permitted; a memif client "
                      "connects to its server's socket when it starts: is the server running",
                      berthd.stderr)

    def test_a_file_prefix_another_berthd_holds_is_named(self):
        path = self.write(SERVES_NOTHING)
        first = subprocess.Popen(
            [BERTHD, "--", "--config", path, "--control-socket",
             os.path.join(self.directory, "first.sock"), "--drain-state", "off"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            for line in first.stdout:
                if "forwarding:" in line:
                    break
            second = self.berthd(path)
        finally:
            first.send_signal(2)
            first.communicate(timeout=30)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn("EAL: initialisation failed (the EAL's message is above)", second.stderr)
        self.assertIn("likely: another DPDK process holds the file prefix '%s'" % PREFIX,
                      second.stderr)

    def test_a_pci_port_that_cannot_be_opened_says_what_the_host_has(self):
        # No such device here; a bound one would be named with its kernel driver and the
        # dpdk-devbind.py line (the unit tests pin those answers).
        path = self.write(MEMIF_CLIENT.replace("device: net_memif0", 'device: "0000:3b:00.0"'))
        berthd = self.berthd(path)
        self.assertNotEqual(berthd.returncode, 0)
        self.assertIn("port 'wan' (0000:3b:00.0): attaching the device (rte_dev_probe) failed",
                      berthd.stderr)
        self.assertIn("no PCI device 0000:3b:00.0 on this host", berthd.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
