#!/usr/bin/env bash
# Builds berth's Debian package (debian/) from the release build, as `dpkg-buildpackage -us -uc
# -b` does, into build/package/berth_VERSION_amd64.deb, and runs lintian over it: an error fails.
# Assumes tools/install-deps.sh has run; builds berth first if it is not built.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/package
dpkg-buildpackage -us -uc -b
mkdir -p "$out"
version=$(dpkg-parsechangelog -S Version)
for file in "berth_${version}_amd64.deb" "berth_${version}_amd64.buildinfo" \
  "berth_${version}_amd64.changes"; do
  mv -f "../$file" "$out/"
done
# Errors fail the build; warnings and information tags are printed for the reader.
lintian -I --fail-on error --no-tag-display-limit "$out/berth_${version}_amd64.deb"
echo "package: $out/berth_${version}_amd64.deb"
