#!/usr/bin/env bash
# Builds the Debian package of xlfs from this workspace: the binaries (xlfs, xlfsd,
# xlfs-mount, xlfs-nfsd, xlfs-rebalance, xlfs-mgmtd), the translator plugins in /usr/lib/xlfs/xlators
# (where the binaries look: <exe>/../lib/xlfs/xlators), the mount helpers
# /sbin/mount.xlfs and /sbin/mount.fuse.xlfs (`mount -t xlfs HOST:/VOL DIR`, fstab lines
# with `_netdev`), the systemd units xlfs-volume@.service and xlfs-mgmtd.service (with
# /etc/default/xlfs-mgmtd, a conffile) and the docs.
#
#   packaging/deb/build.sh [--profile release|debug] [--no-build] [--out DIR]
#
# --profile   which cargo profile's binaries (default release)
# --no-build  package what target/PROFILE already holds (default: cargo build first, one
#             invocation for the whole workspace)
# --out       where the .deb goes (default target/deb)
#
# Prints the package's path last. Needs dpkg-deb (Debian's dpkg) and cargo unless --no-build.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
profile=release build=1 out=
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile=${2:?--profile needs release or debug}; shift 2 ;;
        --no-build) build=0; shift ;;
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "build.sh: unknown argument $1" >&2; usage ;;
    esac
done
case "$profile" in
    release|debug) ;;
    *) echo "build.sh: --profile is release or debug, not $profile" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=${out:-$target/deb}
bins="xlfs xlfsd xlfs-mount xlfs-nfsd xlfs-rebalance xlfs-mgmtd"

if [ "$build" = 1 ]; then
    flag=; [ "$profile" = release ] && flag=--release
    (cd "$root" && cargo build $flag --workspace)
fi
dir=$target/$profile
for b in $bins; do
    [ -x "$dir/$b" ] || { echo "build.sh: $dir/$b is missing (build the workspace first)" >&2; exit 1; }
done
# Every translator plugin of the workspace; not the ABI tests' deliberately broken ones.
plugins=$(cd "$dir" && ls libxlfs_*.so 2>/dev/null | grep -v '^libxlfs_abi_' || true)
[ -n "$plugins" ] || { echo "build.sh: no plugins (lib*.so) in $dir" >&2; exit 1; }

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/xlfs

install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/xlfs/xlators" "$pkg/sbin" \
    "$pkg/lib/systemd/system" "$pkg/usr/share/doc/xlfs" "$pkg/var/lib/xlfs" "$pkg/etc/default"
for b in $bins; do install -m 0755 "$dir/$b" "$pkg/usr/bin/$b"; done
for p in $plugins; do install -m 0644 "$dir/$p" "$pkg/usr/lib/xlfs/xlators/$p"; done
[ "$profile" = release ] && strip --strip-unneeded "$pkg"/usr/bin/* "$pkg"/usr/lib/xlfs/xlators/*.so
# Absolute targets: on a merged-/usr system (Debian 12's default) /sbin is a link to usr/sbin,
# where a relative ../usr/bin would name /usr/usr/bin.
ln -s /usr/bin/xlfs-mount "$pkg/sbin/mount.xlfs"
ln -s /usr/bin/xlfs-mount "$pkg/sbin/mount.fuse.xlfs"
install -m 0644 "$root/packaging/systemd/xlfs-volume@.service" "$root/packaging/systemd/xlfs-mgmtd.service" \
    "$pkg/lib/systemd/system/"
cat > "$pkg/etc/default/xlfs-mgmtd" <<DEFAULT
# This host's address on the cluster network, HOST[:PORT] (port 24017 if left out), for
# xlfs-mgmtd --listen (xlfs-mgmtd.service). There is no default: set it before starting it.
XLFS_MGMTD_LISTEN=
DEFAULT
echo /etc/default/xlfs-mgmtd > "$pkg/DEBIAN/conffiles"
install -m 0644 "$root/README.md" "$root/LICENSE" "$pkg/usr/share/doc/xlfs/"
for d in "$root"/docs/*.md; do install -m 0644 "$d" "$pkg/usr/share/doc/xlfs/"; done

size=$(du -sk "$pkg" | cut -f1)
# The newest glibc symbol version the binaries and plugins need: libc6 at least that (a
# package built on Debian 12 installs on Debian 11 but its binaries cannot run there).
glibc=$(cat "$pkg"/usr/bin/* "$pkg"/usr/lib/xlfs/xlators/*.so | grep -ao 'GLIBC_2\.[0-9.]*' |
    sed 's/GLIBC_//' | sort -uV | tail -1)
[ -n "$glibc" ] || { echo "build.sh: no glibc symbol versions found in the binaries" >&2; exit 1; }
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: xlfs
Version: $version
Architecture: $arch
Maintainer: xlfs developers <xlfs@example.invalid>
Installed-Size: $size
Depends: libc6 (>= $glibc), libgcc-s1
Recommends: fuse3
Section: admin
Priority: optional
Homepage: https://example.invalid/xlfs
Description: distributed file system of translators (GlusterFS lineage)
 xlfs serves volumes from bricks (xlfsd) and mounts them through FUSE (xlfs-mount,
 mount -t xlfs) or NFSv3 (xlfs-nfsd): replication with self-heal and arbiters,
 distribution with online rebalance, striping, caching translators, all loaded as
 plugins from /usr/lib/xlfs/xlators. Volumes are made with "xlfs volume create" and
 run with "xlfs volume start" or the xlfs-volume@VOLUME systemd unit.
CONTROL
cat > "$pkg/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
POSTINST
cat > "$pkg/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
POSTRM
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/postrm"

mkdir -p "$out"
deb=$out/xlfs_${version}_${arch}.deb
# A debug build is for tests: half a gigabyte of debug info is not worth compressing.
comp=-Zxz; [ "$profile" = debug ] && comp=-Znone
dpkg-deb --root-owner-group "$comp" --build "$pkg" "$deb" >/dev/null
echo "$deb"
