#!/usr/bin/python3
"""A fleet of three berthd instances sharing their services through a three-member etcd cluster,
all over TLS with client certificates from a CA the test makes with openssl. Each berthd runs on a
net_null port that receives nothing, with idle workers, so that three share this machine.

Pinned, in order (the cases share the fleet and each leaves it serving):
- a push is applied by every instance within 5 s, with identical table fingerprints, and
  `berthctl fleet status` says they agree;
- an invalid push is refused with its field and line, and a push with a per-instance section is
  refused naming it; no instance changes;
- of two pushes started together, each one lands or says another push committed first, and the
  fleet's version counts exactly the ones that landed (fleet_agent_test pins the exact race);
- a version an instance cannot apply is refused by it, with the line, and it keeps its version;
- with one etcd member stopped, pushes still reach every instance;
- with every member stopped, the instances keep serving, and a berthd started meanwhile serves
  its cached version; with the members back, every instance registers again and applies the next
  push.

Usage: berthd_fleet_test.py BERTHD BERTHCTL
"""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from fleet_cluster import FleetCluster, version_text  # noqa: E402

BERTHD = sys.argv.pop(1)
BERTHCTL = sys.argv.pop(1)
APPLY_LIMIT_S = 5.0


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = FleetCluster(BERTHD, BERTHCTL, tls=True)
        cls.dir = cls.fleet.dir
        cls.admin = cls.fleet.admin
        try:
            for i in range(3):
                cls.fleet.start_berthd(i)
        except BaseException:
            cls.fleet.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    # --- helpers --------------------------------------------------------------------------------
    def berthctl(self, *args, expect=0):
        result = self.fleet.berthctl(*args)
        if expect is not None:
            self.assertEqual(result.returncode, expect, result.stdout + result.stderr)
        return result

    def push(self, text, name="fleet.yaml", expect=0):
        result = self.fleet.push(text, name)
        self.assertEqual(result.returncode, expect, result.stdout + result.stderr)
        return result

    def status(self, i):
        return self.fleet.status(i)

    def fleet_status(self):
        return self.fleet.fleet_status()

    def head(self):
        return self.fleet_status()["version"]

    def wait_all_on(self, version, limit=20.0):
        """Seconds until every instance serves `version` and the fleet's newest table generation,
        with identical tables; the fingerprints then, per instance."""
        start = time.monotonic()
        while True:
            statuses = [self.status(i) for i in sorted(self.fleet.berthds)]
            # On the version, and on the fleet's newest table generation, which follows it.
            tables = {json.dumps({t["service"]: t["fingerprint"] for t in s["tables"]},
                                 sort_keys=True) for s in statuses}
            if all(s["fleet"]["version"] == version and
                   s["fleet"]["generation"] == s["fleet"]["generation_head"]
                   for s in statuses) and len(tables) == 1:
                return time.monotonic() - start, [
                    {t["service"]: t["fingerprint"] for t in s["tables"]} for s in statuses]
            if time.monotonic() - start > limit:
                self.fail("not every instance on version %d: %s" % (
                    version, [s["fleet"] for s in statuses]))
            time.sleep(0.02)

    def wait_fleet_agrees(self, instances=3, limit=20.0):
        deadline = time.monotonic() + limit
        while True:
            fleet = self.fleet_status()
            if fleet["agree"] and len(fleet["instances"]) == instances:
                return fleet
            if time.monotonic() > deadline:
                self.fail("the fleet does not agree: %s" % fleet)
            time.sleep(0.1)

    def versions(self):
        return [self.status(i)["fleet"]["version"] for i in sorted(self.fleet.berthds)]

    # --- the cases, in order -------------------------------------------------------------------
    def test_1_a_push_reaches_every_instance(self):
        out = self.push(version_text(3)).stdout
        self.assertIn("as fleet version 1 ", out)
        seconds, fingerprints = self.wait_all_on(1)
        self.assertLess(seconds, APPLY_LIMIT_S)
        self.assertEqual(len({json.dumps(f, sort_keys=True) for f in fingerprints}), 1, fingerprints)
        self.assertEqual(set(fingerprints[0]), {"web"})
        fleet = self.wait_fleet_agrees()
        self.assertEqual(sorted(i["name"] for i in fleet["instances"]), ["lb-0", "lb-1", "lb-2"])
        text = self.berthctl("fleet", "status", "--config", self.admin).stdout
        self.assertIn("agree: yes, 3 instance(s)", text)
        self.assertIn("web: lb-0=%s" % fingerprints[0]["web"], text)

    def test_2_invalid_pushes_are_refused_with_their_line(self):
        head = self.head()
        bad = version_text(3).replace("address: 198.18.1.2 }", "address: 198.18.1.2, weight: x }")
        result = self.push(bad, name="bad.yaml", expect=1)
        self.assertIn("bad.yaml:8:", result.stderr)
        self.assertIn("services[0].backends[1].weight", result.stderr)
        per_instance = "metrics:\n  listen: 127.0.0.1:9100\n" + version_text(3)
        result = self.push(per_instance, name="metrics.yaml", expect=1)
        self.assertIn("metrics.yaml:1:1: metrics: is per instance", result.stderr)
        self.assertEqual(self.head(), head)
        time.sleep(0.5)
        self.assertEqual(self.versions(), [head] * 3)

    def test_3_racing_pushes_never_lose_an_update(self):
        head = self.head()
        paths = []
        for i in range(2):
            paths.append(os.path.join(self.dir, "race%d.yaml" % i))
            with open(paths[-1], "w") as out:
                out.write(version_text(40 + i))
        racers = [subprocess.Popen([BERTHCTL, "fleet", "push", path, "--config", self.admin],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for path in paths]
        outcomes = [(r.returncode, out, err) for r in racers
                    for out, err in [r.communicate(timeout=90)]]
        landed = [o for o in outcomes if o[0] == 0]
        self.assertGreaterEqual(len(landed), 1, outcomes)
        for code, _, err in outcomes:
            if code != 0:
                self.assertIn("another push committed first", err)
        self.assertEqual(self.head(), head + len(landed))
        self.wait_all_on(head + len(landed))
        self.wait_fleet_agrees()

    def test_4_a_version_an_instance_cannot_apply_is_refused_there(self):
        head = self.head()
        self.push(version_text(3, extra="    egress: p9\n"), name="egress.yaml")
        deadline = time.monotonic() + 20
        while True:
            fleet = self.fleet_status()
            refused = [i for i in fleet["instances"] if i["refused_version"] == head + 1]
            if len(refused) == 3:
                break
            self.assertLess(time.monotonic(), deadline, fleet)
            time.sleep(0.1)
        self.assertRegex(refused[0]["refused_why"],
                         r"^fleet version \d+ \(.*egress.yaml\):6:13: services\[0\].egress: "
                         r"no port named 'p9'$")
        self.assertEqual(self.versions(), [head] * 3)
        self.assertEqual(self.status(0)["fleet"]["refused_version"], head + 1)
        # A reload retries the refused version (here it is refused again: the port is still
        # missing), and the local file's reload itself is applied.
        _, lines = self.fleet.berthds[0]
        refusal = "fleet version %d (" % (head + 1)
        before = sum(refusal in line and "refused" in line for line in list(lines))
        self.berthctl("reload", "--socket", self.fleet.socket(0))
        deadline = time.monotonic() + 20
        while sum(refusal in line and "refused" in line for line in list(lines)) <= before:
            self.assertLess(time.monotonic(), deadline, "".join(lines))
            time.sleep(0.05)
        self.push(version_text(4))
        self.wait_all_on(head + 2)

    def test_5_one_member_down_changes_nothing(self):
        self.fleet.stop_member(0)
        try:
            self.push(version_text(5))
            seconds, _ = self.wait_all_on(self.head())
            self.assertLess(seconds, APPLY_LIMIT_S)
            self.wait_fleet_agrees()
        finally:
            self.fleet.start_member(0)
            self.fleet.wait_members_healthy(range(3))

    def test_6_every_member_down_then_back(self):
        head = self.head()
        _, fingerprints = self.wait_all_on(head)
        fingerprint = fingerprints[0]["web"]
        for i in range(3):
            self.fleet.stop_member(i)
        deadline = time.monotonic() + 20
        while any(self.status(i)["fleet"]["etcd_reachable"] for i in range(3)):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        # Serving continues on the version in force.
        for i in range(3):
            status = self.status(i)
            self.assertEqual(status["fleet"]["version"], head)
            self.assertEqual(status["tables"][0]["fingerprint"], fingerprint)
        # A berthd started now serves its cached version, and says so.
        self.fleet.stop_berthd(2)
        self.fleet.start_berthd(2)
        status = self.status(2)
        self.assertEqual(status["fleet"]["version"], head)
        self.assertTrue(status["fleet"]["from_cache"])
        self.assertEqual(status["tables"][0]["fingerprint"], fingerprint)
        self.assertIn("from the cache", self.berthctl(
            "status", "--socket", self.fleet.socket(2)).stdout)
        # etcd back: every instance registers again, and the next push reaches all of them.
        for i in range(3):
            self.fleet.start_member(i)
        self.fleet.wait_members_healthy(range(3))
        self.wait_fleet_agrees()
        deadline = time.monotonic() + 10
        while self.status(2)["fleet"]["from_cache"]:
            self.assertLess(time.monotonic(), deadline, "lb-2 still says it serves its cache")
            time.sleep(0.05)
        self.push(version_text(6))
        seconds, fingerprints = self.wait_all_on(head + 1)
        self.assertEqual(len({json.dumps(f, sort_keys=True) for f in fingerprints}), 1)
        self.wait_fleet_agrees()


if __name__ == "__main__":
    unittest.main(verbosity=2)
