#!/usr/bin/env bash
# Configures (once) and builds berth into ./build; with --sanitize an AddressSanitizer + UBSan
# build into ./build-asan holding what the unit and integration suites run (build the rest
# with `ninja -C build-asan`); with --demo berthd, berthctl and berthgen alone into
# ./build-demo, without the tests. Assumes tools/install-deps.sh has run (with --demo for the
# last).
#
# Meson compiles through ccache when it is installed (install-deps.sh installs it). The cache
# is keyed on paths relative to this checkout, so a fresh clone elsewhere on the same machine
# (CI's) finds what an earlier build compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
if [[ ${1:-} == --sanitize ]]; then
  # -O1, as AddressSanitizer's own documentation suggests, with asserts, and -g1: line tables
  # and function names, all that a sanitizer's report and the suppressions use. On four sources
  # of this tree, debugoptimized's "-O2 -g" took 127 s of CPU, "-O2 -g1" 78 and "-O1 -g1" 55.
  if [[ ! -f build-asan/build.ninja ]]; then
    meson setup build-asan --buildtype=plain -Doptimization=1 -Db_ndebug=false \
      -Db_sanitize=address,undefined -Db_lundef=false -Dcpp_args=-g1
  fi
  mapfile -t targets < <(/usr/bin/python3 tools/suite-targets.py build-asan unit integration)
  ninja -C build-asan "${targets[@]}"
  exit
fi
if [[ ${1:-} == --demo ]]; then
  # The programs alone, without the tests and benchmarks, in a build folder of their own, at
  # -O1 without asserts, which the demo's 1 Mpps does not notice. Its 127 sources are most of
  # the demo's time on a fresh 2-CPU machine: 4 min 23 s at -O3, 4 min 9 s at -O1 (headers
  # dominate: config/loader.cc alone takes 12.0 s at -O3, 11.1 at -O2, 7.8 at -O1).
  if [[ ! -f build-demo/build.ninja ]]; then
    meson setup build-demo --buildtype=plain -Doptimization=1 -Db_ndebug=true -Dtests=false
  fi
  ninja -C build-demo src/berthd tools/berthctl tools/berthgen
  exit
fi
# Debian's hardening flags (dpkg-buildflags with hardening=+all on bookworm; PIE is the
# compiler's default there), so that the build every test and benchmark runs is the one the
# package ships. docs/performance.md gives what they cost the pipeline.
hardening=(
  -Dcpp_args="-fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wformat -Werror=format-security"
  -Dc_args="-fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wformat -Werror=format-security"
  -Dcpp_link_args="-Wl,-z,relro -Wl,-z,now"
  -Dc_link_args="-Wl,-z,relro -Wl,-z,now"
)
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release --prefix=/usr --sysconfdir=/etc "${hardening[@]}"
else
  # A build folder configured before the flags: given them once (a full rebuild).
  meson configure build "${hardening[@]}" >/dev/null
fi
ninja -C build
