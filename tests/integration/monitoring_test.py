#!/usr/bin/python3
"""The monitoring berth ships (config/monitoring, installed in /usr/share/berth/monitoring):
  1. every metric the Grafana dashboard and the Prometheus alert rules name (in their queries
     and in the words they show an operator) is one a live berthd exports: a fleet member with
     a metrics endpoint, scraped here;
  2. promtool checks the rules, and `promtool test rules` makes each alert fire and not fire
     (tests/monitoring/berth-alerts_test.yaml);
  3. Grafana is not in Debian 12, so the dashboard is checked as JSON Grafana imports: unique
     panel ids, each panel placed on the 24-column grid, each query with a data source and a
     refId, and the variables its queries use defined.

Usage: monitoring_test.py BERTHD BERTHCTL SOURCE_ROOT
"""
import json
import os
import re
import subprocess
import sys
import time
import unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from control_load import scrape, wait_for_line  # noqa: E402
from fleet_cluster import FleetCluster, version_text  # noqa: E402

BERTHD, BERTHCTL, SOURCE_ROOT = sys.argv[1:4]
del sys.argv[1:4]
MONITORING = os.path.join(SOURCE_ROOT, "config", "monitoring")
DASHBOARD = os.path.join(MONITORING, "berth-dashboard.json")
RULES = os.path.join(MONITORING, "berth-alerts.yaml")
RULE_TESTS = os.path.join(SOURCE_ROOT, "tests", "monitoring", "berth-alerts_test.yaml")
METRIC = re.compile(r"\bberth_[a-z0-9_]+")


def dashboard_queries(dashboard):
    """Every query of the dashboard: panels' targets, variables and annotations."""
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    queries += [annotation["expr"] for annotation in dashboard["annotations"]["list"]]
    return queries


def rule_texts(rules):
    """Each alert's query and the words it shows."""
    texts = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            texts.append(rule["expr"])
            texts += rule.get("annotations", {}).values()
    return texts


class Monitoring(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = FleetCluster(BERTHD, BERTHCTL, tls=False, members=1,
                                   extra_local='metrics: { listen: "127.0.0.1:0" }\n')
        pushed = cls.cluster.push(version_text(2))
        assert pushed.returncode == 0, pushed.stderr
        cls.cluster.start_berthd(0)
        process, lines = cls.cluster.berthds[0]
        cls.url = re.search(r"metrics: (http://\S+)",
                            wait_for_line(lines, process, "metrics: http://")).group(1)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def exported(self):
        """The metric families berthd exports, once its ports have been read and it has
        applied the fleet's version."""
        deadline = time.monotonic() + 20
        while True:
            status, body = scrape(self.url)
            self.assertEqual(status, 200)
            text = body.decode()
            families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
            if ("berth_port_link_up" in families and "berth_fleet_version" in families
                    and re.search(r"^berth_fleet_version [1-9]", text, re.M)):
                return families
            self.assertLess(time.monotonic(), deadline, "berthd's metrics never settled:\n" + text)
            time.sleep(0.2)

    def test_every_metric_named_is_one_berthd_exports(self):
        exported = self.exported()
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        with open(RULES) as f:
            rules = yaml.safe_load(f)
        for source, texts in (("dashboard", dashboard_queries(dashboard)),
                              ("alert rules", rule_texts(rules))):
            named = {name for text in texts for name in METRIC.findall(text)}
            self.assertGreater(len(named), 10, source)
            self.assertEqual(named - exported, set(), "%s names what berthd does not export" % source)

    def test_promtool_checks_the_rules_and_their_tests_pass(self):
        checked = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True,
                                 text=True, timeout=60)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertIn("SUCCESS: 12 rules found", checked.stdout)
        tested = subprocess.run(["promtool", "test", "rules", RULE_TESTS], capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(tested.returncode, 0, tested.stdout + tested.stderr)
        # Every alert is tested, firing and quiet.
        with open(RULES) as f:
            alerts = {rule["alert"] for group in yaml.safe_load(f)["groups"] for rule in group["rules"]}
        with open(RULE_TESTS) as f:
            cases = [case for test in yaml.safe_load(f)["tests"] for case in test["alert_rule_test"]]
        for alert in alerts:
            with self.subTest(alert=alert):
                self.assertTrue(any(c["alertname"] == alert and c["exp_alerts"] for c in cases))
                self.assertTrue(any(c["alertname"] == alert and not c["exp_alerts"] for c in cases))

    def test_the_dashboard_is_json_grafana_imports(self):
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        self.assertEqual(dashboard["uid"], "berth-overview")
        ids = [panel["id"] for panel in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")
        variables = {variable["name"] for variable in dashboard["templating"]["list"]}
        for panel in dashboard["panels"]:
            with self.subTest(panel=panel["title"]):
                grid = panel["gridPos"]
                self.assertLessEqual(grid["x"] + grid["w"], 24)
                self.assertGreater(grid["h"], 0)
                if panel["type"] == "row":
                    continue
                self.assertTrue(panel["targets"])
                for target in panel["targets"]:
                    self.assertEqual(target["datasource"]["uid"], "${datasource}")
                    self.assertRegex(target["refId"], r"^[A-Z]$")
                    for variable in re.findall(r"\$(\w+)", target["expr"]):
                        if not variable.startswith("__"):
                            self.assertIn(variable, variables)


if __name__ == "__main__":
    unittest.main(verbosity=2)
