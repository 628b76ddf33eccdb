#!/usr/bin/env python3
"""The GNU conventions every berth program keeps, which scripts and package checks rely on:
`--help` and `--version` print to stdout, nothing to stderr, and exit 0, wherever they stand on
the command line (after berthd's and berthgen's "--" too), without starting an EAL. One flag
style across the four programs (words joined by hyphens; berthd's, berthctl's and
berth-announcer's old underscore spellings still taken, with a note), and "did you mean" for a
mistyped flag or berthctl command instead of pages of usage.

Also the manual pages and berthctl's bash completion the build writes from those --help texts
(tools/man/manpage.py): every page renders without a groff warning, berthctl(8) lists every
command berthctl's --help does, berth.yaml(5) every top-level section of the example config, and
the completion offers berthctl's commands and flags.

Usage: program_conventions_test.py VERSION BERTHD BERTHCTL BERTHGEN BERTH_ANNOUNCER MAN_DIR
       EXAMPLE_YAML
"""
import os
import re
import subprocess
import sys
import unittest

VERSION = sys.argv.pop(1)
PROGRAMS = {os.path.basename(path): path for path in sys.argv[1:5]}
MAN_DIR = sys.argv[5]
EXAMPLE = sys.argv[6]
del sys.argv[1:7]
PAGES = ["berthd.8", "berthctl.8", "berthgen.1", "berth-announcer.8", "berth.yaml.5"]


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

    def test_flags_are_spelled_with_hyphens_and_a_typo_gets_the_nearest(self):
        berthd, berthctl = PROGRAMS["berthd"], PROGRAMS["berthctl"]
        announcer, berthgen = PROGRAMS["berth-announcer"], PROGRAMS["berthgen"]
        for program in PROGRAMS.values():
            with self.subTest(program=program):
                flags = re.findall(r"^  --([\w-]+)", run(program, "--help").stdout, re.M)
                self.assertTrue(flags)
                self.assertEqual([f for f in flags if "_" in f], [], "no underscore spellings")
        # A typo: one line naming the nearest flag, exit 1, no usage.
        cases = [
            ([berthd, "--control-sockt", "x"], "berthd: unknown flag --control-sockt; did you mean "
                                               "--control-socket?\n"),
            ([berthctl, "--control-socket", "x", "status"],
             "berthctl: unknown flag --control-socket; did you mean --socket?\n"),
            ([announcer, "--routes_dri", "x"],
             "berth-announcer: unknown flag --routes_dri; did you mean --routes-dir?\n"),
            ([berthgen, "--no-huge", "--", "--tx_dev", "x"],
             "berthgen: unknown option '--tx_dev'; did you mean --tx-dev?\n"),
        ]
        for argv, expected in cases:
            with self.subTest(argv=argv):
                result = run(*argv)
                self.assertEqual(result.returncode, 1)
                self.assertEqual(result.stderr, expected)
        # The old spelling still works, with a note.
        result = run(berthctl, "--max_failures", "3", "--socket", "/nonexistent.sock", "status")
        self.assertIn("berthctl: --max_failures is now spelled --max-failures; the old spelling "
                      "will go in a later release\n", result.stderr)
        self.assertIn("no control socket at /nonexistent.sock", result.stderr)

    def test_a_mistyped_command_gets_did_you_mean_not_the_usage(self):
        result = run(PROGRAMS["berthctl"], "statsu")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, "berthctl: unknown command 'statsu'; did you mean 'stats'? "
                                        "(berthctl --help lists every command)\n")
        result = run(PROGRAMS["berthctl"])
        self.assertEqual(result.returncode, 1)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn("expected a command: check, table, analyze", result.stderr)

    def test_help_lists_each_programs_own_flags_with_their_help(self):
        berthd = run(PROGRAMS["berthd"], "--help").stdout
        self.assertIn("  --config\n      path of the YAML config (required)\n", berthd)
        self.assertIn("  --control-socket (default /run/berth/berth.sock)", berthd)
        self.assertNotIn("--flagfile", berthd, "absl's own flags are not berthd's")
        berthctl = run(PROGRAMS["berthctl"], "--help").stdout
        self.assertIn("check   --config FILE", berthctl)
        self.assertIn("  --socket (default /run/berth/berth.sock)", berthctl)
        self.assertIn("  --routes-dir", run(PROGRAMS["berth-announcer"], "--help").stdout)
        self.assertIn("--tx-dev DEVICE", run(PROGRAMS["berthgen"], "--help").stdout)

    def test_version_prints_name_and_version_and_exits_0(self):
        for name, path in PROGRAMS.items():
            with self.subTest(program=name):
                result = run(path, "--version")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout, "%s %s\n" % (name, VERSION))
                self.assertEqual(result.stderr, "")


class ManualPages(unittest.TestCase):
    def render(self, page):
        result = subprocess.run(["man", "--warnings", "-l", os.path.join(MAN_DIR, page)],
                                capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "", page)
        return re.sub(".\b", "", result.stdout)  # grotty's overstrikes, for a terminal

    def test_every_page_renders_without_a_warning(self):
        for page in PAGES:
            with self.subTest(page=page):
                text = self.render(page)
                for section in ("NAME", "SYNOPSIS", "DESCRIPTION"):
                    self.assertIn(section, text)

    def test_berthctls_page_lists_every_command_of_its_help(self):
        help_text = run(PROGRAMS["berthctl"], "--help").stdout
        commands = set(re.findall(r"(?m)^  ([a-z][a-z-]+)\b", help_text))
        self.assertGreaterEqual(len(commands), 15)
        page = " ".join(self.render("berthctl.8").split())
        for command in commands:
            self.assertRegex(page, r"\b%s\b" % re.escape(command))

    def test_the_config_page_has_every_section_of_the_example(self):
        with open(EXAMPLE) as f:
            sections = re.findall(r"(?m)^(?:# )?([a-z_]+):$", f.read())
        self.assertGreaterEqual(len(sections), 5, sections)
        page = self.render("berth.yaml.5")
        for section in sections:
            self.assertRegex(page, r"(?m)^%s$" % section.upper())

    def test_the_completion_offers_commands_and_flags(self):
        script = os.path.join(MAN_DIR, "berthctl")

        def complete(*words):
            line = 'source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _berthctl; echo "${COMPREPLY[@]}"' % (
                script, " ".join(words), len(words) - 1)
            return run("bash", "-c", line).stdout.split()

        self.assertEqual(complete("berthctl", "che"), ["check"])
        self.assertIn("drain", complete("berthctl", "dr"))
        self.assertEqual(complete("berthctl", "fleet", "p"), ["push"])
        self.assertIn("--config", complete("berthctl", "analyze", "--con"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
