#!/usr/bin/env bash
# Installs what layerprobe's commands and tests need, from Debian's packages,
# when it is missing. Idempotent; needs root (or nothing to install).
set -euo pipefail

need=()
command -v fio >/dev/null || need+=(fio)
command -v dockerd >/dev/null || need+=(docker.io)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v promtool >/dev/null || need+=(prometheus)
command -v losetup >/dev/null || need+=(mount)

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
