#!/usr/bin/env bash
# The floor of FUSE writes without the kernel writeback cache: dd of the same file with
# bs=4k and bs=1M (conv=fsync) on bench/fuse-floor/nullfs, a libfuse low-level file system
# that acknowledges every write at once and keeps nothing. No FUSE file system can answer a
# write request faster, so its 4k rate bounds what any FUSE mount reaches here when every
# write(2) is one request (xlfs-mount --no-writeback-cache, W1's second bar).
#
#   bash bench/fuse-floor.sh [WORKDIR]     (root; needs gcc and libfuse3-dev)
#
# Env: MIB (per dd, default 256), ROUNDS (default 3). Prints one line per mode and size:
#   nullfs-single 4k MB/s ... (libfuse single-threaded loop), nullfs-mt ... (multi-threaded)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-${TMPDIR:-/tmp}/xlfs-fuse-floor}
MIB=${MIB:-256}
ROUNDS=${ROUNDS:-3}
command -v gcc >/dev/null && pkg-config --exists fuse3 ||
    { echo "fuse-floor: needs gcc and libfuse3-dev (apt-get install gcc libfuse3-dev pkg-config)" >&2; exit 2; }
mkdir -p "$WORK/mnt"
MNT=$WORK/mnt
# shellcheck disable=SC2046
gcc -O2 -o "$WORK/nullfs" "$HERE/fuse-floor/nullfs.c" $(pkg-config fuse3 --cflags --libs)
PID=
cleanup() {
    mountpoint -q "$MNT" && umount -l "$MNT" || true
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
}
trap cleanup EXIT
# A signal ends the script (the EXIT trap cleans up); a bare trap would let it run on.
trap 'exit 130' INT TERM

# dd_mbps BS COUNT -> MB/s of one dd run
dd_mbps() {
    local t0 t1
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$MNT/f" bs="$1" count="$2" conv=fsync status=none
    t1=$(date +%s.%N)
    awk -v b=$((MIB << 20)) -v a="$t0" -v c="$t1" 'BEGIN{printf "%.0f", b/(c-a)/1e6}'
}

for mode in single mt; do
    flag=; [ "$mode" = single ] && flag=-s
    "$WORK/nullfs" $flag -f "$MNT" &
    PID=$!
    for _ in $(seq 50); do mountpoint -q "$MNT" && break; sleep 0.1; done
    mountpoint -q "$MNT" || { echo "fuse-floor: nullfs did not mount" >&2; exit 1; }
    for bs in 4k 1M; do
        case $bs in 4k) count=$((MIB * 256));; 1M) count=$MIB;; esac
        runs=()
        for _ in $(seq "$ROUNDS"); do runs+=("$(dd_mbps $bs $count)"); done
        med=$(printf '%s\n' "${runs[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
        echo "nullfs-$mode $bs MB/s median $med (runs: ${runs[*]})"
    done
    umount "$MNT"; wait "$PID" || true; PID=
done
