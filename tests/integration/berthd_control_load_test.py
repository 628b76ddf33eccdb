#!/usr/bin/python3
"""berthd's management loop never waits on a client: while each of these loads runs, `announce`
on the read-only socket and `status` on the control socket are answered every time, each within
a loose 1 s (a shared 2-CPU VM cannot miss that by chance; the figures are printed):
  - a slow reader of a 655,373-slot table (4 KiB every 0.5 s), which berthd cuts at its reply
    deadline, while a normal reader gets the whole table;
  - 200 idle connections to the control socket;
  - 100 idle connections to the metrics port from another user (nobody), while root's scrapes
    still succeed;
  - 60 parallel scrapes;
  - a reload to 65,535 backends, parsed and built off the management loop;
  - with 65,535 backends, `backends` and `stats` asked in a loop on the control socket, `stats`
    on the read-only socket by another user, and scrapes: each reply 9 to 31 MB, rendered off
    the management loop.
The read-only socket is mode 0666 and refuses commands that change anything. berthd runs on a
net_null vdev; the loads are tests/support/control_load.py's, each a process of its own.

Usage: berthd_control_load_test.py BERTHD
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import control_load  # noqa: E402
from control_load import BIG_TABLE, ask, scrape  # noqa: E402

BERTHD = sys.argv.pop(1)
LATENCY_BOUND_S = 1.0


class BerthdControlLoad(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.berthd = control_load.Berthd(BERTHD, "berth-control-load-%d" % os.getpid())

    @classmethod
    def tearDownClass(cls):
        cls.berthd.stop()

    def probe(self):
        probe = control_load.Probe(self.berthd.read_only, self.berthd.control)
        probe.start()
        return probe

    def check(self, probe, load):
        probe.stop()
        for command, figures in probe.summary().items():
            print("%s: %s over %d requests: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
                load, command, figures["requests"], figures["p50_ms"], figures["p99_ms"],
                figures["max_ms"]), file=sys.stderr)
            self.assertGreater(figures["requests"], 10, "%s: the probe ran" % load)
            self.assertLess(figures["max_ms"], 1000 * LATENCY_BOUND_S,
                            "%s: %s took %.0f ms" % (load, command, figures["max_ms"]))
        self.assertEqual(probe.failures, [], "%s: every request answered" % load)

    def test_read_only_socket_serves_anyone_and_changes_nothing(self):
        read_only, control = self.berthd.read_only, self.berthd.control
        self.assertEqual(os.stat(read_only).st_mode & 0o777, 0o666)
        self.assertEqual(os.stat(control).st_mode & 0o777, 0o600)
        self.assertTrue(ask(read_only, "status")["ok"])
        self.assertTrue(ask(read_only, "stats")["ok"])
        refused = ask(read_only, "drain", backend="big-1")
        self.assertFalse(refused["ok"])
        self.assertIn("serves only status, stats, announce", refused["error"])
        self.assertEqual(ask(control, "status")["drained"], [])

    def test_a_slow_reader_of_a_big_table_stalls_only_itself(self):
        cut_before = self.berthd.endpoint_count("control", "cut_at_deadline")
        # 12 s of reading 4 KiB every 0.5 s: berthd cuts it at its reply deadline (10 s). What
        # the kernel already holds for it stays readable after that.
        slow = self.berthd.start_load("slow", self.berthd.control, "big", 12)
        probe = self.probe()
        whole = self.berthd.start_load("tables", self.berthd.control, "big", BIG_TABLE, 0)
        self.assertEqual(whole.wait(timeout=60), 0)
        print(whole.stdout.read().strip(), file=sys.stderr)
        self.assertEqual(slow.wait(timeout=60), 0)
        received = int(slow.stdout.read().split()[2])
        self.check(probe, "a slow reader of a %d-slot table" % BIG_TABLE)
        self.assertEqual(self.berthd.endpoint_count("control", "cut_at_deadline"), cut_before + 1,
                         "berthd cut the slow reader at its deadline")
        self.assertLess(received, 4 << 20, "the slow reader did not get the whole table")

    def test_idle_control_clients_lock_nobody_out(self):
        load = self.berthd.start_load("idle", "unix", self.berthd.control, 200, 4)
        self.assertEqual(load.stdout.readline().strip(), "holding 200")
        probe = self.probe()
        time.sleep(3)
        self.check(probe, "200 idle control clients")
        load.wait(timeout=30)

    def test_idle_metrics_clients_from_another_user_lock_no_scrape_out(self):
        endpoint = self.berthd.url[len("http://"):-len("/metrics")]
        load = self.berthd.start_load("idle", "tcp", endpoint, 100, 4, user=65534)  # nobody
        self.assertEqual(load.stdout.readline().strip(), "holding 100")
        probe = self.probe()
        scrape_times = []
        for _ in range(20):
            started = time.monotonic()
            status, body = scrape(self.berthd.url)
            scrape_times.append(time.monotonic() - started)
            self.assertEqual(status, 200)
            self.assertIn(b"berth_backend_slots", body)
            time.sleep(0.1)
        self.check(probe, "100 idle metrics clients from another user")
        print("root's scrapes meanwhile: max %.1f ms" % (1000 * max(scrape_times)), file=sys.stderr)
        self.assertLess(max(scrape_times), LATENCY_BOUND_S)
        load.wait(timeout=30)

    def test_parallel_scrapes_delay_no_control_request(self):
        load = self.berthd.start_load("scrapes", self.berthd.url, 60, 3)
        probe = self.probe()
        load.wait(timeout=60)
        self.check(probe, "60 parallel scrapes")
        self.assertEqual(load.stdout.read().strip(), "scrape failures: 0")
        self.assertGreater(self.berthd.endpoint_count("metrics", "answered"), 60)

    def test_reload_of_65535_backends_is_built_off_the_loop(self):
        berthd = self.berthd
        berthd.write_config(control_load.config_with_backends(berthd.prefix, 65535))
        probe = self.probe()
        replies = []
        started = time.monotonic()
        asking = threading.Thread(target=lambda: replies.append(
            ask(berthd.control, "reload", timeout=60)))
        asking.start()
        asking.join(timeout=90)
        took = time.monotonic() - started
        self.check(probe, "a reload to 65,535 backends (%.1f s)" % took)
        self.assertEqual(len(replies), 1)
        self.assertTrue(replies[0]["ok"], replies[0])
        self.assertEqual(ask(berthd.control, "status")["backends"], 65535)
        # Back to the three backends the other tests know.
        berthd.write_config(control_load.CONFIG % (berthd.prefix, BIG_TABLE))
        self.assertTrue(ask(berthd.control, "reload", timeout=60)["ok"])
        self.assertEqual(ask(berthd.control, "status")["backends"], 3)

    def test_per_backend_replies_of_65535_backends_are_rendered_off_the_loop(self):
        berthd = self.berthd
        berthd.write_config(control_load.config_with_backends(berthd.prefix, 65535))
        self.assertTrue(ask(berthd.control, "reload", timeout=60)["ok"])
        try:
            probe = self.probe()
            seconds = 6
            loads = [
                berthd.start_load("replies", "backends", berthd.control, 65535, seconds),
                berthd.start_load("replies", "backends", berthd.control, 65535, seconds),
                berthd.start_load("replies", "stats", berthd.control, 65535, seconds),
                berthd.start_load("replies", "stats", berthd.read_only, 65535, seconds,
                                  user=65534),
                berthd.start_load("replies", "scrape", berthd.url, 65535, seconds),
            ]
            outputs = [load.communicate(timeout=120)[0] for load in loads]
            self.check(probe, "per-backend replies of 65,535 backends")
            for load, output in zip(loads, outputs):
                self.assertEqual(load.returncode, 0, output)
                print(output.strip(), file=sys.stderr)
        finally:
            berthd.write_config(control_load.CONFIG % (berthd.prefix, BIG_TABLE))
            self.assertTrue(ask(berthd.control, "reload", timeout=60)["ok"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
