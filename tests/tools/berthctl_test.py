#!/usr/bin/env python3
"""berthctl's offline commands, run as an operator would: argv in, text or JSON out.

Usage: berthctl_test.py BERTHCTL SOURCE_ROOT
"""
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

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


class AnalyzeProgress(unittest.TestCase):
    """analyze's progress line: on a terminal (a pty here), erased before the report; never
    into a pipe or a file."""

    def test_progress_shows_on_a_terminal_only(self):
        import pty
        environment = dict(os.environ, BERTHCTL_PROGRESS_AFTER_MS="0")
        command = [BERTHCTL, "analyze", "--config", DEMO, "--service", "web", "--max-failures", "0"]
        leader, follower = pty.openpty()
        try:
            process = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower,
                                     env=environment, timeout=120)
            os.close(follower)
            follower = None
            seen = b""
            while True:
                try:
                    piece = os.read(leader, 65536)
                except OSError:
                    break
                if not piece:
                    break
                seen += piece
        finally:
            if follower is not None:
                os.close(follower)
            os.close(leader)
        self.assertEqual(process.returncode, 0)
        self.assertIn(b"analyze: service web: single failures: ", seen)
        self.assertTrue(seen.endswith(b"\r\x1b[K"), "the line is erased at the end")
        self.assertIn(b"min-disruption failover", process.stdout)
        piped = subprocess.run(command, capture_output=True, env=environment, timeout=120)
        self.assertEqual(piped.stderr, b"")


class TableSummary(unittest.TestCase):
    def test_summary_leaves_out_the_slots(self):
        full = berthctl("table", "--config", DEMO, "--service", "web").stdout
        summary = berthctl("table", "--config", DEMO, "--service", "web", "--summary").stdout
        self.assertGreater(len(full.splitlines()), 1000)
        self.assertEqual(len(summary.splitlines()), 2 + 1 + 8, summary)
        self.assertIn("8 serving; slots per backend min", summary)
        self.assertNotIn("slot backend", summary)
        table = json.loads(berthctl("table", "--config", DEMO, "--service", "web", "--summary",
                                    "--json").stdout)
        self.assertTrue(table["summary"])
        self.assertNotIn("entries", table)


class AnalyzeCommand(unittest.TestCase):
    def test_single_failures_move_only_the_failed_share(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual(web["backends"], 8)
        self.assertLessEqual(web["balance"]["max_over_ideal"], 1.001)
        self.assertEqual(len(web["single_failures"]), 8)
        for failure in web["single_failures"]:
            self.assertAlmostEqual(failure["failover_share"], failure["owned_share"], places=9)
            self.assertGreater(failure["rebuild_share"], failure["owned_share"])
            # The ideal is the weight's share, not what the backend happens to own.
            self.assertEqual(failure["ideal_share"], 1 / 8)

    def test_fail_option_reports_the_failure_set(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json",
                                     "--fail", "web-2,web-5").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual(web["with_failures"]["unhealthy"], ["web-2", "web-5"])
        self.assertAlmostEqual(web["with_failures"]["failover_share"],
                               web["with_failures"]["owned_share"], places=9)
        self.assertLessEqual(web["with_failures"]["failover_balance"]["max_over_ideal"], 1.03)
        dns = next(s for s in report["services"] if s["name"] == "dns")
        self.assertNotIn("with_failures", dns)

    def test_max_failures_samples_evenly_and_says_so(self):
        report = json.loads(berthctl("analyze", "--config", DEMO, "--json",
                                     "--max-failures", "3").stdout)
        web = next(s for s in report["services"] if s["name"] == "web")
        self.assertEqual([f["backend"] for f in web["single_failures"]],
                         ["web-1", "web-3", "web-6"])
        out = berthctl("analyze", "--config", DEMO, "--max-failures", "3").stdout
        self.assertIn("one backend fails (3 of 8, evenly spaced; --max-failures=0 for all)", out)
        self.assertIn("--max-failures must be 0 or more",
                      berthctl("analyze", "--config", DEMO, "--max-failures=-1", check=False).stderr)

    def test_text_report_names_each_service_and_its_figures(self):
        out = berthctl("analyze", "--config", DEMO).stdout
        self.assertIn("service web (tcp 198.18.100.1:80, hash 5-tuple): maglev, M=65537, N=8", out)
        self.assertIn("min-disruption failover: mean 1.00, worst 1.00", out)

    def test_unknown_fail_name_is_an_error(self):
        result = berthctl("analyze", "--config", DEMO, "--fail", "web-99", check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("--fail: no backend named 'web-99'", result.stderr)


def pool(count, weights=None, table_size=65537):
    """A service of `count` backends of weight 1, with `weights` ({index: weight}) changed."""
    text = ("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: tcp\n"
            "    table_size: %d\n    backends:\n" % table_size)
    for i in range(count):
        text += "      - { name: web-%04d, address: 198.18.%d.%d, weight: %d }\n" % (
            i, 1 + i // 250, 1 + i % 250, (weights or {}).get(i, 1))
    return text


class ChangeAnalysis(unittest.TestCase):
    """analyze --config NEW --against OLD: what a reload would move, as berthd would log it."""

    def analyze(self, new, old, *extra):
        paths = []
        for text in (new, old):
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
                config.write(text)
            paths.append(config.name)
        try:
            return berthctl("analyze", "--config", paths[0], "--against", paths[1], *extra).stdout
        finally:
            for path in paths:
                os.unlink(path)

    def test_a_drain_by_weight_zero_moves_exactly_the_backends_slots(self):
        base = pool(1000)
        report = json.loads(self.analyze(pool(1000, {500: 0}), base, "--json"))
        web = report["services"][0]
        self.assertEqual((web["service"], web["change"], web["table_size"]), ("web", "drain", 65537))
        self.assertEqual(web["moved_slots"], round(web["minimum_slots"]))
        self.assertIn("(1.01x): drain", self.analyze(pool(1000, {500: 0}), base))

    def test_added_weight_and_resized_tables_name_their_cause(self):
        base = pool(100)
        self.assertRegex(self.analyze(pool(101), base),
                         r"^service web: moved \d+ of 65537 slots \([\d.]+%\), least 649 "
                         r"\([\d.]+x\): added\n$")
        self.assertRegex(self.analyze(pool(100, {3: 2}), base), r": weight\n$")
        self.assertRegex(self.analyze(pool(100, table_size=65539), base),
                         r"^service web: M 65537 -> 65539: moved [\d.]+% of the hash space, "
                         r"least 0.00% \(none had to\): reload\n$")
        self.assertEqual(self.analyze(base, base), "service web: the table stays as it is\n")


def ipv4_tcp_frame(source, destination, sport, dport):
    """An Ethernet/IPv4/TCP SYN, checksummed, built by hand (this test runs without scapy)."""
    def checksum(data):
        total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        return ~total & 0xFFFF
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                         socket.inet_aton(source), socket.inet_aton(destination))
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00" + header + tcp


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # Ethernet
        for frame in frames:
            out.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)


class PcapAnalysis(unittest.TestCase):
    """analyze --pcap: a capture's flows hashed as berthd hashes them, and chi-squared tests."""

    def analyze(self, config_text, frames, *extra):
        with tempfile.TemporaryDirectory() as directory:
            config = os.path.join(directory, "berth.yaml")
            capture = os.path.join(directory, "capture.pcap")
            with open(config, "w") as out:
                out.write(config_text)
            write_pcap(capture, frames)
            return berthctl("analyze", "--config", config, "--pcap", capture, *extra).stdout

    def test_random_clients_spread_as_the_weights_ask(self):
        generator = random.Random(7)
        frames = []
        for _ in range(20000):
            client = "198.18.%d.%d" % (32 + generator.randrange(64), 1 + generator.randrange(254))
            sport = 1024 + generator.randrange(64000)
            frame = ipv4_tcp_frame(client, "198.18.100.1", sport, 80)
            frames += [frame] * (1 + generator.randrange(3))
        frames += [ipv4_tcp_frame("198.18.40.1", "198.18.100.1", 1000, 81)] * 5  # no service
        report = json.loads(self.analyze(pool(8), frames, "--json"))
        self.assertEqual((report["frames"], report["skipped"]), (len(frames), 5))
        web = report["services"][0]
        self.assertEqual(web["flows"], 20000)
        self.assertEqual(web["packets"], len(frames) - 5)
        self.assertEqual(sum(b["flows"] for b in web["backends"]), 20000)
        for backend in web["backends"]:
            self.assertAlmostEqual(backend["flow_share"], 1 / 8, delta=0.02)
        self.assertGreater(web["flows_over_backends"]["p_value"], 0.001)
        self.assertEqual(web["flows_over_backends"]["degrees_of_freedom"], 7)
        self.assertGreater(web["hashes_over_bins"]["p_value"], 0.001)
        self.assertEqual(web["hashes_over_bins"]["degrees_of_freedom"], 1023)
        self.assertTrue(web["bins_test_has_enough_flows"])
        self.assertFalse(web["bounded_load_modelled"])
        bounded = pool(8).replace("    backends:", "    bounded_load: 1.25\n    backends:")
        self.assertIn("bounded_load 1.25 is not modelled", self.analyze(bounded, frames[:100]))
        text = self.analyze(pool(8), frames)
        self.assertIn("flows over backends against weights: chi-squared", text)

    def test_a_few_heavy_clients_under_source_hashing_show_as_a_tiny_p(self):
        config = pool(8).replace("    backends:", "    hash_fields: source\n    backends:")
        frames = [ipv4_tcp_frame("198.18.40.%d" % (1 + i % 3), "198.18.100.1", 2000 + i, 80)
                  for i in range(3000)]
        web = json.loads(self.analyze(config, frames, "--json"))["services"][0]
        self.assertEqual(web["hash_fields"], "source")
        self.assertLess(web["flows_over_backends"]["p_value"], 1e-9)
        self.assertLessEqual(sum(1 for b in web["backends"] if b["flows"] > 0), 3)
        self.assertFalse(web["bins_test_has_enough_flows"])

    def test_a_capture_that_is_not_one_is_named(self):
        with tempfile.NamedTemporaryFile("w", suffix=".pcap", delete=False) as bad:
            bad.write("not a capture")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
            config.write(pool(2))
        try:
            result = berthctl("analyze", "--config", config.name, "--pcap", bad.name, check=False)
        finally:
            os.unlink(bad.name)
            os.unlink(config.name)
        self.assertEqual(result.returncode, 1)
        self.assertIn("--pcap: ", result.stderr)


# Two backends on seven slots: small enough to count by hand.
SMALL = """services:
  - name: tiny
    vip: 198.18.100.9
    port: 80
    protocol: tcp
    table_size: 7
    algorithm: ring
    replicas: 3
    backends:
      - { name: a, address: 198.18.1.2 }
      - { name: b, address: 198.18.2.2 }
"""

MASK64 = (1 << 64) - 1


def mix64(x):
    """SplitMix64's finalizer, written out again from its published constants."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def jump(key, buckets):
    """Lamping and Veach's jump consistent hash, from the paper's listing."""
    bucket, next_bucket = -1, 0
    while next_bucket < buckets:
        bucket = next_bucket
        key = (key * 2862933555777941757 + 1) & MASK64
        next_bucket = int((bucket + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return bucket


class AlgorithmComparison(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
            config.write(SMALL)
        cls.small = config.name

    @classmethod
    def tearDownClass(cls):
        os.unlink(cls.small)

    def compare(self, config, algorithms, *extra):
        out = berthctl("analyze", "--config", config, "--algorithms", algorithms, "--json",
                       "--no-timing", *extra).stdout
        return json.loads(out)

    def test_modulo_on_seven_slots_matches_the_hand_count(self):
        # Slots 0 2 4 6 go to a, 1 3 5 to b; the ideal is 3.5 each. With c joining it is
        # s mod 3, which changes slots 2, 3, 4 and 5: 4 moved where c's share is 7/3.
        service = self.compare(self.small, "modulo")["services"][0]
        self.assertEqual((service["name"], service["configured_algorithm"], service["backends"]),
                         ("tiny", "ring", 2))
        modulo = service["algorithms"][0]
        self.assertEqual(modulo["algorithm"], "modulo")
        self.assertFalse(modulo["in_datapath"])
        self.assertIsNone(modulo["table_lookup_ns"])
        self.assertAlmostEqual(modulo["max_over_ideal"], 4 / 3.5, places=12)
        self.assertAlmostEqual(modulo["min_over_ideal"], 3 / 3.5, places=12)
        self.assertAlmostEqual(modulo["coefficient_of_variation"], 1 / 7, places=12)
        self.assertAlmostEqual(modulo["weighted_error"], 1 / 14, places=12)
        self.assertAlmostEqual(modulo["add_one"], 12 / 7, places=12)
        self.assertEqual(modulo["remove_one"], {"mean": 1.0, "worst": 1.0, "cases": 2})
        self.assertEqual(modulo["table_bytes"], 14)
        self.assertEqual(modulo["build_ms"], 0)

    def test_jump_matches_an_independent_implementation(self):
        jump_result = self.compare(self.small, "jump")["services"][0]["algorithms"][0]
        owners = [jump(mix64(slot), 2) for slot in range(7)]
        counts = [owners.count(0), owners.count(1)]
        self.assertEqual([round(r * 3.5) for r in jump_result["slots_over_ideal"]], counts)
        self.assertAlmostEqual(jump_result["max_over_ideal"], max(counts) / 3.5, places=12)
        # A third backend is the last bucket: exactly the slots whose bucket becomes 2 move.
        grown = [jump(mix64(slot), 3) for slot in range(7)]
        moved = sum(1 for before, after in zip(owners, grown) if before != after)
        self.assertTrue(all(after in (before, 2) for before, after in zip(owners, grown)))
        self.assertAlmostEqual(jump_result["add_one"], moved / (7 / 3), places=12)

    def test_every_algorithm_on_the_demo_config(self):
        report = self.compare(DEMO, "maglev,ring,rendezvous,jump,modulo", "--service", "web")
        self.assertEqual([s["name"] for s in report["services"]], ["web"])
        results = {a["algorithm"]: a for a in report["services"][0]["algorithms"]}
        self.assertEqual(list(results), ["maglev", "ring", "rendezvous", "jump", "modulo"])
        self.assertEqual([results[a]["in_datapath"] for a in results],
                         [True, True, True, False, False])
        self.assertLess(results["maglev"]["max_over_ideal"], 1.001)
        for name in ("ring", "rendezvous"):
            self.assertEqual(results[name]["remove_one"]["mean"], 1.0, name)
            self.assertEqual(results[name]["remove_one"]["worst"], 1.0, name)
        self.assertAlmostEqual(results["modulo"]["remove_one"]["mean"], 7.0, delta=0.01)
        self.assertGreater(results["jump"]["remove_one"]["worst"], 5)
        for result in results.values():
            self.assertEqual(len(result["slots_over_ideal"]), 8)
            self.assertEqual([p["removed"] for p in result["movement"]], [0, 1, 2, 3, 4])

    def test_text_report_has_a_row_per_algorithm_and_times_by_default(self):
        out = berthctl("analyze", "--config", DEMO, "--algorithms", "ring,jump",
                       "--service", "dns").stdout
        self.assertIn("service dns (udp 198.18.100.2:53, M=65537, N=3, configured: maglev)", out)
        ring_row = next(line for line in out.splitlines() if line.startswith("  ring *"))
        self.assertGreater(float(ring_row.split()[2]), 0, "build ms measured")
        self.assertIn("jump: ignores weights", out)

    def test_plot_is_valid_svg_with_a_labelled_line_per_algorithm(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "compare.svg")
            report = self.compare(DEMO, "maglev,ring,rendezvous,jump,modulo", "--plot", path)
            root = ElementTree.parse(path).getroot()
        svg = "{http://www.w3.org/2000/svg}"
        self.assertEqual(root.tag, svg + "svg")
        charts = [g for g in root.iter(svg + "g") if g.get("class") == "chart"]
        self.assertEqual([(c.get("data-service"), c.get("data-chart")) for c in charts],
                         [("web", "balance"), ("web", "movement"),
                          ("dns", "balance"), ("dns", "movement")])
        for chart in charts:
            service = next(s for s in report["services"] if s["name"] == chart.get("data-service"))
            series = {g.get("data-series"): g for g in chart.iter(svg + "g")
                      if g.get("class") == "series"}
            expected = ["maglev", "ring", "rendezvous", "jump", "modulo"]
            if chart.get("data-chart") == "movement":
                expected.append("ideal")
            self.assertEqual(list(series), expected)
            for name, group in series.items():
                # Each line is named at its end, in its own colour: no legend to hunt for.
                label = next(t for t in group.iter(svg + "text") if t.get("class") == "label")
                self.assertEqual(label.text, name)
                line = group.find(svg + "polyline")
                self.assertEqual(label.get("fill"), line.get("stroke"))
                points = line.get("points").split()
                if chart.get("data-chart") == "balance":
                    self.assertEqual(len(points), service["backends"])
                else:
                    self.assertEqual(len(points), len(service["algorithms"][0]["movement"]))

    def test_bad_options_are_named(self):
        result = berthctl("analyze", "--config", DEMO, "--algorithms", "maglev,cuckoo",
                          check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("--algorithms: unknown algorithm 'cuckoo'", result.stderr)
        self.assertIn("--plot needs --algorithms",
                      berthctl("analyze", "--config", DEMO, "--plot", "/tmp/x.svg",
                               check=False).stderr)
        self.assertIn("--plot: cannot write /nonexistent/x.svg",
                      berthctl("analyze", "--config", DEMO, "--algorithms", "ring", "--plot",
                               "/nonexistent/x.svg", check=False).stderr)
        self.assertIn("no service named 'nope'",
                      berthctl("analyze", "--config", DEMO, "--algorithms", "ring", "--service",
                               "nope", check=False).stderr)

    def test_table_json_names_the_configured_algorithm(self):
        table = json.loads(berthctl("table", "--config", self.small, "--service", "tiny",
                                    "--json").stdout)
        self.assertEqual(table["algorithm"], "ring")
        self.assertEqual(len(table["entries"]), 7)


class BirdConfigCommand(unittest.TestCase):
    def test_prints_birds_config_for_the_bgp_section_and_refuses_a_config_without_one(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
            config.write("dataplane:\n  ports: [ { name: p0, device: net_null0, "
                         "ipv4: 198.18.0.11 } ]\n"
                         "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0, "
                         "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                         "services: []\n")
        try:
            out = berthctl("bird-config", "--config", config.name, "--routes-dir",
                           "/tmp/routes").stdout
        finally:
            os.unlink(config.name)
        self.assertIn("router id 198.18.0.21;", out)
        self.assertIn('include "/tmp/routes/bird-routes4.conf";', out)
        self.assertIn("neighbor 198.18.0.1 as 64600;", out)
        refused = berthctl("bird-config", "--config", DEMO, check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("has no bgp section", refused.stderr)


class CheckCommand(unittest.TestCase):
    """`berthctl check`, which berthd's unit runs before each start (ExecStartPre)."""

    def write(self, text):
        config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        config.write(text)
        config.close()
        self.addCleanup(os.unlink, config.name)
        return config.name

    def test_a_good_config_is_valid_with_its_counts(self):
        for path in (DEMO, os.path.join(SOURCE_ROOT, "config", "example.yaml")):
            out = berthctl("check", "--config", path).stdout
            self.assertRegex(out, r"^%s: valid: \d+ service\(s\), \d+ backend\(s\)" % re.escape(path))
        self.assertIn("valid: 2 service(s), 11 backend(s)",
                      berthctl("check", "--config", DEMO).stdout)

    def test_a_bad_field_is_named_with_its_line(self):
        path = self.write("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n"
                          "    protocol: tcp\n    table_size: 1000\n    backends: []\n")
        result = berthctl("check", "--config", path, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{path}:6:17: services[0].table_size: 1000 is not prime", result.stderr)

    def test_an_unreadable_sync_key_is_named_with_its_line(self):
        key = self.write("k" * 32)
        text = ("sync:\n  listen: 198.18.0.10:7946\n  peers: [198.18.0.11:7946]\n"
                "  keys:\n    - { id: 1, file: %s }\n    - { id: 2, file: /nonexistent/key }\n"
                "services: []\n" % key)
        result = berthctl("check", "--config", self.write(text), check=False)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("sync.keys[1].file (line 6): cannot read '/nonexistent/key'", result.stderr)
        short = self.write("short")
        result = berthctl("check", "--config", self.write(text.replace("/nonexistent/key", short)),
                          check=False)
        self.assertIn("holds 5 bytes; a key needs 16 or more", result.stderr)

    def test_a_missing_fleet_tls_file_is_a_warning_since_berthd_starts_without_it(self):
        text = ("fleet:\n  endpoints: [https://198.18.0.1:2379]\n  name: lb-1\n"
                "  ca: /nonexistent/ca.pem\n")
        result = berthctl("check", "--config", self.write(text), check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("warning: fleet.ca (line 2): cannot read '/nonexistent/ca.pem'", result.stdout)


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

    def test_every_flag_the_command_table_names_is_one_berthctl_takes(self):
        """berthctl's usage comes from the command table; each flag in it must exist, or the
        command fails before it reaches berthd."""
        usage = berthctl("--help", check=False)
        live = (usage.stdout + usage.stderr).split("Commands to a running berthd")[1]
        commands = re.findall(r"^  ([a-z]+)((?: [^\n]*)?)$", live, re.M)
        self.assertIn("announce", [name for name, _ in commands])
        for name, synopsis in commands:
            # Each flag with a value, each positional word with a name; berthd is not there.
            command = [name]
            tokens = [token.strip("[]") for token in synopsis.split()]
            i = 0
            while i < len(tokens):
                token = tokens[i]
                takes_value = i + 1 < len(tokens) and not tokens[i + 1].startswith("--")
                if token.startswith("--") and takes_value:
                    command += [token, "1"]
                    i += 2
                    continue
                command.append(token if token.startswith("--") else "x")  # a switch, a word
                i += 1
            result = berthctl(*command, "--socket", "/nonexistent/berth.sock", check=False)
            self.assertIn("no control socket", result.stderr, (name, command, result.stderr))


class FleetCommands(unittest.TestCase):
    """`fleet push` checks the version before it reaches etcd (here a closed port), and the
    command line names what is missing."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            closed = probe.getsockname()[1]
        self.local = self.write("local.yaml", "fleet:\n  endpoints: [http://127.0.0.1:%d]\n"
                                "  name: admin\n" % closed)

    def tearDown(self):
        self.directory.cleanup()

    def write(self, name, text):
        path = os.path.join(self.directory.name, name)
        with open(path, "w") as out:
            out.write(text)
        return path

    def test_a_bad_version_is_refused_with_its_line_before_etcd(self):
        bad = self.write("bad.yaml", "services:\n  - name: web\n    vip: 198.18.100.1\n"
                         "    port: 80\n    protocol: tcp\n    backends:\n"
                         "      - { name: a, address: 198.18.1.1, weight: -1 }\n")
        result = berthctl("fleet", "push", bad, "--config", self.local, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("push refused: %s:7:" % bad, result.stderr)
        self.assertIn("services[0].backends[0].weight", result.stderr)
        per_instance = self.write("bgp.yaml", "dataplane: {}\nservices: []\n")
        result = berthctl("fleet", "push", per_instance, "--config", self.local, check=False)
        self.assertIn("%s:1:1: dataplane: is per instance" % per_instance, result.stderr)

    def test_a_good_version_fails_only_on_the_unreachable_etcd(self):
        good = self.write("good.yaml", "services: []\n")
        result = berthctl("fleet", "push", good, "--config", self.local, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("push failed:", result.stderr)
        result = berthctl("fleet", "status", "--config", self.local, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("fleet status:", result.stderr)

    def test_the_command_line_names_what_is_missing(self):
        self.assertIn("expected 'fleet push VERSION_FILE' or 'fleet status'",
                      berthctl("fleet", check=False).stderr)
        self.assertIn("expected 'fleet push VERSION_FILE'",
                      berthctl("fleet", "push", check=False).stderr)
        self.assertIn("need --config FILE with a fleet section",
                      berthctl("fleet", "status", check=False).stderr)
        no_fleet = self.write("plain.yaml", "services: []\n")
        self.assertIn("has no fleet section",
                      berthctl("fleet", "status", "--config", no_fleet, check=False).stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
