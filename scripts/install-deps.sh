#!/usr/bin/env bash
# Installs the test toolchain (`make deps-test`, which `make test` runs):
# everything the unit, end-to-end and operators' kit tests need, from
# Debian's packages, when it is missing. The agent alone needs much less:
# scripts/install-agent-deps.sh (`make deps`). Idempotent; needs root (or
# nothing to install).
set -euo pipefail

need=()
command -v fio >/dev/null || need+=(fio)
command -v dockerd >/dev/null || need+=(docker.io)
# A private containerd (no Docker) for the containerd engine's tests; docker.io
# pulls it in too, but a machine may have dockerd from elsewhere.
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || [[ -x /usr/sbin/runc ]] || need+=(runc)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v promtool >/dev/null || need+=(prometheus)
command -v losetup >/dev/null || need+=(mount)
# The other engines the end-to-end tests run: Podman (its Docker-compatible
# API; catatonit holds a rootless Podman's user namespace) and dockerd's
# fuse-overlayfs driver.
command -v podman >/dev/null || need+=(podman)
command -v catatonit >/dev/null || need+=(catatonit)
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
# test/ops (dashboards, rules and deployment files):
command -v amtool >/dev/null || need+=(prometheus-alertmanager)
# make bench (footprint): Debian's node_exporter, the agent's reference.
[[ -x /usr/bin/prometheus-node-exporter ]] || need+=(prometheus-node-exporter)
command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] || need+=(debootstrap)
# test/vm: a Debian guest under QEMU (its kernel, Debian's linux-image-amd64,
# is installed into the guest by debootstrap), its socket forwarded with
# ssh, its disk made with mkfs.ext4 -d.
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v ssh >/dev/null || need+=(openssh-client)
command -v mkfs.ext4 >/dev/null || [[ -x /usr/sbin/mkfs.ext4 ]] || need+=(e2fsprogs)
command -v yamllint >/dev/null || need+=(yamllint)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v setpriv >/dev/null || need+=(util-linux)
# test/e2e: the status page in a real headless browser, with a font to
# draw its screenshot.
command -v chromium >/dev/null || need+=(chromium)
[[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || need+=(fonts-dejavu-core)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)

if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing ${need[*]}; run as root or install them: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# kubernetes-validate (PyPI) validates Kubernetes manifests offline against
# the Kubernetes OpenAPI schemas it bundles; test/ops uses it for
# deploy/kubernetes. In a venv of its own ($tools/kubernetes-validate), away
# from the system's Python and from the other tools in $tools/bin, which a
# reinstall of the venv leaves alone.
tools=/opt/layerprobe-test-tools
kv_version=1.37.0
if [[ ! -x $tools/bin/kubernetes-validate ]] || [[ $("$tools/bin/kubernetes-validate" --version 2>/dev/null) != "$kv_version" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing $tools/bin/kubernetes-validate; run as root" >&2
    exit 1
  fi
  echo "install-deps: installing kubernetes-validate $kv_version into $tools/kubernetes-validate" >&2
  rm -rf "$tools/kubernetes-validate"
  /usr/bin/python3 -m venv "$tools/kubernetes-validate"
  "$tools/kubernetes-validate/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$kv_version"
  mkdir -p "$tools/bin"
  ln -sfn "$tools/kubernetes-validate/bin/kubernetes-validate" "$tools/bin/kubernetes-validate"
fi

# helm lints and renders the chart in deploy/helm for test/ops. Built from
# its Go module (no other download route exists on a Debian machine); the
# first build takes a few minutes.
helm_version=v3.22.0
if [[ ! -x $tools/bin/helm ]] || ! go version -m "$tools/bin/helm" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+helm\.sh/helm/v3[[:space:]]+$helm_version[[:space:]]"; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing $tools/bin/helm; run as root" >&2
    exit 1
  fi
  echo "install-deps: building helm $helm_version into $tools/bin" >&2
  mkdir -p "$tools/bin"
  GOBIN=$tools/bin go install "helm.sh/helm/v3/cmd/helm@$helm_version"
fi

# Docker Compose v2, the docker CLI plugin (`docker compose`) that test/ops
# runs the compose stack with: Debian 12 has only docker-compose 1.29, out
# of support, which rejects the shipped file's `cgroup: host`. Built from
# its Go module in a module of its own (compose's go.mod has exclude
# directives, which `go install pkg@version` refuses; the wrapper repeats
# them), outside the product's go.mod, and linked where every docker CLI
# looks for plugins. The first build takes several minutes.
compose_version=v2.40.3
plugins=/usr/local/lib/docker/cli-plugins
if ! go version -m "$tools/bin/docker-compose" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github\.com/docker/compose/v2[[:space:]]+$compose_version[[:space:]]" ||
  [[ $(readlink "$plugins/docker-compose") != "$tools/bin/docker-compose" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing $tools/bin/docker-compose (Compose $compose_version) or its plugin link; run as root" >&2
    exit 1
  fi
  echo "install-deps: building Docker Compose $compose_version into $tools/bin" >&2
  mod=$(mktemp -d)
  trap 'rm -rf "$mod"' EXIT
  printf '%s\n' "module layerprobe.test/compose" "" "go 1.24.9" "" "exclude (" \
    "	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc" \
    "	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2" ")" >"$mod/go.mod"
  mkdir -p "$tools/bin" "$plugins"
  (cd "$mod" && go get "github.com/docker/compose/v2/cmd@$compose_version" &&
    go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$compose_version" \
      -o "$tools/bin/docker-compose" github.com/docker/compose/v2/cmd)
  ln -sfn "$tools/bin/docker-compose" "$plugins/docker-compose"
fi

# `make release` builds goreleaser and cyclonedx-gomod from the Go module
# proxy; test/ops TestReleaseArtifacts runs it. Building them here, once,
# fills Go's build cache, so that the test's own build of them only links
# (the first build takes several minutes).
goreleaser_version=v2.15.1
cyclonedx_version=v1.10.0
if ! go version -m "$tools/bin/goreleaser" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github\.com/goreleaser/goreleaser/v2[[:space:]]+$goreleaser_version[[:space:]]" ||
  ! go version -m "$tools/bin/cyclonedx-gomod" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github\.com/CycloneDX/cyclonedx-gomod[[:space:]]+$cyclonedx_version[[:space:]]"; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing $tools/bin/goreleaser or cyclonedx-gomod; run as root" >&2
    exit 1
  fi
  echo "install-deps: building goreleaser $goreleaser_version and cyclonedx-gomod $cyclonedx_version into $tools/bin" >&2
  mkdir -p "$tools/bin"
  GOBIN=$tools/bin go install "github.com/goreleaser/goreleaser/v2@$goreleaser_version"
  GOBIN=$tools/bin go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$cyclonedx_version"
fi

# Thanos (sidecar, store gateway, query, ruler): test/ops TestFleetThanos
# and the fleet bench's distributed store run the shipped rules and
# dashboards on it. Built from its Go module by scripts/build-thanos.sh,
# outside the product's go.mod; kept in $tools/bin across runs.
"$(dirname "$0")/build-thanos.sh"

# test/kube: the Prometheus Operator and its config reloader, built from
# their Go module into $tools/bin; and the single-node Kubernetes (etcd and
# the Kubernetes components at the release tools/kube/go.mod pins), built
# from their Go modules into /var/cache/layerprobe-test (a cold build takes
# tens of minutes on two cores; a warm cache returns at once).
"$(dirname "$0")/build-prometheus-operator.sh"
"$(dirname "$0")/build-kube.sh" >/dev/null
