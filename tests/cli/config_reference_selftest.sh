#!/usr/bin/env bash
# config_reference_selftest.sh — the doc check of scripts/config_reference.py fails, with a
# diff naming the key and the command that regenerates the doc, when docs/configuration.md
# and a key table disagree; and --write puts the table back.
set -euo pipefail
relay=${1:?usage: config_reference_selftest.sh rtcedge-relay rtcedge-transceiver}
transceiver=${2:?usage: config_reference_selftest.sh rtcedge-relay rtcedge-transceiver}
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../scripts/config_reference.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() { /usr/bin/python3 "$script" --relay "$relay" --transceiver "$transceiver" --doc "$work/doc.md" "$@"; }

# A default edited in the doc only, one in each binary's section.
for key in flows.capacity sessions.drain_timeout; do
  sed -E "s/^(\| \`$key\` \|[^|]*\| )\`[^\`]*\`/\1\`42\`/" "$here/../../docs/configuration.md" >"$work/doc.md"
  if cmp -s "$work/doc.md" "$here/../../docs/configuration.md"; then echo "FAIL: could not edit $key"; exit 1; fi
  if out=$(check --check); then echo "FAIL: --check passed with an edited $key"; exit 1; fi
  grep -q -- "-| \`$key\`" <<<"$out" || { echo "FAIL: the diff does not show $key"; echo "$out"; exit 1; }
  grep -q -- "--write" <<<"$out" || { echo "FAIL: no regenerate command"; echo "$out"; exit 1; }
  check --write
  check --check >/dev/null || { echo "FAIL: --write did not restore $key"; exit 1; }
  echo "ok   an edited $key fails the check; --write restores it"
done

# A section without markers is an error too.
grep -v "BEGIN GENERATED: rtcedge-relay" "$here/../../docs/configuration.md" >"$work/doc.md"
if check --check >/dev/null; then echo "FAIL: --check passed without markers"; exit 1; fi
echo "ok   missing markers fail the check"
