#!/usr/bin/env bash
# Builds the single-node Kubernetes that test/kube runs: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl, from the Go
# module proxy at the release pinned in tools/kube/go.mod, into
#   ${LAYERPROBE_TEST_CACHE:-/var/cache/layerprobe-test}/kube-<release>/bin
# keyed by that release, so that a warm cache skips the build (a cold one
# takes tens of minutes on two cores). Prints the bin directory. Run by
# `make deps-test` (scripts/install-deps.sh), and by test/kube itself when
# the cache is cold; a file lock makes a second caller wait for the first
# one's build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/tools/kube
release=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")
[[ -n $release ]] || { echo "build-kube: no k8s.io/kubernetes release in $mod/go.mod" >&2; exit 1; }
cache=${LAYERPROBE_TEST_CACHE:-/var/cache/layerprobe-test}/kube-$release
bin=$cache/bin
cmds=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
have=1
for c in "${cmds[@]}"; do [[ -x $bin/$c ]] || have=0; done
if ((have)) && [[ -e $cache/.complete ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ -e $cache/.complete ]]; then
  echo "$bin"
  exit 0
fi
echo "build-kube: building Kubernetes $release into $bin (slow the first time)" >&2
start=$(date +%s)
tmp=$cache/bin.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
minor=${release#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$release -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
# etcd's main package is its server module's root; the kube-apiserver's
# own requirement pins its version.
(cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
  go.etcd.io/etcd/server/v3 \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kubectl)
# go build names a module's root package after its last element without
# the major version: server.
mv "$tmp/server" "$tmp/etcd"
rm -rf "$bin"
mv "$tmp" "$bin"
touch "$cache/.complete"
echo "build-kube: built Kubernetes $release in $(($(date +%s) - start)) s" >&2
echo "$bin"
