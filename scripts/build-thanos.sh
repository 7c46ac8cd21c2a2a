#!/usr/bin/env bash
# build-thanos.sh builds Thanos (sidecar, store gateway, query, ruler) into
# /opt/layerprobe-test-tools/bin for test/ops TestFleetThanos and the fleet
# bench's distributed store (scripts/install-deps.sh runs it). Set
# LAYERPROBE_TOOLS to build elsewhere (a cold build's timing).
set -euo pipefail
tools=${LAYERPROBE_TOOLS:-/opt/layerprobe-test-tools}
# Thanos (sidecar, store gateway, query, ruler): test/ops TestFleetThanos
# runs the shipped rules and the fleet dashboard on it. Built from its Go
# module, in a copy of the module's own source, so that its go.mod (its
# replace directives, which `go install pkg@version` refuses) and go.sum
# apply; outside the product's go.mod. v0.42.4 is the newest release that
# builds with Go 1.26.8 (v0.42.5 asks for Go 1.26.10). The first build
# takes several minutes.
thanos_version=v0.42.4
if [[ $("$tools/bin/thanos" --version 2>&1 | head -n1) != "thanos, version ${thanos_version#v} "* ]] ||
  ! go version -m "$tools/bin/thanos" 2>/dev/null | grep -Eq "^[[:space:]]+build[[:space:]]+-tags=netgo,slicelabels$"; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing $tools/bin/thanos (Thanos $thanos_version); run as root" >&2
    exit 1
  fi
  echo "install-deps: building Thanos $thanos_version into $tools/bin" >&2
  build=$(mktemp -d)
  # Outside any module: the download touches no go.mod.
  src=$(cd "$build" && go mod download -json "github.com/thanos-io/thanos@$thanos_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $src ]] || { echo "install-deps: go mod download github.com/thanos-io/thanos@$thanos_version gave no directory" >&2; exit 1; }
  cp -r "$src/." "$build"
  chmod -R u+w "$build"
  mkdir -p "$tools/bin"
  # The build tags of Thanos' own release build (.promu.yml): slicelabels
  # is required, Thanos reads Prometheus' labels as a slice; without it
  # every gRPC answer is garbage and the sidecar panics on its first call.
  (cd "$build" && go build -trimpath -tags netgo,slicelabels -ldflags "-s -w -X github.com/prometheus/common/version.Version=${thanos_version#v}" \
    -o "$tools/bin/thanos" ./cmd/thanos)
  rm -rf "$build"
fi
