#!/usr/bin/env python3
"""berthctl's offline commands, run as an operator would: argv in, text or JSON out.

Usage: berthctl_test.py BERTHCTL SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BERTHCTL = sys.argv.pop(1)
SOURCE_ROOT = sys.argv.pop(1)
DEMO = os.path.join(SOURCE_ROOT, "config", "demo.yaml")


def berthctl(*args, check=True):
    result = subprocess.run([BERTHCTL, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"berthctl {' '.join(args)} failed: {result.stderr}")
    return result


class TableCommand(unittest.TestCase):
    def test_json_table_covers_every_slot_with_counts_that_add_up(self):
        table = json.loads(berthctl("table", "--config", DEMO, "--service", "web", "--json").stdout)
        self.assertEqual(table["table_size"], 65537)
        self.assertEqual(len(table["entries"]), 65537)
        counts = [0] * len(table["backends"])
        for entry in table["entries"]:
            counts[entry] += 1
        self.assertEqual(counts, [b["slots"] for b in table["backends"]])
        self.assertEqual(sorted(b["name"] for b in table["backends"]),
                         [b["name"] for b in table["backends"]])

    def test_json_table_names_the_listener_mode_and_backend_addresses(self):
        table = json.loads(berthctl("table", "--config", DEMO, "--service", "dns", "--json").stdout)
        self.assertEqual((table["listener"], table["forwarding"], table["hash_fields"]),
                         ("udp 198.18.100.2:53", "gue", "3-tuple"))
        self.assertEqual([(b["name"], b["address"]) for b in table["backends"]],
                         [("dns-1", "198.18.1.3"), ("dns-2", "198.18.2.3"), ("dns-3", "198.18.3.3")])

    def test_failed_backend_owns_no_slot_and_others_keep_theirs(self):
        full = json.loads(berthctl("table", "--config", DEMO, "--service", "web", "--json").stdout)
        failed = json.loads(berthctl("table", "--config", DEMO, "--service", "web", "--json",
                                     "--fail", "web-3").stdout)
        index = [b["name"] for b in full["backends"]].index("web-3")
        self.assertFalse(failed["backends"][index]["healthy"])
        self.assertEqual(failed["backends"][index]["slots"], 0)
        for before, after in zip(full["entries"], failed["entries"]):
            if before != index:
                self.assertEqual(before, after)

    def test_text_table_lists_one_line_per_slot(self):
        lines = berthctl("table", "--config", DEMO, "--service", "dns").stdout.splitlines()
        start = lines.index("slot backend")
        self.assertEqual(len(lines) - start - 1, 65537)
        self.assertTrue(lines[start + 1].startswith("0 dns-"))

    def test_unknown_service_names_the_ones_that_exist(self):
        result = berthctl("table", "--config", DEMO, "--service", "nope", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no service named 'nope'; the config has: web, dns", result.stderr)


class AnalyzeCommand(unittest.TestCase):
    def test_single_failures_move_only_the_failed_share(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual(web["backends"], 8)
        self.assertLessEqual(web["balance"]["max_over_ideal"], 1.001)
        self.assertEqual(len(web["single_failures"]), 8)
        for failure in web["single_failures"]:
            self.assertAlmostEqual(failure["failover_share"], failure["ideal_share"], places=9)
            self.assertGreater(failure["rebuild_share"], failure["ideal_share"])

    def test_fail_option_reports_the_failure_set(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json",
                                     "--fail", "web-2,web-5").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual(web["with_failures"]["unhealthy"], ["web-2", "web-5"])
        self.assertAlmostEqual(web["with_failures"]["failover_share"],
                               web["with_failures"]["ideal_share"], places=9)
        self.assertLessEqual(web["with_failures"]["failover_balance"]["max_over_ideal"], 1.03)
        dns = next(s for s in report["services"] if s["name"] == "dns")
        self.assertNotIn("with_failures", dns)

    def test_max_failures_samples_evenly_and_says_so(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json",
                                     "--max_failures", "3").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual([f["backend"] for f in web["single_failures"]],
                         ["web-1", "web-3", "web-6"])
        out = berthctl("analyze", "--config", DEMO, "--max_failures", "3").stdout
        self.assertIn("one backend fails (3 of 8, evenly spaced; --max_failures=0 for all)", out)
        self.assertIn("--max_failures must be 0 or more",
                      berthctl("analyze", "--config", DEMO, "--max_failures=-1", check=False).stderr)

    def test_text_report_names_each_service_and_its_figures(self):
        out = berthctl("analyze", "--config", DEMO).stdout
        self.assertIn("service web (tcp 198.18.100.1:80, hash 5-tuple): M=65537, N=8", out)
        self.assertIn("min-disruption failover: mean 1.00, worst 1.00", out)

    def test_unknown_fail_name_is_an_error(self):
        result = berthctl("analyze", "--config", DEMO, "--fail", "web-99", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("--fail: no backend named 'web-99'", result.stderr)


class BadInput(unittest.TestCase):
    def test_bad_config_names_file_line_and_field(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
            config.write("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n"
                         "    protocol: tcp\n    table_size: 1000\n    backends: []\n")
        try:
            result = berthctl("analyze", "--config", config.name, check=False)
        finally:
            os.unlink(config.name)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{config.name}:6:17: services[0].table_size: 1000 is not prime", result.stderr)

    def test_missing_config_and_unknown_command_are_errors(self):
        self.assertIn("cannot read config file",
                      berthctl("analyze", "--config", "/nonexistent.yaml", check=False).stderr)
        self.assertIn("unknown command 'frobnicate'", berthctl("frobnicate", check=False).stderr)
        self.assertIn("--config FILE is required", berthctl("analyze", check=False).stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
