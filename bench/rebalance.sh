#!/usr/bin/env bash
# Rebalance rate, xlfs beside GlusterFS: a distribute 2 volume is filled through its mount
# (FILES files of KIB KiB over DIRS directories), two bricks are added, the page cache is
# dropped, and a rebalance runs to completion. Per round and system: the rebalance's wall
# time (start to completed, polled every 0.5 s), the files and bytes it moved (from its own
# status), files moved/s and MB/s, then every file read back through the mount against what
# was written and the link files left on the bricks (both must be 0 wrong / 0 left, or the
# script fails).
#
#   bash bench/rebalance.sh [WORKDIR]     (root; GlusterFS optional: glusterfs-server)
#
# Env: FILES (default 10000), DIRS (default 100), KIB (file sizes in KiB, MIN-MAX spread
# over the range, default 4-64), ROUNDS (default 2), SYSTEMS (default
# "xlfs gluster"; gluster is left out with a note when it is not installed), GF_HOST (the
# brick host name for gluster, default $(hostname): it must resolve to 127.x).
# Rounds alternate the systems' order. Prints one line per round and system, then the medians.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WORK=${1:-${TMPDIR:-/tmp}/xlfs-rebalance-bench}
FILES=${FILES:-10000}
DIRS=${DIRS:-100}
KIB=${KIB:-4-64}
ROUNDS=${ROUNDS:-2}
SYSTEMS=${SYSTEMS:-xlfs gluster}
GF_HOST=${GF_HOST:-$(hostname)}
XLFS=$ROOT/target/release/xlfs
FILL=$HERE/rebalance-fill.py
export XLFS_STATE_DIR=$WORK/state
export PATH=$ROOT/target/release:$PATH
[ -x "$XLFS" ] || { echo "rebalance: $XLFS missing: cargo build --release --workspace" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "rebalance: needs root (FUSE mounts, bricks)" >&2; exit 2; }

ME=rebalance
# shellcheck source=bench/gluster-lib.sh
. "$HERE/gluster-lib.sh"
VOL=
cleanup() {
    set +e
    if [ -n "$VOL" ]; then
        mountpoint -q "$WORK/mnt" && umount "$WORK/mnt" 2>/dev/null
        "$XLFS" volume rebalance "$VOL" stop >/dev/null 2>&1
        "$XLFS" umount "$WORK/mnt" >/dev/null 2>&1
        "$XLFS" volume stop "$VOL" >/dev/null 2>&1
        "$XLFS" volume delete "$VOL" >/dev/null 2>&1
        G volume rebalance "$VOL" stop >/dev/null 2>&1
        G volume stop "$VOL" force >/dev/null 2>&1
        G volume delete "$VOL" >/dev/null 2>&1
    fi
    mountpoint -q "$WORK/mnt" && umount -l "$WORK/mnt"
    gluster_stop xlfsrebal
    VOL=
}
trap cleanup EXIT
# A signal ends the script (the EXIT trap cleans up); a bare trap would let it run on.
trap 'exit 130' INT TERM

now() { date +%s.%N; }

# gx FIELD: FIELD of the aggregate of `gluster volume rebalance VOL status --xml` on stdin
gx() {
    python3 -c 'import sys, xml.etree.ElementTree as E
a = E.fromstring(sys.stdin.read()).find(".//volRebalance/aggregate")
print("" if a is None else a.findtext(sys.argv[1], ""))' "$1"
}

# round SYSTEM ROUND: one fill, add-brick, rebalance, check; prints the result line
round() {
    local sys=$1 r=$2 b=$WORK/bricks t0 t1 st moved bytes left
    VOL=xlfsrebal$r$sys
    rm -rf "$b"; mkdir -p "$b" "$WORK/mnt"
    case $sys in
        xlfs)
            "$XLFS" volume create "$VOL" "$b/0" "$b/1" >/dev/null
            "$XLFS" volume start "$VOL" >/dev/null
            "$XLFS" mount "$VOL" "$WORK/mnt" >/dev/null;;
        gluster)
            G volume create "$VOL" "$GF_HOST:$b/0" "$GF_HOST:$b/1" force >/dev/null
            G volume start "$VOL" >/dev/null
            mount -t glusterfs "127.0.0.1:/$VOL" "$WORK/mnt";;
    esac
    read -r _ total < <(python3 "$FILL" fill "$WORK/mnt" "$FILES" "$DIRS" "$KIB")
    # The files are read from the disk, as a rebalance of data written long ago would.
    sync; echo 3 > /proc/sys/vm/drop_caches
    case $sys in
        xlfs)
            "$XLFS" volume add-brick "$VOL" "$b/2" "$b/3" >/dev/null
            t0=$(now)
            "$XLFS" volume rebalance "$VOL" start >/dev/null
            while :; do
                st=$("$XLFS" volume rebalance "$VOL" status --json)
                case $(jq -r .state <<<"$st") in
                    completed) break;;
                    running) sleep 0.5;;
                    *) echo "rebalance: xlfs rebalance ended: $st" >&2; return 1;;
                esac
            done
            t1=$(now)
            moved=$(jq -r .files_moved <<<"$st"); bytes=$(jq -r .bytes_moved <<<"$st")
            [ "$(jq -r .failures <<<"$st")" = 0 ] || { echo "rebalance: xlfs failures: $st" >&2; return 1; }
            ;;
        gluster)
            G volume add-brick "$VOL" "$GF_HOST:$b/2" "$GF_HOST:$b/3" force >/dev/null
            t0=$(now)
            G volume rebalance "$VOL" start >/dev/null
            while :; do
                st=$(G volume rebalance "$VOL" status --xml)
                case $(gx statusStr <<<"$st") in
                    completed) break;;
                    "in progress"|"not started"|"") sleep 0.5;;
                    *) echo "rebalance: gluster rebalance ended: $st" >&2; return 1;;
                esac
            done
            t1=$(now)
            moved=$(gx files <<<"$st")
            bytes=$(gx size <<<"$st")
            [ "$(gx failures <<<"$st")" = 0 ] ||
                { echo "rebalance: gluster failures: $st" >&2; return 1; }
            ;;
    esac
    python3 "$FILL" check "$WORK/mnt" "$FILES" "$DIRS" "$KIB" >&2
    case $sys in
        xlfs) left=$(python3 "$FILL" linkfiles trusted.dht.linkto "$b"/{0,1,2,3});;
        gluster) left=$(python3 "$FILL" linkfiles trusted.glusterfs.dht.linkto "$b"/{0,1,2,3});;
    esac
    python3 - "$sys" "$r" "$t0" "$t1" "$moved" "$bytes" "$total" "$left" <<'EOF'
import sys
s, r, t0, t1, moved, b, total, left = sys.argv[1:]
secs = float(t1) - float(t0)
print(f"{s:8} round {r}: {secs:7.1f} s  moved {int(moved):6} files {int(b)/1e6:7.1f} MB  "
      f"{int(moved)/secs:7.1f} files/s {int(b)/1e6/secs:6.2f} MB/s  "
      f"(corpus {total and int(total)/1e6:.0f} MB)  link files left {left}")
EOF
    [ "$left" = 0 ] || { echo "rebalance: $sys left $left link files" >&2; return 1; }
    volume_down "$sys"
}

command -v jq >/dev/null || { echo "rebalance: needs jq (apt-get install jq)" >&2; exit 2; }
mkdir -p "$WORK"
systems=()
for s in $SYSTEMS; do
    case $s in
        xlfs) systems+=(xlfs);;
        gluster)
            gluster_usable && systems+=(gluster);;
        *) echo "rebalance: unknown system $s (xlfs, gluster)" >&2; exit 2;;
    esac
done
echo "rebalance: distribute 2 -> 4, $FILES files of $KIB KiB in $DIRS directories, $ROUNDS rounds: ${systems[*]}" >&2
out=$WORK/results.txt
: > "$out"
for r in $(seq "$ROUNDS"); do
    order=("${systems[@]}")
    if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[i]}"); done; fi
    for s in "${order[@]}"; do round "$s" "$r" >> "$out"; tail -n 1 "$out"; done
done
echo "medians:"
python3 - "$out" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+round \d+:\s+([\d.]+) s\s+moved\s+(\d+) files\s+([\d.]+) MB\s+([\d.]+) files/s\s+([\d.]+) MB/s", line)
    if m:
        rows.setdefault(m[1], []).append([float(x) for x in m.groups()[1:]])
for s, v in rows.items():
    med = [statistics.median(c) for c in zip(*v)]
    print(f"  {s:8} {med[0]:7.1f} s  moved {med[1]:6.0f} files {med[2]:7.1f} MB  {med[3]:7.1f} files/s {med[4]:6.2f} MB/s")
EOF
