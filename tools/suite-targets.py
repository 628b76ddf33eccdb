#!/usr/bin/python3
"""Prints the ninja targets that the tests of the given meson suites run, one per line, relative
to the build directory: what `ninja -C BUILD_DIR` must build before `meson test --no-rebuild
--suite ...` runs those suites, and nothing else. Libraries come with the programs that link
them.

Usage: suite-targets.py BUILD_DIR SUITE [SUITE ...]
"""
import json
import os
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, suites = os.path.abspath(sys.argv[1]), set(sys.argv[2:])
    introspection = json.loads(subprocess.run(
        ["meson", "introspect", build, "--tests", "--targets"], check=True,
        capture_output=True, text=True).stdout)
    wanted = set()
    for test in introspection["tests"]:
        # Suites are "project:suite".
        if suites & {name.split(":", 1)[-1] for name in test["suite"]}:
            wanted.update(test["depends"])
    if not wanted:
        sys.exit("suite-targets.py: no test in suite(s) %s" % ", ".join(sorted(suites)))
    for target in introspection["targets"]:
        if target["id"] in wanted:
            for filename in target["filename"]:
                print(os.path.relpath(filename, build))


if __name__ == "__main__":
    main()
