#!/usr/bin/env bash
# Writes the agent's multi-platform image, linux/amd64 and linux/arm64, as
# an OCI image layout tarball (an image index with one manifest a
# platform), without a container engine and without running any arm64
# code:
#
#   scripts/release-index.sh DIST TAG VERSION OUT.oci.tar
#
# DIST is goreleaser's dist directory (its static dist/layerprobe_linux_
# <arch>_*/layerprobe binaries). Each platform's root is Debian 12's fio
# (and base-files, dash) with its dependency closure, for that
# architecture, as apt resolves it from deb.debian.org into a private apt
# directory, unpacked with `dpkg-deb --fsys-tarfile` (no maintainer
# script runs), plus the binary. tools/ociimage (its own Go module, outside
# layerprobe's go.mod) writes the layout; the image configuration is
# deploy/docker/Dockerfile's. `docker load -i` (Docker 25 and later),
# `ctr images import --all-platforms`, skopeo and podman read it.
#
# The packages are cached in LAYERPROBE_DEB_CACHE (default
# /var/cache/layerprobe-release as root, ~/.cache/layerprobe-release
# otherwise), outside the clone; apt's lists are refreshed when a day old.
# DEBIAN_MIRROR (http://deb.debian.org/debian) and DEBIAN_SUITE (bookworm)
# choose the packages; SOURCE_DATE_EPOCH every time in the image.
# RELEASE_PLATFORMS (default "amd64 arm64/v8") chooses the platforms: the
# tests write an index of this machine's alone.
set -euo pipefail

dist=${1:?usage: $0 DIST TAG VERSION OUT}
tag=${2:?usage: $0 DIST TAG VERSION OUT}
version=${3:?usage: $0 DIST TAG VERSION OUT}
out=${4:?usage: $0 DIST TAG VERSION OUT}
here=$(cd "$(dirname "$0")/.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}
keyring=${DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
packages=(fio base-files dash)
if [[ $(id -u) -eq 0 ]]; then
  cache=${LAYERPROBE_DEB_CACHE:-/var/cache/layerprobe-release}
else
  cache=${LAYERPROBE_DEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/layerprobe-release}
fi
go=${GO:-go}
for t in apt-get dpkg-deb "$go"; do
  command -v "$t" >/dev/null || { echo "release-index: $t not found" >&2; exit 1; }
done
[[ -r $keyring ]] || { echo "release-index: no Debian archive keyring at $keyring (apt-get install debian-archive-keyring)" >&2; exit 1; }

# The packages of one architecture: their list, a file per line, on stdout.
debs() {
  local arch=$1 root="$cache/$suite-$1"
  mkdir -p "$root"/etc/apt/{apt.conf.d,preferences.d,sources.list.d,trusted.gpg.d} \
    "$root"/var/lib/apt/lists/partial "$root"/var/cache/apt/archives/partial "$root"/var/lib/dpkg
  touch "$root/var/lib/dpkg/status"
  # Nothing of the host's apt configuration: an empty dpkg status (no
  # package counts as installed), the one architecture, no recommends.
  cat >"$root/apt.conf" <<CONF
Dir "$root/";
Dir::State::status "$root/var/lib/dpkg/status";
Dir::Etc::main "$root/etc/apt/apt.conf";
Dir::Etc::parts "$root/etc/apt/apt.conf.d";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APT::Install-Recommends "false";
APT::Sandbox::User "root";
Acquire::Languages "none";
CONF
  echo "deb [signed-by=$keyring] $mirror $suite main" >"$root/etc/apt/sources.list"
  export APT_CONFIG="$root/apt.conf"
  if [[ -z $(find "$root/var/lib/apt/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null) ]]; then
    apt-get -qq update >&2
  fi
  apt-get -qq -y --download-only install "${packages[@]}" >&2
  # The closure, as apt would install it, and its files in the cache.
  apt-get -s install "${packages[@]}" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1 \2/p' |
    while read -r pkg ver; do
      f=$(compgen -G "$root/var/cache/apt/archives/${pkg}_${ver//:/%3a}_*.deb" | head -n1 || true)
      [[ -n $f ]] || { echo "release-index: $pkg $ver ($arch) not downloaded" >&2; exit 1; }
      echo "$f"
    done
}

work=$(mktemp -d "${TMPDIR:-/tmp}/layerprobe-index.XXXXXX")
trap 'rm -rf "$work"' EXIT
args=()
read -r -a platforms <<<"${RELEASE_PLATFORMS:-amd64 arm64/v8}"
for p in "${platforms[@]}"; do
  arch=${p%%/*}
  bin=$(compgen -G "$dist/layerprobe_linux_${arch}_*/layerprobe" | head -n1 || true)
  [[ -n $bin ]] || { echo "release-index: no linux/$arch binary in $dist" >&2; exit 1; }
  debs "$arch" >"$work/$arch.list"
  args+=("linux/$p=$bin=$work/$arch.list")
done

mkdir -p "$here/.build/tools"
(cd "$here/tools/ociimage" && CGO_ENABLED=0 "$go" build -trimpath -o "$here/.build/tools/ociimage" .)
"$here/.build/tools/ociimage" -dockerfile "$here/deploy/docker/Dockerfile" -name "$tag" -version "$version" \
  -epoch "${SOURCE_DATE_EPOCH:-0}" -out "$out" "${args[@]}"
echo "release-index: wrote $tag (${platforms[*]/#/linux/}) to $out" >&2
