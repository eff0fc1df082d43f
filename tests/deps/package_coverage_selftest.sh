#!/usr/bin/env bash
# package_coverage_selftest.sh — proves package_coverage_test.sh can fail: for a few packages
# that install-deps.sh installs, a copy of install-deps.sh without that package must make
# the coverage test fail and name the program and the package. (A package that a listed one
# depends on, such as redis-tools under redis-server, is covered without being listed.)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
install_deps="$here/../../scripts/install-deps.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for pair in bpftool:bpftool nft:nftables chromium:chromium ethtool:ethtool; do
  program="${pair%%:*}" package="${pair#*:}"
  # Drop the package as a whole word inside the packages=( ... ) array.
  sed -E "/^packages=\(/,/^\)/ s/(^|[[:space:]])${package}([[:space:]]|\$)/\1\2/" "$install_deps" >"$work/install-deps.sh"
  if cmp -s "$install_deps" "$work/install-deps.sh"; then
    echo "FAIL: $package is not in install-deps.sh's packages; update this self-test"
    status=1
    continue
  fi
  out="$("$here/package_coverage_test.sh" --install-deps "$work/install-deps.sh" 2>&1)"
  rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q "^FAIL: \(/usr/bin/\)\{0,1\}$program .*'$package'" <<<"$out"; then
    echo "FAIL: without $package the coverage test exited $rc and did not name $program and $package:"
    echo "$out"
    status=1
  else
    echo "ok: without $package: $(grep -E "^FAIL: (/usr/bin/)?$program " <<<"$out" | head -1)"
  fi
done
exit $status
