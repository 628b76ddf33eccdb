#!/usr/bin/env python3
"""The GNU conventions every berth program keeps, which scripts and package checks rely on:
`--help` and `--version` print to stdout, nothing to stderr, and exit 0, wherever they stand on
the command line (after berthd's and berthgen's "--" too), without starting an EAL.

Usage: program_conventions_test.py VERSION BERTHD BERTHCTL BERTHGEN BERTH_ANNOUNCER
"""
import os
import subprocess
import sys
import unittest

VERSION = sys.argv.pop(1)
PROGRAMS = {os.path.basename(path): path for path in sys.argv[1:5]}
del sys.argv[1:5]


def run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30)


class Conventions(unittest.TestCase):
    def test_help_prints_usage_to_stdout_and_exits_0(self):
        for name, path in PROGRAMS.items():
            for argv in ([path, "--help"], [path, "--", "--help"]):
                with self.subTest(argv=argv):
                    result = run(*argv)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertEqual(result.stderr, "")
                    self.assertIn(name, result.stdout)
                    self.assertIn("--help", result.stdout)
                    self.assertIn("--version", result.stdout)

    def test_help_lists_each_programs_own_flags_with_their_help(self):
        berthd = run(PROGRAMS["berthd"], "--help").stdout
        self.assertIn("  --config\n      path of the YAML config (required)\n", berthd)
        self.assertIn("  --control_socket (default /run/berth/berth.sock)", berthd)
        self.assertNotIn("--flagfile", berthd, "absl's own flags are not berthd's")
        berthctl = run(PROGRAMS["berthctl"], "--help").stdout
        self.assertIn("check   --config FILE", berthctl)
        self.assertIn("  --socket (default /run/berth/berth.sock)", berthctl)
        self.assertIn("  --routes_dir", run(PROGRAMS["berth-announcer"], "--help").stdout)
        self.assertIn("--tx-dev DEVICE", run(PROGRAMS["berthgen"], "--help").stdout)

    def test_version_prints_name_and_version_and_exits_0(self):
        for name, path in PROGRAMS.items():
            with self.subTest(program=name):
                result = run(path, "--version")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout, "%s %s\n" % (name, VERSION))
                self.assertEqual(result.stderr, "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
