#!/usr/bin/env bash
# fresh-machine-check.sh — runs the README's two commands on a machine that has only
# Debian 12, root and the repository: a debootstrap root file system from this machine's
# configured Debian mirror, bind-mounted onto itself (ip netns needs / to be a mount
# point), with /proc, /sys and /dev mounted, the npm config and its CA file copied in.
# A green CI on a long-lived machine proves nothing about install steps; this does.
#
#   scripts/fresh-machine-check.sh [ROOT_DIR] [test.sh arguments...]
#
# ROOT_DIR (default /var/tmp/rtcedge-fresh) is created once and reused; delete it to start
# over from nothing. The repository's committed HEAD is cloned into it, so uncommitted
# changes are not part of the check. Every mount is removed on exit, also on failure.
# Not part of CI (minutes of apt and a full build); the closing notes record its timings.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-/var/tmp/rtcedge-fresh}"
shift || true
[[ $(id -u) -eq 0 ]] || { echo "fresh-machine-check: needs root (debootstrap, mount, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-machine-check: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }

mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
mirror="${mirror:-http://deb.debian.org/debian}"
if [[ ! -x $root/bin/bash ]]; then
  echo "== debootstrap bookworm from $mirror into $root =="
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
# The same suites as this machine (updates and security carry today's chromium).
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/debian.sources"
  rm -f "$root/etc/apt/sources.list"
fi
if [[ -f /etc/npmrc ]]; then
  cp /etc/npmrc "$root/etc/npmrc"
  cafile="$(sed -n 's/^cafile=//p' /etc/npmrc)"
  if [[ -n $cafile && -f $cafile ]]; then
    mkdir -p "$root$(dirname "$cafile")"
    cp "$cafile" "$root$cafile.rtcedge-host"
    # ca-certificates (installed later) rewrites the bundle; keep the host's beside it.
    sed -i "s|^cafile=.*|cafile=$cafile.rtcedge-host|" "$root/etc/npmrc"
  fi
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
mount --bind "$root" "$root" && mounted+=("$root")
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys" && mounted+=("$root/sys")
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev" && mounted+=("$root/dev")
mkdir -p "$root/run/netns" "$root/tmp"

rm -rf "$root/repo"
git clone -q "$repo" "$root/repo"

in_root() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  TERM=dumb LANG=C.UTF-8 /bin/bash -c "$1"; }
# git and ca-certificates are what a clone needs, not what the project needs: the README's
# reader already has the repository. Nothing else is installed by hand.
start=$(date +%s)
echo "== in the fresh root: scripts/demo.sh --check =="
in_root "cd /repo && scripts/demo.sh --check"
demo_s=$(($(date +%s) - start))
start=$(date +%s)
echo "== in the fresh root: scripts/test.sh $* =="
status=0
in_root "cd /repo && scripts/test.sh $*" || status=$?
test_s=$(($(date +%s) - start))
echo "fresh-machine-check: demo.sh --check ${demo_s} s (first run: apt, build), test.sh ${test_s} s, exit ${status}"
exit "$status"
