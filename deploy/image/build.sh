#!/usr/bin/env bash
# Builds the container image of the Morpheus node agent from Debian's own
# packages, with Debian's own tools and no image registry: mmdebstrap makes
# a minimal root filesystem holding what the agent runs (clang-19, the
# shared libraries the binary links, the kernel and libbpf headers a BPF
# program's compile includes), the built `morpheus` goes into it, and
# `podman import` makes it an image whose entrypoint is
# `morpheus daemon --config /etc/morpheus/agent.yaml` (docs/deploy.md).
#
#   deploy/image/build.sh [--binary PATH] [--tag NAME] [--cache DIR]
#
# --binary  the morpheus to install (default: build/bin/morpheus)
# --tag     the image's name (default: localhost/morpheus:latest)
# --cache   where root filesystems are kept between builds (default: the
#           binary's build directory/image): one per package list, so a
#           rebuild of the binary costs a copy and an import, not a
#           bootstrap
#
# The packages are found, not listed by hand: every library `ldd` resolves
# for the binary is mapped to the Debian package that ships it (dpkg -S),
# so the image follows what the build links. A binary that needs a library
# no package ships (one built by hand) is refused, naming it. The image is
# checked before it is imported: the binary must start in the new root
# (every library resolved there) and clang must be the one it was built
# for.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
binary=$repo/build/bin/morpheus
tag=localhost/morpheus:latest
cache=
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "build.sh: no executable at '$binary' (build Morpheus first)" >&2; exit 1; }
binary=$(realpath "$binary")
cache=${cache:-$(dirname "$(dirname "$binary")")/image}
[ "$(id -u)" -eq 0 ] || { echo "build.sh: run as root (mmdebstrap's root mode, podman's storage)" >&2; exit 1; }
for tool in mmdebstrap podman dpkg-query ldd; do
  command -v $tool >/dev/null || { echo "build.sh: '$tool' is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done

# Seconds since `start` (an $EPOCHREALTIME), one decimal.
since() { awk -v from="$1" -v to="$EPOCHREALTIME" 'BEGIN { printf "%.1f", to - from }'; }

# ldd names every library it resolves; a missing one is an error here, not
# in the container.
libraries=$(ldd "$binary")
if grep -q "not found" <<<"$libraries"; then
  echo "build.sh: $binary links libraries this host lacks:" >&2
  grep "not found" <<<"$libraries" >&2
  exit 1
fi
packages=(
  clang-19       # the agent compiles each program's BPF C with it (MORPHEUS_CLANG)
  linux-libc-dev # <linux/bpf.h> and the other UAPI headers programs include
  libbpf-dev     # <bpf/bpf_helpers.h>, <bpf/bpf_endian.h>, ...
)
# The Debian package shipping each library. Debian 12 merged /lib into
# /usr/lib but dpkg records each file where its package put it, so the
# resolved file is asked for with and without /usr, and before the path
# ldd went through (a development package may ship that symlink:
# llvm-19-dev's /usr/lib/llvm-19/lib/libLLVM.so.19.1). One dpkg-query for
# all of them: each call reads every package's file list.
declare -A owner_of
candidates=()
for library in $(awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$libraries"); do
  real=$(realpath "$library")
  candidates+=("$real" "${real#/usr}" "/usr$real" "$library")
done
# Lines are `PACKAGE[:ARCH][, PACKAGE...]: PATH`, and `diversion by ...`
# for a diverted file, which names no owner.
while IFS= read -r line; do
  [[ $line == "diversion by "* ]] || owner_of[${line#*: }]=${line%%[:,]*}
done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
for ((i = 0; i < ${#candidates[@]}; i += 4)); do
  owner=
  for candidate in "${candidates[@]:i:4}"; do
    owner=${owner_of[$candidate]:-}
    [ -n "$owner" ] && break
  done
  if [ -z "$owner" ]; then
    echo "build.sh: no Debian package ships '${candidates[i+3]}' (needed by $binary)" >&2
    exit 1
  fi
  packages+=("$owner")
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

# One root filesystem per package list and Debian release (and this
# script, which says how it is made).
release=$(. /etc/os-release && echo "$VERSION_CODENAME")
key=$( { echo "$release"; printf '%s\n' "${packages[@]}"; cat "$0"; } | sha256sum | cut -c1-16)
rootfs=$cache/rootfs-$key
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one build at a time per cache: the root filesystem is shared

if [ ! -e "$rootfs/.complete" ]; then
  # Root filesystems of other package lists are not used again: 500 MB each.
  find "$cache" -mindepth 1 -maxdepth 1 -name 'rootfs-*' -exec rm -rf {} +
  echo "build.sh: bootstrapping Debian $release (minbase) with ${packages[*]}"
  # /usr merged by symlinks, as Debian 12 installs it (otherwise apt
  # merges it with the usrmerge package, which brings perl); eatmydata
  # (when installed) spares dpkg its fsyncs; documentation, manuals and
  # translations are left out.
  hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
  [ -d /usr/share/mmdebstrap/hooks/eatmydata ] && command -v eatmydata >/dev/null &&
    hooks+=(--hook-dir=/usr/share/mmdebstrap/hooks/eatmydata)
  start=$EPOCHREALTIME
  mmdebstrap --variant=minbase --quiet "${hooks[@]}" \
    --include="$(IFS=,; echo "${packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$release" "$rootfs.partial"
  touch "$rootfs.partial/.complete"
  mv "$rootfs.partial" "$rootfs"
  echo "build.sh: root filesystem in $(since "$start") s"
fi

# The binary without its debug sections (most of its size; the symbols stay
# for backtraces), and the directory the configuration is mounted on.
strip --strip-debug -o "$rootfs/usr/bin/morpheus" "$binary"
mkdir -p "$rootfs/etc/morpheus" "$rootfs/run/morpheus"

# Checked in the new root before anything is imported: the binary starts
# (every library resolves there), the clang it runs is there, and a BPF
# program including the kernel's and libbpf's headers compiles as the
# agent compiles it (backend/bpf/Frontend).
chroot "$rootfs" /usr/bin/morpheus daemon --help >/dev/null ||
  { echo "build.sh: morpheus does not start in the new root filesystem" >&2; exit 1; }
clang=$(strings -n 8 "$binary" | grep -m1 -o '/usr/lib/llvm-[0-9]*/bin/clang$' || true)
[ -n "$clang" ] && [ -x "$rootfs$clang" ] ||
  { echo "build.sh: the clang the binary runs ('$clang') is not in the image" >&2; exit 1; }
printf '#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\nSEC("xdp") int pass(struct xdp_md *ctx) { return XDP_PASS; }\n' |
  chroot "$rootfs" "$clang" -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -x c - -c -o /dev/null ||
  { echo "build.sh: a BPF program does not compile in the new root filesystem" >&2; exit 1; }

previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
start=$EPOCHREALTIME
tar --numeric-owner --exclude=./.complete -C "$rootfs" -c . |
  podman import --quiet \
    --change 'ENTRYPOINT ["/usr/bin/morpheus", "daemon", "--config", "/etc/morpheus/agent.yaml"]' \
    --change 'LABEL org.opencontainers.image.title=morpheus' \
    --change "LABEL org.opencontainers.image.description=Morpheus node agent ($(basename "$binary") $(sha256sum "$binary" | cut -c1-12))" \
    - "$tag" >/dev/null
echo "build.sh: imported $tag ($(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) in" \
  "$(since "$start") s)"
# The image this tag named before, unless a container or another tag
# still uses it: rebuilds do not pile up nameless images.
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$tag")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
