#!/usr/bin/env bash
# build-prometheus-operator.sh builds the Prometheus Operator and its config
# reloader into /opt/layerprobe-test-tools/bin, and the Prometheus the
# operator runs into /opt/layerprobe-test-tools/prometheus-<version>, for
# test/kube, which runs the operator against its single-node cluster as
# kube-prometheus-stack would (scripts/install-deps.sh runs it). Set
# LAYERPROBE_TOOLS to build elsewhere (a cold build's timing).
set -euo pipefail
tools=${LAYERPROBE_TOOLS:-/opt/layerprobe-test-tools}
# Built from its Go module, in a copy of the module's own source, so that
# its go.mod and go.sum apply, outside the product's go.mod. Its replace
# directives point pkg/apis/monitoring and pkg/client at directories of its
# repository that are modules of their own, absent from the module's zip:
# they are dropped, and the published modules of the same version (which
# its go.mod requires) build instead. v0.85.0 is the newest release whose
# main module the Go module proxy serves; test/kube applies its CRDs.
version=v0.85.0
# Built from a copy of the source, the binaries' module version reads
# (devel): their --version says which release they are.
have() {
  [[ $("$tools/bin/$1" --version 2>&1 | head -n1) == "$1, version ${version#v} "* ]]
}
mod=github.com/prometheus-operator/prometheus-operator
# Debian's Prometheus (2.42) is built without Kubernetes service
# discovery, which every scrape configuration the operator writes uses, and
# is older than the operator's oldest supported release (2.45): the
# operator's pod runs Prometheus built from its module, at the release the
# operator defaults to (3.5.0, module version v0.305.0), with the build
# tags of Prometheus' own release build but builtinassets (the module
# has no built web UI; the API is all test/kube reads).
prom_version=v3.5.0
prom_module_version=v0.305.0
prom=$tools/prometheus-$prom_version/prometheus
if have prometheus-operator && have prometheus-config-reloader &&
  [[ $("$prom" --version 2>&1 | head -n1) == "prometheus, version ${prom_version#v} "* ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing $tools/bin/prometheus-operator (Prometheus Operator $version); run as root" >&2
  exit 1
fi
echo "install-deps: building the Prometheus Operator $version into $tools/bin and Prometheus $prom_version into $(dirname "$prom")" >&2
start=$(date +%s)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
# Outside any module: the download touches no go.mod.
src=$(cd "$build" && go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n $src ]] || { echo "install-deps: go mod download $mod@$version gave no directory" >&2; exit 1; }
cp -r "$src/." "$build"
chmod -R u+w "$build"
mkdir -p "$tools/bin"
(
  cd "$build"
  go mod edit -dropreplace="$mod/pkg/apis/monitoring" -dropreplace="$mod/pkg/client"
  # The dropped replacements leave go.sum without the published modules'
  # sums: -mod=mod records them (checked against the checksum database).
  ldflags="-s -w -X github.com/prometheus/common/version.Version=${version#v}"
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tools/bin/prometheus-operator" ./cmd/operator
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tools/bin/prometheus-config-reloader" ./cmd/prometheus-config-reloader
)
# Prometheus, in a copy of its module's source too (its go.mod has a
# replace directive, which `go install pkg@version` refuses).
rm -rf "$build/prometheus"
mkdir "$build/prometheus"
psrc=$(cd "$build/prometheus" && go mod download -json "github.com/prometheus/prometheus@$prom_module_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n $psrc ]] || { echo "install-deps: go mod download github.com/prometheus/prometheus@$prom_module_version gave no directory" >&2; exit 1; }
cp -r "$psrc/." "$build/prometheus"
chmod -R u+w "$build/prometheus"
mkdir -p "$(dirname "$prom")"
(
  cd "$build/prometheus"
  # Service discovery by Kubernetes alone (and file and HTTP, which
  # Prometheus always has): the list plugins.yml and `make plugins`
  # generate this file from, cut to what the operator's configurations
  # use. The cloud providers' SDKs are most of a cold build.
  cat >plugins/plugins.go <<'GO'
// Package plugins registers the service discovery mechanisms built in.
package plugins

import (
	// Register kubernetes plugin.
	_ "github.com/prometheus/prometheus/discovery/kubernetes"
)
GO
  CGO_ENABLED=0 go build -trimpath -tags netgo,stringlabels \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${prom_version#v}" -o "$prom" ./cmd/prometheus
)
echo "install-deps: built the Prometheus Operator $version and Prometheus $prom_version in $(($(date +%s) - start)) s" >&2
