#!/usr/bin/env bash
# W4 (P concurrent whole-file readers of 2,000 files of 500-800 KiB, caches dropped before
# each pass) on the brick directory and on three FUSE mounts of that same directory, in
# interleaved rounds:
#   brick     the brick directory read directly (the floor)
#   splicefs  bench/fuse-floor/splicefs.c: a read-only libfuse low-level passthrough,
#             multi-threaded, that splices file data into /dev/fuse (no user-space copy):
#             as light as a FUSE mount gets
#   bindfs-mt bindfs --multithreaded (libfuse high-level passthrough)
#   xlfs      a single-brick volume (`xlfs up`): FUSE -> client graph -> protocol -> xlfsd
# The corpus is written once through the xlfs mount; the other targets read the brick's copy.
#
#   bash bench/w4-floor.sh [WORKDIR]     (root; needs gcc, libfuse3-dev, bindfs)
#
# Env: PS (reader counts, default "1 5 30"), ROUNDS (default 3), W4_FILES (default 2000).
# Prints one line per target and P: the median files/s and its ratio to the brick's.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WORK=${1:-${TMPDIR:-/tmp}/xlfs-w4-floor}
PS=${PS:-1 5 30}
ROUNDS=${ROUNDS:-3}
export W4_FILES=${W4_FILES:-2000}
XLFS=$ROOT/target/release/xlfs
WL=$HERE/workloads.sh
[ -x "$XLFS" ] || { echo "w4-floor: $XLFS missing: cargo build --release --workspace" >&2; exit 2; }
command -v bindfs >/dev/null || { echo "w4-floor: needs bindfs (apt-get install bindfs)" >&2; exit 2; }
command -v gcc >/dev/null && pkg-config --exists fuse3 ||
    { echo "w4-floor: needs gcc and libfuse3-dev (apt-get install gcc libfuse3-dev pkg-config)" >&2; exit 2; }

mkdir -p "$WORK"/{splicefs,bindfs-mt}
# shellcheck disable=SC2046
gcc -O2 -o "$WORK/splicefs-bin" "$HERE/fuse-floor/splicefs.c" $(pkg-config fuse3 --cflags --libs)
UP=; SPLICEFS=
cleanup() {
    for m in "$WORK/splicefs" "$WORK/bindfs-mt"; do
        mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
    done
    # (set -e: a kill of a process already gone must not end the cleanup early.)
    if [ -n "$SPLICEFS" ]; then kill "$SPLICEFS" 2>/dev/null || true; wait "$SPLICEFS" 2>/dev/null || true; fi
    if [ -n "$UP" ]; then kill -INT "$UP" 2>/dev/null || true; wait "$UP" 2>/dev/null || true; fi
    for _ in $(seq 50); do mountpoint -q "$WORK/vol/mnt" || break; sleep 0.1; done
    mountpoint -q "$WORK/vol/mnt" && umount -l "$WORK/vol/mnt" || true
}
trap cleanup EXIT
# A signal ends the script (the EXIT trap cleans up); a bare trap would let it run on.
trap 'exit 130' INT TERM

mountpoint -q "$WORK/vol/mnt" 2>/dev/null && { "$XLFS" umount "$WORK/vol/mnt" 2>/dev/null || umount -l "$WORK/vol/mnt"; }
"$XLFS" up "$WORK/vol" > "$WORK/up.log" 2>&1 &
UP=$!
for _ in $(seq 100); do mountpoint -q "$WORK/vol/mnt" && break; sleep 0.1; done
mountpoint -q "$WORK/vol/mnt" || { cat "$WORK/up.log" >&2; echo "w4-floor: xlfs up failed" >&2; exit 1; }
[ -d "$WORK/vol/mnt/anchor-w4" ] || "$WL" "$WORK/vol/mnt" w4-prep > /dev/null
BRICK=$WORK/vol/brick
[ -d "$BRICK/anchor-w4" ] || { echo "w4-floor: no corpus in $BRICK" >&2; exit 1; }
"$WORK/splicefs-bin" -f -o source="$BRICK" "$WORK/splicefs" &
SPLICEFS=$!
for _ in $(seq 100); do mountpoint -q "$WORK/splicefs" && break; sleep 0.1; done
mountpoint -q "$WORK/splicefs" || { echo "w4-floor: splicefs did not mount" >&2; exit 1; }
bindfs --multithreaded "$BRICK" "$WORK/bindfs-mt"

declare -A DIR=([brick]=$BRICK [splicefs]=$WORK/splicefs [bindfs-mt]=$WORK/bindfs-mt [xlfs]=$WORK/vol/mnt)
TARGETS="brick splicefs bindfs-mt xlfs"
declare -A RUNS
for r in $(seq "$ROUNDS"); do
    for p in $PS; do
        for t in $TARGETS; do
            v=$("$WL" "${DIR[$t]}" w4 "$p" | sed -n 's/.*files_per_s=\([0-9.]*\).*/\1/p')
            RUNS[$t.$p]="${RUNS[$t.$p]:-} $v"
            echo "round $r P=$p $t $v" >&2
        done
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "W4 files/s, median of $ROUNDS interleaved rounds ($W4_FILES files; rev $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
for p in $PS; do
    b=$(echo "${RUNS[brick.$p]}" | median)
    for t in $TARGETS; do
        m=$(echo "${RUNS[$t.$p]}" | median)
        awk -v t="$t" -v p="$p" -v m="$m" -v b="$b" -v runs="${RUNS[$t.$p]}" \
            'BEGIN{printf "P=%-3s %-10s %8.1f  %.2fx brick  (runs:%s)\n", p, t, m, m/b, runs}'
    done
done
