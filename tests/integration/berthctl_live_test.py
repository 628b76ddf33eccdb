#!/usr/bin/python3
"""berthctl against a running berthd, once on a net_null vdev and once on a net_pcap vdev that
replays real flows: every command (status, stats, services, backends, drain and undrain, reload,
explain, the live table) and the errors an operator meets: an unknown backend, no socket, a
refused reload, a bad flow. The control socket is owner-only and goes away with berthd.

Usage: berthctl_live_test.py BERTHD BERTHCTL
"""
import json
import os
import re
import socket
import urllib.request
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from scapy.all import IP, TCP, Ether, raw, wrpcap  # Debian's python3-scapy

BERTHD, BERTHCTL = sys.argv.pop(1), sys.argv.pop(1)
PORT_MAC = "02:70:63:61:70:00"  # what the pcap PMD gives its first port
CLIENT = "198.18.0.1"
FLOWS = 200  # to each service, from CLIENT ports 20000 up, a SYN then an ACK each
CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "{prefix}", "--lcores", "0@0,1@1",
        "--vdev", "{device}", "--log-level", "lib.eal:error"]
  ports: [ {{ name: p0, device: "{device}", ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }} ]
metrics: {{ listen: "127.0.0.1:0" }}
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - {{ name: web-1, address: 198.18.1.2 }}
      - {{ name: web-2, address: 198.18.2.2, weight: 3 }}
  - name: api
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    backends:
      - {{ name: web-1, address: 198.18.1.3 }}
"""


def replay_frames():
    frames = []
    for vip in ("198.18.100.1", "198.18.100.2"):
        for i in range(FLOWS):
            for flags in ("S", "A"):
                frames.append(raw(Ether(dst=PORT_MAC, src="02:00:00:00:00:02") /
                                  IP(src=CLIENT, dst=vip) / TCP(sport=20000 + i, dport=80, flags=flags)))
    return frames


class Live:
    """The tests, run by each vdev's class below."""
    VDEV = None  # "null" or "pcap"

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berthctl-live-")
        cls.prefix = "berth-live-%s-%d" % (cls.VDEV, os.getpid())
        cls.config = os.path.join(cls.directory, "berth.yaml")
        cls.socket = os.path.join(cls.directory, "run", "berth.sock")
        if cls.VDEV == "pcap":
            replay = os.path.join(cls.directory, "in.pcap")
            wrpcap(replay, [Ether(f) for f in replay_frames()])
            device = "net_pcap0,rx_pcap=%s,tx_pcap=%s" % (replay, os.path.join(cls.directory, "out.pcap"))
        else:
            device = "net_null0"
        with open(cls.config, "w") as out:
            out.write(CONFIG.format(prefix=cls.prefix, device=device))
        cls.process = subprocess.Popen([BERTHD, "--", "--config", cls.config, "--control-socket", cls.socket],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cls.lines = []
        threading.Thread(target=lambda: cls.lines.extend(cls.process.stderr), daemon=True).start()
        deadline = time.monotonic() + 20
        while not any("forwarding:" in l for l in list(cls.lines)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if cls.VDEV == "pcap":
            # Until the replay is through: every frame received.
            while time.monotonic() < deadline:
                reply = subprocess.run([BERTHCTL, "stats", "--json", "--socket", cls.socket],
                                       capture_output=True, text=True, timeout=30)
                if (reply.returncode == 0 and
                        json.loads(reply.stdout)["stats"]["counters"]["rx_packets"] >= 4 * FLOWS):
                    break
                time.sleep(0.1)

    @classmethod
    def tearDownClass(cls):
        cls.process.send_signal(signal.SIGINT)
        cls.process.wait(timeout=30)
        cls.socket_after_exit = os.path.exists(cls.socket)
        shutil.rmtree("/var/run/dpdk/" + cls.prefix, ignore_errors=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def berthctl(self, *args, check=True):
        result = subprocess.run([BERTHCTL, *args, "--socket", self.socket], capture_output=True,
                                text=True, timeout=30)
        if check:
            self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_status(self):
        out = self.berthctl("status").stdout
        self.assertIn("berthd 0.1.0", out)
        self.assertIn("config %s" % self.config, out)
        reply = json.loads(self.berthctl("status", "--json").stdout)
        self.assertTrue(reply["ok"])
        self.assertEqual((reply["services"], reply["backends"], reply["workers"]), (2, 3, 1))
        self.assertRegex(reply["config_crc32c"], "^[0-9a-f]{8}$")
        # Each table's fingerprint, the same as berthctl computes offline from the file: what
        # lets instances behind one ECMP group be compared (docs/scale-out.md).
        for table in reply["tables"]:
            offline = json.loads(subprocess.run(
                [BERTHCTL, "table", "--config", self.config, "--service", table["service"],
                 "--json"], capture_output=True, text=True, check=True, timeout=60).stdout)
            self.assertRegex(table["fingerprint"], "^v2-[0-9a-f]{16}$")
            self.assertEqual(table["fingerprint"], offline["fingerprint"], table["service"])
            self.assertIn("table %s: maglev, M=65537, fingerprint %s" % (table["service"],
                                                                       table["fingerprint"]), out)

    def test_stats(self):
        reply = json.loads(self.berthctl("stats", "--json").stdout)
        counters = reply["stats"]["counters"]
        self.assertGreater(counters["rx_packets"], 0, "net_null delivers frames")
        self.assertIn("drop_other_ethertype", counters)
        self.assertIn("conntrack_hits", counters)
        self.assertIn("web/web-2", reply["stats"]["backends"])
        self.assertIn("traffic: rx ", self.berthctl("stats").stdout)

    def test_services_and_backends(self):
        services = json.loads(self.berthctl("services", "--json").stdout)["services"]
        self.assertEqual([(s["name"], s["listener"], s["backends"]) for s in services],
                         [("web", "tcp 198.18.100.1:80", 2), ("api", "tcp 198.18.100.2:80", 1)])
        backends = json.loads(self.berthctl("backends", "--json").stdout)["backends"]
        web = {b["name"]: b for b in backends if b["service"] == "web"}
        self.assertEqual(web["web-2"]["weight"], 3)
        self.assertEqual(web["web-1"]["slots"] + web["web-2"]["slots"], 65537)
        self.assertGreater(web["web-2"]["slots"], 2 * web["web-1"]["slots"], "weight 3 against 1")
        self.assertEqual({b["health"] for b in backends}, {"healthy"})
        self.assertIn("web-2", self.berthctl("backends").stdout)

    def test_drain_and_undrain(self):
        ambiguous = self.berthctl("drain", "web-1")
        self.assertIn("drained web/web-1, api/web-1", ambiguous.stdout, "both services' web-1")
        self.berthctl("undrain", "web-1")
        out = self.berthctl("drain", "web-1", "--service", "web").stdout
        self.assertIn("drained web/web-1", out)
        status = json.loads(self.berthctl("status", "--json").stdout)
        self.assertIn("web/web-1", status["drained"])
        # The table's last change: the drain, which moved exactly web-1's slots.
        last = [t for t in status["tables"] if t["service"] == "web"][0]["last_change"]
        self.assertEqual((last["cause"], last["moved_over_minimum"]), ("drain", 1.0))
        self.assertIn("): drain\n", self.berthctl("status").stdout)
        self.assertIn("already so", self.berthctl("drain", "web-1", "--service", "web").stdout)
        self.assertIn("undrained web/web-1", self.berthctl("undrain", "web-1", "--service", "web").stdout)
        missing = self.berthctl("drain", "web-9", check=False)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no backend named 'web-9'", missing.stderr)

    def test_reload(self):
        self.assertIn("reloaded %s" % self.config, self.berthctl("reload").stdout)
        with open(self.config) as source:
            good = source.read()
        running_crc = json.loads(self.berthctl("status", "--json").stdout)["config_crc32c"]
        with open(self.config, "w") as out:
            out.write(good.replace("weight: 3", "weight: many"))
        refused = self.berthctl("reload", check=False)
        # `status` names the config in force, not the refused file now on disk.
        crc_after_refusal = json.loads(self.berthctl("status", "--json").stdout)["config_crc32c"]
        with open(self.config, "w") as out:
            out.write(good)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("refused, the running config keeps serving", refused.stderr)
        self.assertIn("services[0].backends[1].weight", refused.stderr)
        self.assertEqual(crc_after_refusal, running_crc)

    def test_errors_an_operator_meets(self):
        unknown = self.berthctl("explode", check=False)
        self.assertEqual(unknown.returncode, 1)
        nowhere = subprocess.run([BERTHCTL, "status", "--socket", self.socket + ".missing"],
                                 capture_output=True, text=True, timeout=30)
        self.assertEqual(nowhere.returncode, 1)
        self.assertIn("is berthd running?", nowhere.stderr)
        # A socket file nobody answers on: what a berthd killed with SIGKILL leaves.
        stale = os.path.join(self.directory, "stale.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as left:
            left.bind(stale)
        gone = subprocess.run([BERTHCTL, "status", "--socket", stale], capture_output=True,
                              text=True, timeout=30)
        self.assertEqual(gone.returncode, 1)
        self.assertIn("berthd is not running", gone.stderr)
        # Another user than berthd's: the socket is owner-only. (A copy of berthctl that user can
        # run, wherever the build tree is.)
        shared = tempfile.mkdtemp(prefix="berthctl-other-")
        try:
            os.chmod(shared, 0o755)
            copy = shutil.copy(BERTHCTL, shared)
            other = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup",
                                    "--clear-groups", copy, "status", "--socket", self.socket],
                                   capture_output=True, text=True, timeout=30)
        finally:
            shutil.rmtree(shared, ignore_errors=True)
        self.assertEqual(other.returncode, 1)
        self.assertIn("permission denied on %s" % self.socket, other.stderr)

    def test_malformed_requests_get_an_error_and_berthd_carries_on(self):
        """Whatever a client writes to the socket, berthd answers with an error or closes, and
        keeps serving: the request parser is fuzzed too (tests/fuzz), this is the live path."""
        requests = [b"not json\n", b"{\n", b"[]\n", b"{\"command\": 7}\n",
                    b"{\"command\": \"drain\"}\n", b"\x00\xff\xfe garbage\n",
                    b"{\"command\": \"status\"" + b" " * 70000 + b"\n", b"{\"command\": \"st"]
        for request in requests:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(10)
                client.connect(self.socket)
                try:
                    client.sendall(request)
                    client.shutdown(socket.SHUT_WR)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # berthd answered the oversized request at its limit and hung up
                reply = b""
                try:
                    while chunk := client.recv(65536):
                        reply += chunk
                except ConnectionResetError:
                    pass  # the unread rest of an oversized request resets the connection
            answer = json.loads(reply)
            self.assertFalse(answer["ok"], request[:40])
            self.assertTrue(answer["error"], request[:40])
        self.assertIsNone(self.process.poll())
        self.assertEqual(self.berthctl("status").returncode, 0)

    def test_the_socket_is_owner_only(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.socket).st_mode), 0o600)

    def explain(self, src, dst="198.18.100.1:80", *extra):
        return json.loads(self.berthctl("explain", "--src", src, "--dst", dst, *extra, "--json").stdout)

    def test_explain_agrees_with_the_live_table(self):
        table = json.loads(self.berthctl("table", "--service", "web", "--json").stdout)["table"]
        names = [b["name"] for b in table["backends"]]
        for port in (20000, 20001, 20199, 31000, 31001):
            reply = self.explain("%s:%d" % (CLIENT, port))
            self.assertEqual(reply["service"], "web")
            self.assertEqual(reply["slot"], int(reply["flow_hash"], 16) % 65537)
            self.assertEqual(reply["table_backend"], names[table["entries"][reply["slot"]]])
            self.assertEqual(reply["next_backend"], reply["table_backend"])
            tracked = self.VDEV == "pcap" and port < 20000 + FLOWS
            self.assertEqual(reply["tracked"], tracked, reply["reason"])
            if tracked:
                self.assertEqual(reply["conntrack"]["worker"], 0)
                self.assertEqual(reply["conntrack"]["state"], "tcp_established")
                self.assertEqual(reply["conntrack"]["backend"], reply["table_backend"])
            else:
                self.assertIsNone(reply["conntrack"])
                self.assertIn("no worker tracks this flow", reply["reason"])
        text = self.berthctl("explain", "--src", CLIENT + ":20000", "--dst", "198.18.100.1:80").stdout
        for label in ("flow:", "service:", "flow hash:", "table's pick:", "conntrack:",
                      "next packet:", "because:"):
            self.assertIn(label, text)

    def test_explain_follows_a_drain(self):
        # keep_established (the default): a tracked flow stays on its drained backend; a new flow
        # never lands on it.
        flow = "%s:20005" % CLIENT
        backend = self.explain(flow)["next_backend"]
        self.berthctl("drain", backend, "--service", "web")
        try:
            tracked = self.explain(flow)
            fresh = self.explain("%s:40000" % CLIENT)
        finally:
            self.berthctl("undrain", backend, "--service", "web")
        self.assertNotEqual(fresh["next_backend"], backend)
        if self.VDEV == "pcap":
            self.assertEqual(tracked["next_backend"], backend)
            self.assertIn("drained; established connections finish", tracked["reason"])
        else:
            self.assertNotEqual(tracked["next_backend"], backend)

    def test_explain_for_no_service_and_bad_flows(self):
        none = self.explain("%s:1000" % CLIENT, "198.18.100.9:80")
        self.assertIsNone(none["service"])
        self.assertIn("no_service", none["reason"])
        udp = self.explain("%s:1000" % CLIENT, "198.18.100.1:80", "--proto", "udp")
        self.assertIsNone(udp["service"], "web is tcp")
        for args, message in ((("--src", "198.18.0.1", "--dst", "198.18.100.1:80"), "--src: "),
                              (("--src", "198.18.0.1:1", "--dst", "[2001:db8::1]:80"), "must both be IPv4"),
                              (("--src", "198.18.0.1:1", "--dst", "198.18.100.1:80", "--proto", "sctp"),
                               "tcp or udp"),
                              (("--src", "198.18.0.1:1"), "needs --src IP:PORT and --dst")):
            result = self.berthctl("explain", *args, check=False)
            self.assertEqual(result.returncode, 1)
            self.assertIn(message, result.stderr)

    def test_live_table_matches_the_offline_one(self):
        live = self.berthctl("table", "--service", "api").stdout
        offline = subprocess.run([BERTHCTL, "table", "--config", self.config, "--service", "api"],
                                 capture_output=True, text=True, timeout=60, check=True).stdout
        self.assertIn("live in snapshot", live.splitlines()[0])
        self.assertEqual(live.splitlines()[1:], offline.splitlines()[1:])
        # --summary, live and offline alike: the balance and the backends, no slots.
        summary = self.berthctl("table", "--service", "api", "--summary").stdout
        offline_summary = subprocess.run(
            [BERTHCTL, "table", "--config", self.config, "--service", "api", "--summary"],
            capture_output=True, text=True, timeout=60, check=True).stdout
        self.assertEqual(summary.splitlines()[1:], offline_summary.splitlines()[1:])
        self.assertLess(len(summary.splitlines()), 10)
        self.assertIn("serving; slots per backend", summary)
        missing = self.berthctl("table", "--service", "nope", check=False)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no service named 'nope'; berthd has: web, api", missing.stderr)

    def test_connections_per_service_and_backend(self):
        services = {s["name"]: s for s in json.loads(self.berthctl("services", "--json").stdout)["services"]}
        backends = json.loads(self.berthctl("backends", "--json").stdout)["backends"]
        expected = FLOWS if self.VDEV == "pcap" else 0
        for name in ("web", "api"):
            self.assertEqual(services[name]["connections"], expected)
            self.assertEqual(sum(b["connections"] for b in backends if b["service"] == name), expected)
        self.assertIn("connections", self.berthctl("backends").stdout)


    def scrape(self):
        line = next(l for l in self.lines if "metrics: http://" in l)
        url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", line).group(1)
        with urllib.request.urlopen(url, timeout=10) as response:
            self.assertEqual(response.status, 200)
            self.assertIn("version=0.0.4", response.headers["Content-Type"])
            return parse_prometheus(self, response.read().decode())

    def test_metrics_endpoint_scrapes_and_agrees_with_berthctl(self):
        first = self.scrape()
        backends = json.loads(self.berthctl("backends", "--json").stdout)["backends"]
        second = self.scrape()
        for backend in backends:
            labels = (("backend", backend["name"]), ("service", backend["service"]))
            self.assertEqual(second[("berth_backend_slots", labels)], backend["slots"])
            self.assertEqual(second[("berth_backend_weight", labels)], backend["weight"])
            self.assertEqual(second[("berth_backend_healthy", labels)], 1)
            self.assertEqual(second[("berth_backend_connections", labels)], backend["connections"])
        worker = (("worker", "0"),)
        for name in ("berth_worker_rx_packets_total", "berth_conntrack_entries",
                     "berth_conntrack_capacity"):
            self.assertIn((name, worker), second)
        for key, value in first.items():
            if key[0].endswith("_total"):
                self.assertGreaterEqual(second[key], value, "counters never go back: %r" % (key,))
        self.assertIn(("berth_drops_total", (("reason", "no_service"),)), second)
        self.assertIn(("berth_parse_errors_total", (("error", "short_frame"),)), second)
        self.assertIn(("berth_conntrack_events_total", (("event", "inserts"),)), second)
        # Slots moved by table changes, per service and cause, every cause listed.
        for cause in ("health", "drain", "weight", "added", "removed", "reload"):
            self.assertIn(("berth_table_slots_moved_total", (("cause", cause), ("service", "web"))),
                          second)
        if self.VDEV == "pcap":
            self.assertEqual(second[("berth_service_connections", (("service", "web"),))], FLOWS)
            self.assertEqual(second[("berth_worker_rx_packets_total", worker)], 4 * FLOWS)
        else:
            self.assertGreater(second[("berth_drops_total", (("reason", "other_ethertype"),))], 0)

    def telemetry(self, *commands):
        path = "/var/run/dpdk/%s/dpdk_telemetry.v2" % self.prefix
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as client:
            client.connect(path)
            client.recv(16384)  # the greeting
            answers = []
            for command in commands:
                client.send(command.encode())
                answers.append(json.loads(client.recv(65536).decode())[command.split(",")[0]])
            return answers

    def test_telemetry_returns_what_berthctl_does(self):
        backends, services, stats, status, unknown = self.telemetry(
            "/berth/backends,web", "/berth/services", "/berth/stats", "/berth/status",
            "/berth/backends,nope")
        expected = [b for b in json.loads(self.berthctl("backends", "--json").stdout)["backends"]
                    if b["service"] == "web"]
        self.assertEqual(backends["total"], len(expected))
        self.assertEqual(backends["name"], [b["name"] for b in expected])
        self.assertEqual(backends["slots"], [b["slots"] for b in expected])
        self.assertEqual(backends["weight"], [b["weight"] for b in expected])
        self.assertEqual(backends["effective_weight"], [b["effective_weight"] for b in expected])
        self.assertEqual(backends["health"], [b["health"] for b in expected])
        self.assertEqual(backends["connections"], [b["connections"] for b in expected])
        self.assertEqual(services["name"], ["web", "api"])
        counters = json.loads(self.berthctl("stats", "--json").stdout)["stats"]["counters"]
        self.assertEqual(set(counters), set(stats) - {"conntrack_entries"})
        if self.VDEV == "pcap":  # the replay is over: nothing moves
            self.assertEqual(stats["rx_packets"], counters["rx_packets"])
        reply = json.loads(self.berthctl("status", "--json").stdout)
        self.assertEqual(status["snapshot_generation"], reply["snapshot_generation"])
        self.assertEqual(status["workers"], reply["workers"])
        self.assertEqual(unknown, "no service named 'nope'")

    def test_stats_reports_rates_over_the_last_interval(self):
        time.sleep(2.2)  # two samples, a second apart
        rates = json.loads(self.berthctl("stats", "--json").stdout)["rates"]
        self.assertAlmostEqual(rates["interval_s"], 1.0, delta=0.5)
        if self.VDEV == "null":
            self.assertGreater(rates["rx_pps"], 0, "net_null delivers without end")
            self.assertGreater(rates["drops_per_s"], 0)
        else:
            self.assertEqual(rates["rx_pps"], 0, "the replay is over")
        self.assertIn("rates over the last", self.berthctl("stats").stdout)
        # Per service and backend too: none moves once the replay is over, or on net_null.
        for row in (json.loads(self.berthctl("services", "--json").stdout)["services"] +
                    json.loads(self.berthctl("backends", "--json").stdout)["backends"]):
            self.assertEqual(row["packets_per_s"], 0, row["name"])
            self.assertEqual(row["new_connections_per_s"], 0, row["name"])
        if self.VDEV == "pcap":
            services = json.loads(self.berthctl("services", "--json").stdout)["services"]
            self.assertEqual([s["connections_opened"] for s in services], [FLOWS, FLOWS])

    def test_stats_shows_what_is_not_zero_and_all_shows_everything(self):
        short = self.berthctl("stats").stdout
        everything = self.berthctl("stats", "--all").stdout
        self.assertIn("counters at zero not shown", short)
        self.assertLess(len(short.splitlines()), len(everything.splitlines()))
        self.assertNotIn("counters at zero not shown", everything)
        self.assertIn("connection table:", everything)
        # One receive rate in the short form: the last second's.
        self.assertIn("rates over the last", short)
        self.assertNotIn("average rx", short)
        self.assertIn("average rx from the first frame to the last", everything)

    def test_watch_asks_again_and_again(self):
        result = self.berthctl("services", "--watch", "0.2", "--watch-count", "3")
        self.assertEqual(result.stdout.count("every 200ms: berthctl services"), 3)
        self.assertEqual(result.stdout.count("service          listener"), 3)
        refused = self.berthctl("reload", "--watch", "1", check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("--watch repeats what only reads; not reload", refused.stderr)


# A strict reader of the Prometheus text format (0.0.4): every sample belongs to a family whose
# TYPE came first, names and labels are well-formed, and no series appears twice. Returns
# {(name, ((label, value), ...)): number}.
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def parse_prometheus(test, text):
    test.assertTrue(text.endswith("\n"))
    types = {}
    series = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            test.assertIn(kind, ("counter", "gauge"))
            test.assertNotIn(name, types, "one TYPE per family")
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        test.assertIsNotNone(match, "not a sample line: %r" % line)
        name, labels, value = match.groups()
        test.assertIn(name, types, "sample before its TYPE: %r" % line)
        pairs = []
        rest = labels or ""
        while rest:
            label = LABEL.match(rest)
            test.assertIsNotNone(label, "bad labels in %r" % line)
            pairs.append((label.group(1), label.group(2)))
            rest = rest[label.end():]
        key = (name, tuple(sorted(pairs)))
        test.assertNotIn(key, series, "series twice: %r" % line)
        number = float(value)
        if types[name] == "counter":
            test.assertGreaterEqual(number, 0)
        series[key] = number
    return series


class BerthctlOnNetNull(Live, unittest.TestCase):
    VDEV = "null"


class BerthctlOnNetPcap(Live, unittest.TestCase):
    VDEV = "pcap"


class SocketGoesAway(unittest.TestCase):
    def test_zz_socket_removed_on_exit(self):
        # Runs after the berthctl classes' teardowns (unittest orders classes by name: B < S).
        self.assertFalse(BerthctlOnNetNull.socket_after_exit)
        self.assertFalse(BerthctlOnNetPcap.socket_after_exit)


if __name__ == "__main__":
    unittest.main(verbosity=2)
