#!/usr/bin/env bash
# build_renderer.sh OUT GOWORK — builds tests/helm/render offline, in GOPATH mode, from the
# Go sources Debian installs under /usr/share/gocode (golang-go, golang-github-masterminds-
# sprig-dev, golang-github-xeipuuv-gojsonschema-dev, golang-gopkg-yaml.v3-dev): no module
# proxy, no network. GOWORK holds the build cache.
set -euo pipefail
out=${1:?usage: build_renderer.sh OUT GOWORK}
work=${2:?usage: build_renderer.sh OUT GOWORK}
mkdir -p "$work"
cd "$(dirname "$0")/render"
GO111MODULE=off GOPATH="/usr/share/gocode:$work" GOCACHE="$work/cache" GOFLAGS= GOPROXY=off \
  go build -o "$out" main.go
echo "built $out ($(go version))"
