#!/usr/bin/env bash
# Heal time of changed data on replica 2, xlfs beside GlusterFS: a replica 2 volume is
# mounted, brick 1 is killed (kill -9), MIB MiB of data is written through the mount while it
# is down, the brick is started again, and the time from its being back online until `heal
# info` lists no entry on any brick is measured (both systems' self-heal daemons do the work,
# polled every 0.5 s). Then both bricks' copies of every file are compared by checksum
# (the script fails on any difference) and the pending counters are checked to be zero.
#
#   bash bench/heal.sh [WORKDIR]     (root; GlusterFS optional: glusterfs-server)
#
# Env: MIB (changed data, default 1024), FILES (files it is spread over, default 8), MODE
# ("new": files created while the brick is down, healed by a full copy; "rewrite": files of
# 2 x MIB/FILES MiB written before the kill whose first half is rewritten while it is down,
# healed by checksum diff; default "new rewrite"), ROUNDS (default 2), SYSTEMS (default
# "xlfs gluster"), GF_HOST (brick host name for gluster, default $(hostname): must resolve
# to 127.x). Prints one line per round, system and mode, then the medians.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WORK=${1:-${TMPDIR:-/tmp}/xlfs-heal-bench}
MIB=${MIB:-1024}
FILES=${FILES:-8}
MODE=${MODE:-new rewrite}
ROUNDS=${ROUNDS:-2}
SYSTEMS=${SYSTEMS:-xlfs gluster}
GF_HOST=${GF_HOST:-$(hostname)}
XLFS=$ROOT/target/release/xlfs
export XLFS_STATE_DIR=$WORK/state
export PATH=$ROOT/target/release:$PATH
[ -x "$XLFS" ] || { echo "heal: $XLFS missing: cargo build --release --workspace" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "heal: needs root (FUSE mounts, bricks)" >&2; exit 2; }
command -v jq >/dev/null || { echo "heal: needs jq (apt-get install jq)" >&2; exit 2; }

ME=heal
# shellcheck source=bench/gluster-lib.sh
. "$HERE/gluster-lib.sh"
VOL=
SYS=
cleanup() {
    set +e
    if [ -n "$VOL" ]; then
        case $SYS in
            xlfs)
                "$XLFS" umount "$WORK/mnt" >/dev/null 2>&1
                "$XLFS" volume stop "$VOL" >/dev/null 2>&1
                "$XLFS" volume delete "$VOL" >/dev/null 2>&1;;
            gluster)
                mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
                G volume stop "$VOL" force >/dev/null 2>&1
                G volume delete "$VOL" >/dev/null 2>&1;;
        esac
    fi
    mountpoint -q "$WORK/mnt" && umount -l "$WORK/mnt"
    gluster_stop xlfsheal
    VOL=
    rm -rf "$WORK/bricks"
}
trap cleanup EXIT
# A signal ends the script (the EXIT trap cleans up); a bare trap would let it run on.
trap 'exit 130' INT TERM

now() { date +%s.%N; }

# write_files DIR MIB_EACH SEEK_MIB: FILES files f0.. of MIB_EACH MiB of random data at offset
# SEEK_MIB, in place (no truncation)
write_files() {
    local i
    for i in $(seq 0 $((FILES - 1))); do
        dd if=/dev/urandom of="$1/f$i" bs=1M count="$2" seek="$3" conv=notrunc status=none
    done
    sync
}

# pending: entries `heal info` lists over every brick (0 = healed)
pending() {
    case $SYS in
        xlfs) "$XLFS" volume heal "$VOL" info --json |
            jq 'if any(.bricks[]; .online | not) then -1 else [.bricks[].count] | add end';;
        gluster) G volume heal "$VOL" info --xml |
            python3 -c 'import sys, xml.etree.ElementTree as E
r = E.fromstring(sys.stdin.read())
bricks = r.findall(".//brick")
down = [b for b in bricks if (b.findtext("status") or "") != "Connected"]
print(-1 if down else sum(int(b.findtext("numberOfEntries") or 0) for b in bricks))';;
    esac
}

brick_pid() {
    case $SYS in
        xlfs) "$XLFS" volume status "$VOL" --json | jq -r '.bricks[1].pid';;
        gluster) G volume status "$VOL" --xml | python3 -c 'import sys, xml.etree.ElementTree as E
r = E.fromstring(sys.stdin.read())
for n in r.findall(".//node"):
    if (n.findtext("path") or "").endswith("/b1"): print(n.findtext("pid"))';;
    esac
}

# round SYSTEM MODE ROUND: prints the result line
round() {
    local mode=$2 r=$3 b=$WORK/bricks each t0 t1 pid p
    SYS=$1
    VOL=xlfsheal$r${mode}$SYS
    rm -rf "$b"; mkdir -p "$b" "$WORK/mnt"
    case $SYS in
        xlfs)
            "$XLFS" volume create "$VOL" "$b/b0" "$b/b1" --replica 2 >/dev/null
            "$XLFS" volume start "$VOL" >/dev/null
            "$XLFS" mount "$VOL" "$WORK/mnt" >/dev/null;;
        gluster)
            G volume create "$VOL" replica 2 "$GF_HOST:$b/b0" "$GF_HOST:$b/b1" force >/dev/null
            G volume start "$VOL" >/dev/null
            mount -t glusterfs "127.0.0.1:/$VOL" "$WORK/mnt";;
    esac
    each=$((MIB / FILES))
    [ "$mode" = rewrite ] && write_files "$WORK/mnt" $((2 * each)) 0
    pid=$(brick_pid)
    [ -n "$pid" ] && [ "$pid" != null ] || { echo "heal: no pid for brick 1 of $VOL" >&2; return 1; }
    kill -9 "$pid"
    write_files "$WORK/mnt" "$each" 0
    case $SYS in
        xlfs) "$XLFS" volume start "$VOL" >/dev/null; t0=$(now);;
        gluster)
            # glusterd may not have seen the brick die yet: `start force` is then a no-op.
            for _ in $(seq 120); do
                G volume start "$VOL" force >/dev/null
                p=$(brick_pid)
                [ -n "$p" ] && [ "$p" != -1 ] && [ "$p" != N/A ] && [ "$p" != "$pid" ] && break
                sleep 0.5
            done
            t0=$(now);;
    esac
    while :; do
        p=$(pending 2>/dev/null || echo -1)
        [ "$p" = 0 ] && break
        sleep 0.5
        if [ "$(echo "$(now) - $t0 > 1800" | bc)" = 1 ]; then
            echo "heal: $SYS $mode: still $p pending after 30 min" >&2; return 1
        fi
    done
    t1=$(now)
    # Both copies equal, counters zero.
    local diff=0 f
    for f in $(seq 0 $((FILES - 1))); do
        [ "$(md5sum < "$b/b0/f$f")" = "$(md5sum < "$b/b1/f$f")" ] || { diff=$((diff + 1)); echo "heal: f$f differs" >&2; }
        if getfattr -d -m 'trusted\.(afr|glusterfs\.afr|.*client)' -e hex "$b/b0/f$f" "$b/b1/f$f" 2>/dev/null |
            grep -E '^trusted\..*=0x' | grep -vq '=0x0*$'; then
            diff=$((diff + 1)); echo "heal: f$f keeps a non-zero pending counter" >&2
        fi
    done
    python3 - "$SYS" "$mode" "$r" "$t0" "$t1" "$MIB" "$diff" <<'EOF'
import sys
s, mode, r, t0, t1, mib, diff = sys.argv[1:]
secs = float(t1) - float(t0)
print(f"{s:8} {mode:8} round {r}: {secs:7.1f} s  {int(mib)} MiB changed  "
      f"{int(mib) * 1.048576 / secs:7.1f} MB/s  copies differing {diff}")
EOF
    [ "$diff" = 0 ] || return 1
    volume_down "$SYS"
}

mkdir -p "$WORK"
systems=()
for s in $SYSTEMS; do
    case $s in
        xlfs) systems+=(xlfs);;
        gluster) gluster_usable && systems+=(gluster);;
        *) echo "heal: unknown system $s (xlfs, gluster)" >&2; exit 2;;
    esac
done
echo "heal: replica 2, brick 1 killed, $MIB MiB in $FILES files changed, modes: $MODE, $ROUNDS rounds: ${systems[*]}" >&2
out=$WORK/results.txt
: > "$out"
for r in $(seq "$ROUNDS"); do
    order=("${systems[@]}")
    if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[i]}"); done; fi
    for m in $MODE; do
        for s in "${order[@]}"; do round "$s" "$m" "$r" >> "$out"; tail -n 1 "$out"; done
    done
done
echo "medians:"
python3 - "$out" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+(\S+)\s+round \d+:\s+([\d.]+) s\s+\d+ MiB changed\s+([\d.]+) MB/s", line)
    if m:
        rows.setdefault((m[1], m[2]), []).append((float(m[3]), float(m[4])))
for (s, mode), v in rows.items():
    print(f"{s:8} {mode:8} {statistics.median(x for x, _ in v):7.1f} s  "
          f"{statistics.median(y for _, y in v):7.1f} MB/s  ({len(v)} rounds)")
EOF
