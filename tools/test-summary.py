#!/usr/bin/python3
"""The closing lines of tools/test.sh: the wall time of each phase, the ten slowest tests of each
suite in each build, every skipped case with its reason, and one line "N passed, N failed, N
skipped". Exits non-zero if a test case failed or a case was skipped for a reason that the
README's install does not explain (EXPLAINED_SKIPS; docs/testing.md lists them).

A skip is found three ways: a meson test that exited 77 (its reason is the last line it printed),
a gtest case that called GTEST_SKIP (JUnit), and a Python unittest case or class reported as
"... skipped 'reason'" in a test's verbose output.

Usage: test-summary.py PHASE_TIMES BUILD_DIR[=LABEL] [BUILD_DIR[=LABEL] ...]
PHASE_TIMES holds one "NAME<TAB>SECONDS" line per phase, in order.
"""
import collections
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# Skips the README's install explains: (pattern matched against the reason, why it is allowed).
EXPLAINED_SKIPS = [
    (re.compile(r"/dev/vhost-net"),
     "the kernel has no vhost-net, as on a VM or container without the module (README, Test; "
     "docs/testing.md)"),
]
SLOWEST = 10
# unittest prints the reason as repr() does: in double quotes when it holds a single one.
UNITTEST_SKIP = re.compile(r"^(?P<case>.*?) \.\.\. skipped (?P<quote>['\"])(?P<reason>.*)(?P=quote)$")
UNITTEST_TOTAL = re.compile(r"^(?:OK|FAILED) \(.*\bskipped=(?P<skipped>\d+)")


def minutes(seconds):
    return "%d:%02d" % divmod(int(round(seconds)), 60)


def read_log(build):
    path = os.path.join(build, "meson-logs", "testlog.json")
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [json.loads(line) for line in log if line.strip()]


def unittest_skips(test):
    """The Python unittest cases a test's verbose output reports skipped: (case, reason)."""
    lines = (test.get("stdout") or "").splitlines() + (test.get("stderr") or "").splitlines()
    skips = []
    for number, line in enumerate(lines):
        match = UNITTEST_SKIP.match(line)
        if not match:
            continue
        case = match.group("case")
        # A case with a docstring prints "name (module.Class.name)" on the line before.
        if "(" not in case and number > 0:
            case = lines[number - 1].strip()
        skips.append((case, match.group("reason")))
    # unittest's own count, so that a skip whose line was not recognised still shows.
    counted = sum(int(m.group("skipped")) for m in map(UNITTEST_TOTAL.match, lines) if m)
    if counted > len(skips):
        skips.append(("%d case(s)" % (counted - len(skips)),
                      "unittest counted skips whose lines this summary did not recognise"))
    return skips


def skips_of(test):
    if test["result"] == "SKIP":
        printed = [l for l in (test.get("stdout") or "").splitlines() if l.strip()]
        return [("the whole test", printed[-1] if printed else "exit status 77, no reason given")]
    return unittest_skips(test)


def junit_counts(build):
    """passed, failed and gtest-skipped cases from meson's JUnit log."""
    passed = failed = 0
    skipped = []
    path = os.path.join(build, "meson-logs", "testlog.junit.xml")
    if not os.path.exists(path):
        return passed, failed, skipped
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped.append(case)
        else:
            passed += 1
    return passed, failed, skipped


def explanation(reason):
    for pattern, why in EXPLAINED_SKIPS:
        if pattern.search(reason):
            return why
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    times_path, builds = sys.argv[1], []
    for argument in sys.argv[2:]:
        directory, _, label = argument.partition("=")
        builds.append((directory, label or directory))

    print("\n== Phase times")
    total = 0
    if os.path.exists(times_path):
        with open(times_path) as times:
            for line in times:
                name, seconds = line.rstrip("\n").rsplit("\t", 1)
                total += int(seconds)
                print("  %-18s %7s" % (name, minutes(int(seconds))))
    print("  %-18s %7s" % ("total", minutes(total)))

    passed = failed = 0
    skips = []  # (build label, test, case, reason)
    for directory, label in builds:
        tests = read_log(directory)
        # Meson's JUnit log repeats a whole test's skip as a case; it is listed from the test.
        skipped_tests = {name for t in tests if t["result"] == "SKIP"
                         for name in (t["name"], t["name"].split(" / ")[-1])}
        by_suite = collections.defaultdict(list)
        for test in tests:
            suite = test["name"].split(" / ")[0].split(":", 1)[-1]
            by_suite[suite].append(test)
            for case, reason in skips_of(test):
                skips.append((label, test["name"].split(" / ")[-1], case, reason))
        if tests:
            print("\n== The %d slowest tests of each suite, %s build" % (SLOWEST, label))
        for suite in sorted(by_suite):
            ranked = sorted(by_suite[suite], key=lambda t: -t["duration"])[:SLOWEST]
            spent = sum(t["duration"] for t in by_suite[suite])
            print("  %s (%d tests, %s in all)" % (suite, len(by_suite[suite]), minutes(spent)))
            for test in ranked:
                print("    %7.1f s  %-4s %s" % (test["duration"], test["result"],
                                               test["name"].split(" / ")[-1]))
        build_passed, build_failed, gtest_skipped = junit_counts(directory)
        passed += build_passed
        failed += build_failed
        for case in gtest_skipped:
            element = case.find("skipped")
            reason = (element.get("message") or element.text or "").strip() or "GTEST_SKIP"
            if case.get("name") not in skipped_tests:
                skips.append((label, case.get("classname"), case.get("name"), reason))

    unexplained = 0
    print("\n== Skipped cases: %d" % len(skips))
    for label, test, case, reason in skips:
        why = explanation(reason)
        unexplained += why is None
        print("  %s: %s: %s\n    reason: %s\n    %s" % (
            label, test, case, reason,
            "explained: " + why if why else "NOT EXPLAINED by the README's install: a failure"))
    print("\n%d passed, %d failed, %d skipped%s" % (
        passed, failed, len(skips),
        " (%d not explained)" % unexplained if unexplained else ""))
    return 1 if failed or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
