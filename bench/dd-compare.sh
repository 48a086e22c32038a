#!/usr/bin/env bash
# dd 4 KiB and 1 MiB sequential writes and reads, in one run, on:
#   brick   the brick's own directory (local file system: the floor)
#   bindfs  a bindfs FUSE passthrough of the brick directory (the FUSE floor)
#   xlfs    xlfs-mount --local (storage/posix + features/locks + debug/io-stats, in-process)
# and the ratios xlfs/brick and xlfs/bindfs. Rounds are interleaved (brick, bindfs, xlfs,
# brick, ...) and the median of ROUNDS is reported.
#
#   bench/dd-compare.sh [WORKDIR]       (root; needs bindfs: apt-get install bindfs)
#
# Env: MIB (size per run, default 256), ROUNDS (default 3), XLFS_MOUNT (binary, default
# target/release/xlfs-mount), MOUNT_OPTS (extra xlfs-mount options, e.g. --no-writeback-cache).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WORK=${1:-${TMPDIR:-/tmp}/xlfs-dd}
MIB=${MIB:-256}
ROUNDS=${ROUNDS:-3}
XLFS_MOUNT=${XLFS_MOUNT:-$ROOT/target/release/xlfs-mount}
MOUNT_OPTS=${MOUNT_OPTS:-}
[ -x "$XLFS_MOUNT" ] || { echo "dd-compare: $XLFS_MOUNT missing: cargo build --release --workspace" >&2; exit 2; }
command -v bindfs >/dev/null || { echo "dd-compare: bindfs missing: apt-get install bindfs" >&2; exit 2; }

mkdir -p "$WORK"
DATA=$WORK/data; BINDFS_MNT=$WORK/bindfs; XLFS_MNT=$WORK/xlfs
mkdir -p "$DATA" "$BINDFS_MNT" "$XLFS_MNT"
XLFS_PID=
cleanup() {
    [ -n "$XLFS_PID" ] && kill "$XLFS_PID" 2>/dev/null && wait "$XLFS_PID" 2>/dev/null || true
    mountpoint -q "$XLFS_MNT" && umount -l "$XLFS_MNT" || true
    mountpoint -q "$BINDFS_MNT" && umount -l "$BINDFS_MNT" || true
}
trap cleanup EXIT

# shellcheck disable=SC2086
"$XLFS_MOUNT" --local "$DATA" $MOUNT_OPTS "$XLFS_MNT" >/dev/null 2>"$WORK/xlfs-mount.log" &
XLFS_PID=$!
for _ in $(seq 100); do mountpoint -q "$XLFS_MNT" && break; sleep 0.1; done
mountpoint -q "$XLFS_MNT" || { echo "dd-compare: xlfs did not mount" >&2; cat "$WORK/xlfs-mount.log" >&2; exit 1; }
BRICK=$DATA/brick
bindfs "$BRICK" "$BINDFS_MNT"

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# dd_mbs FILE BS COUNT write|read -> MB/s
dd_mbs() {
    local f=$1 bs=$2 count=$3 mode=$4 out
    if [ "$mode" = write ]; then
        out=$(dd if=/dev/zero of="$f" bs="$bs" count="$count" conv=fsync 2>&1)
    else
        drop
        out=$(dd if="$f" of=/dev/null bs="$bs" 2>&1)
    fi
    echo "$out" | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/ && $(i+1) == "s,") t = $i; b = $1 } END { printf "%.1f", b / t / 1e6 }'
}
declare -A R
targets=(brick bindfs xlfs)
dir_of() { case $1 in brick) echo "$BRICK" ;; bindfs) echo "$BINDFS_MNT" ;; xlfs) echo "$XLFS_MNT" ;; esac; }
for round in $(seq "$ROUNDS"); do
    for t in "${targets[@]}"; do
        d=$(dir_of "$t")
        for bs in 4k 1M; do
            if [ $bs = 4k ]; then count=$((MIB * 256)); else count=$MIB; fi
            R[$t,$bs,write,$round]=$(dd_mbs "$d/dd-$bs" $bs $count write)
            R[$t,$bs,read,$round]=$(dd_mbs "$d/dd-$bs" $bs $count read)
            rm -f "$d/dd-$bs"
        done
    done
    echo "round $round done" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
med() { local vals=(); for r in $(seq "$ROUNDS"); do vals+=("${R[$1,$2,$3,$r]}"); done; median "${vals[@]}"; }
echo
echo "dd ${MIB} MiB per run, median of $ROUNDS interleaved rounds, MB/s (xlfs-mount $MOUNT_OPTS)"
printf '| %-10s | %8s | %8s | %8s | %11s | %12s |\n' "test" brick bindfs xlfs "xlfs/brick" "xlfs/bindfs"
printf '|%s|\n' "------------|----------|----------|----------|-------------|--------------"
for bs in 4k 1M; do
    for mode in write read; do
        b=$(med brick $bs $mode); f=$(med bindfs $bs $mode); x=$(med xlfs $bs $mode)
        printf '| %-10s | %8s | %8s | %8s | %11s | %12s |\n' "$bs $mode" "$b" "$f" "$x" \
            "$(awk -v x="$x" -v b="$b" 'BEGIN { printf "%.2f", x / b }')" \
            "$(awk -v x="$x" -v b="$f" 'BEGIN { printf "%.2f", x / b }')"
    done
done
