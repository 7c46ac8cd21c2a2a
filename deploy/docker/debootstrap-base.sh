#!/usr/bin/env bash
# Makes a Debian base image from Debian's packages alone (debootstrap, then
# `docker import`), for building deploy/docker/Dockerfile without any image
# registry:
#
#   deploy/docker/debootstrap-base.sh layerprobe-base:bookworm
#   docker build --build-arg BASE_IMAGE=layerprobe-base:bookworm \
#     -f deploy/docker/Dockerfile -t layerprobe:local .
#
# Needs root and debootstrap. The engine is the one DOCKER_HOST (or the
# default socket) names. DEBIAN_SUITE (bookworm) and DEBIAN_MIRROR
# (http://deb.debian.org/debian) choose what is installed.
set -euo pipefail

tag=${1:?usage: $0 IMAGE_TAG}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [[ $(id -u) -ne 0 ]]; then
  echo "debootstrap-base: needs root (debootstrap)" >&2
  exit 1
fi
debootstrap=$(command -v debootstrap || echo /usr/sbin/debootstrap)
if [[ ! -x $debootstrap ]]; then
  echo "debootstrap-base: debootstrap not found; apt-get install debootstrap" >&2
  exit 1
fi

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/layerprobe-base.XXXXXX")
trap 'rm -rf --one-file-system "$rootfs"' EXIT

# minbase: essential packages and apt, nothing else (about 200 MB).
"$debootstrap" --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
  tail -n 30 "$rootfs.log" >&2
  rm -f "$rootfs.log"
  exit 1
}
rm -f "$rootfs.log"
# What an image needs no more of: apt's downloaded packages and lists.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

tar --numeric-owner -C "$rootfs" -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    - "$tag" >/dev/null
echo "debootstrap-base: imported $suite from $mirror as $tag"
