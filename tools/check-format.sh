#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++ source differs from what clang-format makes of it
# with the repository's .clang-format. tools/test.sh runs it first; run it with --fix to rewrite
# the files in place.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t sources < <(git ls-files '*.cc' '*.h')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${sources[@]}"
  exit
fi
drifted=()
for file in "${sources[@]}"; do
  if ! clang-format "$file" | cmp -s - "$file"; then drifted+=("$file"); fi
done
if ((${#drifted[@]})); then
  echo "check-format: ${#drifted[@]} file(s) differ from clang-format (tools/check-format.sh --fix):" >&2
  printf '  %s\n' "${drifted[@]}" >&2
  exit 1
fi
echo "check-format: ${#sources[@]} files formatted"
