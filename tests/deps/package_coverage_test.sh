#!/usr/bin/env bash
# package_coverage_test.sh — fails when a program that the build, tests, benchmarks or demo
# run comes from a Debian package that scripts/install-deps.sh does not install. A long-lived
# CI machine has packages installed by hand; this test is what stops a missing install step
# (bpftool once) from landing behind a green CI.
#
#   package_coverage_test.sh [--install-deps FILE]
#
# The programs: tests/deps/programs.txt, plus every CMake find_program() NAMES, Python
# shutil.which("...") and shell `command -v ...` name found in the sources. Each is resolved
# on this machine (it must exist: CI ran install-deps.sh first), then to its package with
# dpkg -S (trying the /usr-merged twin of the path too). That package passes when
# install-deps.sh lists it, when a listed package depends on it (apt-cache depends,
# recursively), or when it is Essential or Priority required (every Debian 12 has it).
# Exit 0 = covered, 1 = not covered (each offender named with its package), 77 = cannot tell
# (no dpkg: not a Debian machine).
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
install_deps="$repo/scripts/install-deps.sh"
[[ "${1:-}" == "--install-deps" ]] && install_deps="$2"
command -v dpkg >/dev/null && command -v apt-cache >/dev/null || { echo "SKIP: no dpkg/apt-cache (not Debian)"; exit 77; }
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# The packages install-deps.sh installs: the packages=( ... ) array and every other
# `apt-get install` line (nodejs npm).
listed="$(
  sed -n '/^packages=(/,/^)/p' "$install_deps" | sed -e 's/#.*//' -e 's/packages=(//' -e 's/)//'
  grep -E '^[^#]*apt-get install' "$install_deps" | grep -vF '"${packages' |
    sed -e 's/.*apt-get install//' -e 's/>.*//' | tr ' ' '\n' | grep -vE '^-|^$'
)"
listed="$(tr -s ' \t' '\n' <<<"$listed" | grep -v '^$' | sort -u)"
[[ -n $listed ]] || { echo "FAIL: no packages found in $install_deps"; exit 1; }
# What installing them pulls in, too.
# shellcheck disable=SC2086
closure="$( { echo "$listed"; apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances $listed 2>/dev/null | sed -n 's/^ *\(Pre\)\{0,1\}Depends: *<\{0,1\}\([^ >]*\)>\{0,1\}$/\2/p;s/^\([a-z0-9][^ ]*\)$/\1/p'; } | sort -u)"

programs="$(
  sed -e 's/#.*//' "$repo/tests/deps/programs.txt" | awk 'NF {print $1}'
  # CMake find_program(VAR NAMES first ...): the first name.
  grep -rhoE 'find_program\([A-Z_0-9]+ +NAMES +[^ )]+' --include=CMakeLists.txt --include='*.cmake' \
    "$repo" --exclude-dir=build --exclude-dir=node_modules | awk '{print $NF}'
  grep -rhoE 'shutil\.which\("[a-zA-Z0-9_.+-]+"' --include='*.py' "$repo" --exclude-dir=build \
    --exclude-dir=node_modules | sed -E 's/.*"(.*)"/\1/'
  # fresh-machine-check.sh runs on the host that makes the fresh root, not in it.
  grep -rhoE 'command -v [a-zA-Z0-9][a-zA-Z0-9_.+-]*' --include='*.sh' "$repo" --exclude-dir=build \
    --exclude-dir=node_modules --exclude=fresh-machine-check.sh | awk '{print $3}'
)"
programs="$(sort -u <<<"$programs")"

owner_of() {  # path -> package name, or nothing
  local p="$1" alt
  case "$p" in /usr/*) alt="${p#/usr}" ;; *) alt="/usr$p" ;; esac
  for candidate in "$p" "$alt" "$(readlink -f "$p")"; do
    local pkg
    pkg="$(dpkg -S "$candidate" 2>/dev/null | grep -v '^diversion' | grep -E ": $candidate\$" | head -1 | cut -d: -f1 | cut -d, -f1)"
    [[ -n $pkg ]] && { echo "$pkg"; return; }
  done
}

failures=0
checked=0
while read -r program; do
  [[ -z $program ]] && continue
  # The project's own scripts and tools the tests build are not packages.
  case "$program" in ./* | *.sh | *.py | rtcedge-*) continue ;; esac
  if [[ $program == /* ]]; then path="$program"; [[ -x $path ]] || path=""; else path="$(command -v "$program" || true)"; fi
  if [[ -z $path ]]; then
    echo "FAIL: $program is not on this machine: scripts/install-deps.sh does not install the package that provides it"
    failures=$((failures + 1))
    continue
  fi
  pkg="$(owner_of "$path")"
  if [[ -z $pkg ]]; then
    echo "FAIL: $program ($path) belongs to no Debian package: installed by hand? install-deps.sh must provide it"
    failures=$((failures + 1))
    continue
  fi
  checked=$((checked + 1))
  if grep -qxF "$pkg" <<<"$closure"; then continue; fi
  fields="$(dpkg-query -W -f='${Essential} ${Priority}' "$pkg" 2>/dev/null)"
  if [[ $fields == yes* || $fields == *required ]]; then continue; fi
  echo "FAIL: $program ($path) comes from Debian package '$pkg', which scripts/install-deps.sh does not install"
  failures=$((failures + 1))
done <<<"$programs"

echo "package coverage: $checked programs resolved to packages, $failures not covered by $(basename "$install_deps")"
[[ $failures -eq 0 ]]
