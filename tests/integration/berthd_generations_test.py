#!/usr/bin/python3
"""Table generations and agreed health in a fleet of three berthd instances, each in a network
namespace of its own, so that one instance's probes can be cut off from a backend while the
others still reach it. etcd (three members, plain HTTP) listens on a bridge the namespaces share;
the backends' health checks are TCP connects to addresses this namespace holds (198.18.64.0/22),
answered by one listener here. Each berthd runs on a net_null port with idle workers.

Pinned, in order (the cases share the fleet and each leaves it serving):
- one instance is elected, and all three serve the same generation with identical tables;
- a backend one instance cannot reach stays in every table, and that instance is named as
  dissenting by every instance's status and backends and by `berthctl fleet status`; a second instance cut off makes the quorum take it out in the next generation, on
  every instance alike; reachable again, it comes back;
- adding a backend, changing a weight and draining one each move at most 1.1x the least that had
  to move, on every instance, and leave the tables identical;
- killing the elected instance elects another, which carries the generations on without a gap;
  the killed instance, restarted, comes up on the generation in force;
- with etcd stopped, a backend one instance cannot reach is taken out by that instance alone
  (fail-safe, shown in its status); with etcd back, it is put back, and the tables agree again;
- a version that adds a backend and reweights another in a service without health checks moves
  at most 1.1x the least on every instance, once: the generation the elected instance makes for
  it moves nothing more.

Usage: berthd_generations_test.py BERTHD BERTHCTL [Generations.test_3_each_change_moves_the_least]
BERTH_GENERATIONS_BACKENDS=N measures with N backends (default 20; up to 1,000), probed less
often as N grows.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from fleet_cluster import FleetCluster  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
TAG = os.getpid() % 100000
BRIDGE = "bgb%d" % TAG
HOST = "198.18.60.1"
BACKEND_NET = "198.18.64.0/22"
# More backends for a measurement run (each instance probes every backend every INTERVAL_S).
BACKENDS = int(os.environ.get("BERTH_GENERATIONS_BACKENDS", "20"))
INTERVAL_S = max(0.3, BACKENDS * 0.003)
LIMIT_S = 20.0 + 10 * INTERVAL_S


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def namespace(i):
    return "bgn%d-%d" % (TAG, i)


def backend_address(i):
    return "198.18.%d.%d" % (64 + (i + 1) // 256, (i + 1) % 256)


class Listener:
    """Accepts and closes every TCP connection to any address of BACKEND_NET on one port."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("0.0.0.0", 0))
        self.socket.listen(512)
        self.port = self.socket.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while not self.stopped:
            try:
                connection, _ = self.socket.accept()
                connection.close()
            except OSError:
                return

    def close(self):
        self.stopped = True
        self.socket.close()


API_BACKENDS = 20


def backend_lines(prefix, count, weights, first_address):
    text = "    backends:\n"
    for i in range(count):
        weight = (weights or {}).get(i)
        text += "      - { name: %s-%03d, address: %s%s }\n" % (
            prefix, i, backend_address(first_address + i),
            "" if weight is None else ", weight: %d" % weight)
    return text


def version_text(port, backends=BACKENDS, weights=None, api_backends=API_BACKENDS,
                 api_weights=None):
    """Service web, probed over TCP, and service api, without health checks."""
    text = ("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: tcp\n"
            "    health: { type: tcp, interval: %.2f, timeout: 0.2, rise: 1, fall: 2, port: %d }\n"
            % (INTERVAL_S, port))
    text += backend_lines("web", backends, weights, 0)
    text += "  - name: api\n    vip: 198.18.100.2\n    port: 80\n    protocol: tcp\n"
    return text + backend_lines("api", api_backends, api_weights, 1000)


class Generations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.made = []
        cls.listener = None
        cls.fleet = None
        try:
            cls.make_network()
            cls.listener = Listener()
            cls.fleet = FleetCluster(BERTHD, BERTHCTL, tls=False, host=HOST,
                                     namespaces=[namespace(i) for i in range(3)])
            for i in range(3):
                cls.fleet.start_berthd(i)
            cls.weights = {}
            result = cls.fleet.push(version_text(cls.listener.port))
            if result.returncode != 0:
                raise AssertionError(result.stdout + result.stderr)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.fleet is not None:
            cls.fleet.close()
        if cls.listener is not None:
            cls.listener.close()
        for i in range(3):
            ip("netns", "del", namespace(i), check=False)
        ip("link", "del", BRIDGE, check=False)
        ip("route", "del", "local", BACKEND_NET, "dev", "lo", check=False)

    @classmethod
    def make_network(cls):
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", HOST + "/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        # Every address of BACKEND_NET is this namespace's own: the listener answers them all.
        ip("route", "add", "local", BACKEND_NET, "dev", "lo")
        for i in range(3):
            ns = namespace(i)
            outside = "bgv%d-%d" % (TAG, i)
            ip("netns", "add", ns)
            ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", outside, "master", BRIDGE, "up")
            ip("-n", ns, "addr", "add", "198.18.60.%d/24" % (10 + i), "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", "default", "via", HOST)

    def setUp(self):
        result = self._outcome.result
        self.problems_before = len(result.failures) + len(result.errors)
        self.started = time.monotonic()

    def tearDown(self):
        print("%s: %.1f s" % (self.id().split(".")[-1], time.monotonic() - self.started),
              file=sys.stderr)
        # A failed case shows what every instance logged.
        result = self._outcome.result
        if len(result.failures) + len(result.errors) > self.problems_before:
            for i in sorted(self.fleet.berthds):
                print("--- lb-%d\n%s" % (i, self.fleet.log(i)[-6000:]), file=sys.stderr)

    # --- helpers --------------------------------------------------------------------------------
    def cut(self, instance, backend, cut=True):
        """Makes `backend`'s address unreachable from `instance`'s namespace, or reachable again."""
        ip("-n", namespace(instance), "route", "add" if cut else "del", "prohibit",
           backend_address(backend) + "/32")

    def status(self, i):
        return self.fleet.status(i)

    def backends(self, i):
        result = self.fleet.berthctl("backends", "--json", "--socket", self.fleet.socket(i))
        self.assertEqual(result.returncode, 0, result.stderr)
        return {row["name"]: row for row in json.loads(result.stdout)["backends"]}

    def wait(self, what, condition, limit=LIMIT_S):
        deadline = time.monotonic() + limit
        last = None
        while time.monotonic() < deadline:
            last = condition()
            if last:
                return last
            time.sleep(0.1)
        logs = "\n".join("--- lb-%d\n%s" % (i, self.fleet.log(i)[-3000:])
                         for i in sorted(self.fleet.berthds))
        raise AssertionError("%s: not within %.0f s\n%s" % (what, limit, logs))

    def agreed(self, generation_at_least=1):
        """The statuses once every instance serves the newest generation, at least
        `generation_at_least`, with identical tables; else None."""
        statuses = {i: self.status(i) for i in sorted(self.fleet.berthds)}
        generations = {s["fleet"]["generation"] for s in statuses.values()}
        heads = {s["fleet"]["generation_head"] for s in statuses.values()}
        fingerprints = {tuple(t["fingerprint"] for t in s["tables"]) for s in statuses.values()}
        if len(generations) != 1 or generations != heads or len(fingerprints) != 1:
            return None
        if min(generations) < generation_at_least:
            return None
        return statuses

    def fleet_lines(self):
        """Each instance's log lines about the fleet, for a failure's message."""
        return "\n".join("--- lb-%d\n%s" % (i, "\n".join(
            line for line in self.fleet.log(i).splitlines() if "fleet" in line)[-4000:])
            for i in sorted(self.fleet.berthds))

    def generation(self):
        return self.status(min(self.fleet.berthds))["fleet"]["generation"]

    def push(self, text):
        result = self.fleet.push(text)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def version(self):
        return self.fleet.fleet_status()["version"]

    # --- cases ----------------------------------------------------------------------------------
    def test_1_one_elected_instance_one_generation(self):
        statuses = self.wait("every instance on one generation", self.agreed)
        elected = [i for i, s in statuses.items() if s["fleet"]["elected"]]
        self.assertEqual(len(elected), 1, statuses)
        leader = "lb-%d" % elected[0]
        for s in statuses.values():
            self.assertEqual(s["fleet"]["leader"], leader)

    def test_2_the_quorum_decides(self):
        self.wait("every instance on one generation", self.agreed)
        before = self.generation()
        self.cut(0, 3)
        try:
            def dissent_named():
                dissent = self.status(0)["fleet"]["dissent"]
                return [d for d in dissent if d["backend"] == "web-003" and
                        d["instances"] == ["lb-0"] and d["fleet_says"] == "up"]
            self.wait("lb-0 named as dissenting on web-003", dissent_named)
            # Every instance's backends reply says so too once it has read lb-0's report, and
            # web-003 keeps its slots on every instance.
            self.wait("every instance names lb-0", lambda: all(
                self.backends(i)["web-003"]["fleet_dissent"] == "lb-0" for i in range(3)))
            for i in range(3):
                self.assertGreater(self.backends(i)["web-003"]["slots"], 0, i)
            # berthctl fleet status names it too, from the reports in etcd.
            self.assertIn({"service": "web", "backend": "web-003", "fleet_says": "up",
                           "instances": ["lb-0"]}, self.fleet.fleet_status()["dissent"])
            text = self.fleet.berthctl("fleet", "status", "--config", self.fleet.admin).stdout
            self.assertIn("health: web/web-003 up by the fleet's word (quorum 2); lb-0 sees it "
                          "down", text)
            statuses = self.agreed()
            self.assertIsNotNone(statuses, "one instance's probes changed a table")
            self.assertEqual(self.generation(), before)

            self.cut(1, 3)
            try:
                statuses = self.wait("the quorum takes web-003 out",
                                     lambda: self.agreed(before + 1))
                for i in range(3):
                    self.assertEqual(self.backends(i)["web-003"]["slots"], 0, i)
            finally:
                self.cut(1, 3, cut=False)
        finally:
            self.cut(0, 3, cut=False)
        self.wait("web-003 back on every instance",
                  lambda: self.agreed() and all(self.backends(i)["web-003"]["slots"] > 0
                                                for i in range(3)))

    def test_3_each_change_moves_the_least(self):
        port = self.listener.port
        steps = [("an added backend", dict(backends=BACKENDS + 1), "generation"),
                 ("a weight change", dict(backends=BACKENDS + 1, weights={5: 3}), "weight"),
                 ("a drain", dict(backends=BACKENDS + 1, weights={5: 3, 7: 0}), "drain")]
        # From a fleet at rest: every backend judged up and in the tables.
        self.wait("every backend in every table", lambda: self.agreed() and all(
            row["slots"] > 0 for i in range(3) for row in self.backends(i).values()))
        for what, change, cause in steps:
            self.wait("every instance on one generation", self.agreed)
            pushed = time.monotonic()
            self.push(version_text(port, **change))
            version = self.version()

            def since_push(status):
                last = status["tables"][0].get("last_change", {})
                return (last.get("cause") == cause and
                        last["seconds_ago"] < time.monotonic() - pushed)

            def applied():
                statuses = self.agreed()
                if not statuses or any(s["fleet"]["version"] != version or not since_push(s)
                                       for s in statuses.values()):
                    return None
                return statuses
            statuses = self.wait(what + " applied alike", applied)
            # The backend added takes its quota only once an instance has judged it up, in the
            # generation after the version; the other changes apply with the version itself.
            self.assertGreater(self.backends(0)["web-%03d" % BACKENDS]["slots"], 0)
            for i, s in statuses.items():
                last = s["tables"][0]["last_change"]
                self.assertGreater(last["moved_slots"], 0, (what, i, last))
                self.assertLessEqual(last["moved_over_minimum"], 1.1, (what, i, last))
                print("%s on lb-%d: moved %d slots, least %.0f (%.3fx)" % (
                    what, i, last["moved_slots"], last["minimum_slots"],
                    last["moved_over_minimum"]), file=sys.stderr)

    def test_4_the_elected_instance_dies(self):
        statuses = self.wait("every instance on one generation", self.agreed)
        elected = [i for i, s in statuses.items() if s["fleet"]["elected"]][0]
        before = self.generation()
        self.fleet.kill_berthd(elected)
        survivors = sorted(self.fleet.berthds)
        self.wait("another instance elected",
                  lambda: any(self.status(i)["fleet"]["elected"] for i in survivors))
        # A change the new elected instance makes: the next number, no gap.
        self.cut(survivors[0], 9)
        self.cut(survivors[1], 9)
        try:
            statuses = self.wait("generation %d made by the new elected instance" % (before + 1),
                                 lambda: self.agreed(before + 1))
            self.assertEqual(self.generation(), before + 1)
            self.assertNotEqual(statuses[survivors[0]]["fleet"]["leader"], "lb-%d" % elected)
        finally:
            self.cut(survivors[0], 9, cut=False)
            self.cut(survivors[1], 9, cut=False)
        self.wait("web-009 back", lambda: self.agreed(before + 2))
        # Restarted, the killed instance comes up on the generation in force.
        self.fleet.start_berthd(elected)
        self.wait("the restarted instance on the fleet's generation", self.agreed)

    def test_5_losing_etcd(self):
        self.wait("every instance on one generation", self.agreed)
        fingerprint = self.status(0)["tables"][0]["fingerprint"]
        for member in range(3):
            self.fleet.stop_member(member)
        self.cut(2, 11)
        try:
            def fail_safe():
                s = self.status(2)
                return (s["fleet"]["fail_safe_active"] and
                        s["fleet"]["fail_safe"] == ["web/web-011"] and
                        s["tables"][0]["fingerprint"] != fingerprint)
            self.wait("lb-2 takes web-011 out fail-safe", fail_safe)
            self.assertEqual(self.backends(2)["web-011"]["slots"], 0)
            for i in (0, 1):
                self.assertEqual(self.status(i)["tables"][0]["fingerprint"], fingerprint)
            for member in range(3):
                self.fleet.start_member(member)
            self.fleet.wait_members_healthy(range(3))
            # An instance whose own probes agree with the fleet's word serves the same table in
            # fail-safe as out of it, so agreement alone does not say that it has heard etcd
            # again (its next try comes within a second of its last failure): wait for both.
            def converged():
                statuses = self.agreed()
                if statuses and not any(s["fleet"]["fail_safe_active"]
                                        for s in statuses.values()):
                    return statuses
                return None
            statuses = self.wait("every instance hears etcd again and converges", converged)
            for i, s in statuses.items():
                self.assertFalse(s["fleet"]["fail_safe_active"], "lb-%d: %s\n%s" % (
                    i, s["fleet"], self.fleet_lines()))
                self.assertEqual(s["fleet"]["fail_safe"], [])
            self.assertGreater(self.backends(2)["web-011"]["slots"], 0,
                               "one instance's probes alone put it out once etcd answers")
        finally:
            self.cut(2, 11, cut=False)

    def test_6_a_version_without_checks_moves_the_least_once(self):
        # Service api has no health checks, so every instance that runs a version judges its
        # backends up at once, the elected instance too. An instance that takes its own step
        # before the generation comes must take the added backend in already: else the
        # generation moves slots a second time.
        self.wait("every instance on one generation", self.agreed)
        before = self.generation()
        pushed = time.monotonic()
        self.push(version_text(self.listener.port, backends=BACKENDS + 1, weights={5: 3, 7: 0},
                               api_backends=API_BACKENDS + 1, api_weights={4: 3}))
        version = self.version()

        def planned():
            statuses = self.agreed(before + 1)
            if not statuses or any(s["fleet"]["version"] != version for s in statuses.values()):
                return None
            return statuses
        statuses = self.wait("the version and its generation on every instance", planned)
        for i, s in statuses.items():
            api = [t for t in s["tables"] if t["service"] == "api"][0]
            last = api["last_change"]
            print("adding and reweighting without checks on lb-%d: moved %d slots, least %.0f "
                  "(%.3fx), %s" % (i, last["moved_slots"], last["minimum_slots"],
                                   last["moved_over_minimum"], last["cause"]), file=sys.stderr)
            self.assertLess(last["seconds_ago"], time.monotonic() - pushed, (i, last))
            # The version's own step; the generation after it moved nothing, or it would be the
            # last change.
            self.assertEqual(last["cause"], "reload", (i, last, self.fleet_lines()))
            self.assertGreater(last["moved_slots"], 0, (i, last))
            self.assertLessEqual(last["moved_over_minimum"], 1.1, (i, last))
        self.assertGreater(self.backends(0)["api-%03d" % API_BACKENDS]["slots"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
