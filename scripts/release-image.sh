#!/usr/bin/env bash
# Builds the agent image from a release binary, the way Prometheus builds its
# exporters' images: deploy/docker/Dockerfile COPYs the binary that was
# already built (no compiler in the image), onto a Debian base with fio.
#
#   scripts/release-image.sh BINARY TAG [IMAGE.tar]
#
# BINARY is a linux binary from `make release` (dist/layerprobe_linux_amd64_v1/
# layerprobe); with IMAGE.tar, the image is also written there (`docker save`;
# `docker load -i IMAGE.tar` installs it). The engine is the one DOCKER_HOST
# or the default socket names.
#
# No image registry is assumed: BASE_IMAGE names a local Debian image
# (default layerprobe-base:bookworm); when it is not there it is made from
# Debian's packages with deploy/docker/debootstrap-base.sh (root, debootstrap).
# Set BASE_IMAGE=debian:bookworm-slim to use Debian's official image instead.
set -euo pipefail

bin=${1:?usage: $0 BINARY TAG [IMAGE.tar]}
tag=${2:?usage: $0 BINARY TAG [IMAGE.tar]}
out=${3:-}
base=${BASE_IMAGE:-layerprobe-base:bookworm}
here=$(cd "$(dirname "$0")/.." && pwd)

if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  echo "release-image: no container engine answers (DOCKER_HOST=${DOCKER_HOST:-default socket})" >&2
  exit 1
fi
if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "release-image: making the base $base from Debian's packages" >&2
  "$here/deploy/docker/debootstrap-base.sh" "$base"
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/layerprobe-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
# The Dockerfile's COPY takes bin/layerprobe from the context; the context
# holds nothing else.
install -D -m 0755 "$bin" "$ctx/bin/layerprobe"
# --network host: apt reaches Debian's mirror for fio even on a daemon
# without a bridge network.
DOCKER_BUILDKIT=0 docker build --quiet --network host \
  --build-arg "BASE_IMAGE=$base" \
  --label "org.opencontainers.image.version=$(cat "$here/VERSION")" \
  -f "$here/deploy/docker/Dockerfile" -t "$tag" "$ctx" >/dev/null
echo "release-image: built $tag" >&2
if [[ -n $out ]]; then
  docker save -o "$out" "$tag"
  chmod 0644 "$out"
  echo "release-image: saved $tag to $out" >&2
fi
