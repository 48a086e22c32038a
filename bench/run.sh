#!/usr/bin/env bash
# bench/run.sh: the standard workloads (W1..W6 of bench/workloads.sh) on the floors and on xlfs
# volumes, in interleaved rounds, with one markdown table per workload and a JSON document.
#
#   bash bench/run.sh [OPTIONS]          (root: FUSE mounts, drop_caches, apt-get)
#
# What it does, in order:
#   1. installs what is missing with apt-get (fio, bindfs, linux-source-6.1 for W5, dbench
#      for W6);
#   2. cargo build --release --workspace (one invocation, from the repository root);
#   3. makes a scratch area in BENCH_DIR and the targets (see TARGETS);
#   4. for each workload: one-time preparation, then ROUNDS interleaved rounds
#      (round 1: every target, round 2: every target, ...); the order of the targets and,
#      inside a target, the variants (block sizes, reader counts) rotate by one each round;
#   5. xlfs-bench report: OUT/DATE-MODE.md (tables), OUT/DATE-MODE.json (every raw value,
#      date, git revision, kernel, tool versions, options, knobs) and OUT/DATE-MODE.raw;
#      OUT/latest-MODE.{md,json} point at the newest whole run (a run with --only or
#      --mount-opts is named after them instead, e.g. DATE-w5-no-default-permissions.md);
#   6. unmounts everything and stops the bricks, also on error and Ctrl-C.
#
# Options:
#   --quick             small sizes (whole run: a few minutes); proves the harness works
#   --rounds N          interleaved rounds (default 3)
#   --only LIST         workloads, comma-separated: w1,w2,w3,w4,w5,w6 (default all)
#   --targets LIST      comma-separated, in table order (default: all of them; the ones that
#                       cannot be set up are reported as skipped with the reason):
#                         brick          a plain directory on the file system of the bricks
#                                        (the floor)
#                         bindfs         bindfs FUSE passthrough of a directory there
#                                        (the FUSE floor; libfuse, single-threaded)
#                         bindfs-mt      the same with bindfs --multithreaded
#                         xlfs           single-brick xlfs volume (volgen, xlfsd, xlfs-mount)
#                         xlfs-pt        the same volume layout, mounted with --passthrough
#                                        (reads by the kernel straight from the brick's file;
#                                        no writeback cache)
#                         xlfs-2m        single-brick xlfs volume mounted twice; W3 and W5
#                                        split their work between the two mounts, both
#                                        halves at once (see ANCHOR_DIR2 in workloads.sh);
#                                        the other workloads skip this target
#                         xlfs-base      single-brick xlfs volume run with the binaries of
#                                        --baseline (another build: the previous commit), to
#                                        compare two builds side by side in one run
#                         xlfs-replica2  xlfs volume, replica 2 (2 bricks)
#                         xlfs-replica3  xlfs volume, replica 3 (3 bricks; not in the default list)
#                         xlfs-arbiter   xlfs volume, replica 3 arbiter 1 (2 data bricks and an
#                                        arbiter; not in the default list)
#                         xlfs-stripe4   xlfs volume, stripe 4 (4 bricks)
#                         xlfs-dist4     xlfs volume, distribute 4 (4 bricks)
#                         xlfs-tcp       single brick, the mount reaching it over TCP (no
#                                        Unix socket): the baseline of xlfs-tls
#                         xlfs-tls       single brick over TCP with TLS (certificates from
#                                        `xlfs tls`, mutual authentication)
#                         gluster, gluster-replica2, gluster-dist4, gluster-shard4
#                                        GlusterFS peers with the same brick layouts (shard 4
#                                        stands in for stripe 4, which GlusterFS removed);
#                                        only when glusterd and gluster are installed
#   --out DIR           where results go (default bench/results)
#   --no-build          do not run cargo build (the binaries must exist in target/release)
#   --baseline REV|DIR  the build the target xlfs-base runs (added to --targets unless they
#                       name it): a git revision (e.g. 5c3931c) is checked out with
#                       `git worktree add --detach` in BENCH_DIR/cache/baseline-REV and built
#                       there (cargo build --release --workspace; the first time it is seeded
#                       with a copy of target/release so only the workspace crates compile);
#                       the worktree is kept for the next run (run.sh --cleanup removes it).
#                       Or a target/release directory of another build
#   --no-install        do not apt-get install missing tools (fail or skip instead)
#   --mount-opts "..."  extra xlfs-mount options for every xlfs volume
#                       (e.g. "--no-writeback-cache"; see target/release/xlfs-mount --help)
#   --volume-opts "..." options set on every xlfs volume before it starts, KEY=VALUE
#                       separated by spaces (e.g. "performance.io-cache=on"; see
#                       target/release/xlfs volume options)
#   --remount-on-drop   W2/W4: also unmount + remount xlfs volumes when caches are dropped,
#                       so the client-side io-cache is cold too (default: kernel caches only,
#                       as for the GlusterFS peer)
#   --gluster MODE      auto (default: peers when installed) or off
#   --bench-dir DIR     scratch area (default $BENCH_DIR or /var/tmp/xlfs-bench); wiped at
#                       start except DIR/cache (the W5 tar), so use a dedicated directory
#   --timeout SECS      limit per workload call (default 1800, quick 300)
#   --cleanup           only undo a killed run: unmount everything under the scratch area,
#                       stop and delete its volumes, then exit
#   -h, --help          this text
#
# Workload knobs (environment; the values used are recorded in the results). Full / --quick:
#   W1_MIB 256 / 32          W1_BS_LIST "4k 128k 1M"
#   W2_MIB 2048 / 128
#   W3_FILES 4000 / 256      W3_JOBS 16 / 4      W3_RUNTIME 15 / 3    W3_RAMP 2 / 1
#   W3_VARIANTS "4k:1 32k:1" (BS:O_DIRECT; add 4k:0 for buffered)     W3_ENGINE psync
#   W4_FILES 2000 / 120      W4_P_LIST "1 2 5 10 20 30" / "1 5 30"     W4_READER cat
#   W5_SRC /usr/src/linux-source-6.1.tar.xz
#   W5_SUBSET linux-source-6.1/drivers/net / linux-source-6.1/drivers/net/ethernet/intel
#             ("all" for the whole tree)
#   W6_CLIENTS 8 / 8         W6_SECS 60 / 10     W6_LOADFILE /usr/share/dbench/client.txt
#   ANCHOR_DROP_CACHES 1
# A knob set in the environment wins over both defaults.
#
# Files in BENCH_DIR: state/ (XLFS_STATE_DIR of the bench volumes), bricks/, dirs/ (floor
# directories), mnt/, cache/ (W5 tar, kept), tmp/, run.log (workload stderr), raw (results so
# far; kept when a run is interrupted), lock.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WL=$HERE/workloads.sh
REL=$ROOT/target/release
XLFS=$REL/xlfs
BENCH_BIN=$REL/xlfs-bench

ALL_TARGETS="brick,bindfs,bindfs-mt,xlfs,xlfs-2m,xlfs-base,xlfs-pt,xlfs-replica2,xlfs-stripe4,xlfs-dist4,xlfs-tcp,xlfs-tls,gluster,gluster-replica2,gluster-dist4,gluster-shard4"
# Known but not run unless named in --targets.
EXTRA_TARGETS="xlfs-replica3,xlfs-arbiter"
QUICK=0; ROUNDS=3; ONLY=w1,w2,w3,w4,w5,w6; TARGETS=$ALL_TARGETS; OUT=$HERE/results
BASELINE=; BUILD=1; INSTALL=1; MOUNT_OPTS=; VOLUME_OPTS=; REMOUNT=0; GLUSTER=auto; CLEANUP_ONLY=0; TIMEOUT=
BENCH_DIR=${BENCH_DIR:-/var/tmp/xlfs-bench}
ARGS_USED="$*"

usage() { awk 'NR > 1 && /^set -e/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }
die() { echo "run.sh: $*" >&2; exit 2; }
say() { echo "[bench $(date +%T)] $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1;;
        --rounds) ROUNDS=${2:?--rounds N}; shift;;
        --only) ONLY=${2:?--only LIST}; shift;;
        --targets) TARGETS=${2:?--targets LIST}; shift;;
        --out) OUT=${2:?--out DIR}; shift;;
        --no-build) BUILD=0;;
        --baseline) BASELINE=${2:?--baseline DIR}; shift;;
        --no-install) INSTALL=0;;
        --mount-opts) MOUNT_OPTS=${2?--mount-opts STRING}; shift;;
        --volume-opts) VOLUME_OPTS=${2?--volume-opts STRING}; shift;;
        --remount-on-drop) REMOUNT=1;;
        --gluster) GLUSTER=${2:?--gluster auto|off}; shift;;
        --bench-dir) BENCH_DIR=${2:?--bench-dir DIR}; shift;;
        --timeout) TIMEOUT=${2:?--timeout SECS}; shift;;
        --cleanup) CLEANUP_ONLY=1;;
        -h|--help) usage; exit 0;;
        *) usage >&2; die "unknown option $1";;
    esac
    shift
done

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive number"
BASELINE_REV=
if [ -n "$BASELINE" ]; then
    if [ -d "$BASELINE" ]; then
        BASELINE=$(cd "$BASELINE" && pwd)
        for b in xlfs xlfsd xlfs-mount; do
            [ -x "$BASELINE/$b" ] || die "--baseline: $BASELINE/$b is missing (build that tree with cargo build --release --workspace)"
        done
    else
        BASELINE_REV=$(git -C "$ROOT" rev-parse --verify -q "$BASELINE^{commit}") \
            || die "--baseline: $BASELINE is neither a directory nor a git revision of $ROOT"
        BASELINE=   # set once the worktree is built (baseline_build)
    fi
    case ",$TARGETS," in *,xlfs-base,*) ;; *) TARGETS=$TARGETS,xlfs-base;; esac
else
    case ",$TARGETS," in *,xlfs-base,*)
        [ "$TARGETS" = "$ALL_TARGETS" ] && TARGETS=${TARGETS/,xlfs-base/} || die "target xlfs-base needs --baseline DIR";;
    esac
fi
case $GLUSTER in auto|off) ;; *) die "--gluster must be auto or off";; esac
case $BENCH_DIR in /?*) ;; *) die "--bench-dir must be an absolute path";; esac
BENCH_DIR=${BENCH_DIR%/}
[ "$BENCH_DIR" != / ] || die "--bench-dir cannot be /"
for w in ${ONLY//,/ }; do case $w in w1|w2|w3|w4|w5|w6) ;; *) die "unknown workload $w (w1..w6)";; esac; done
for t in ${TARGETS//,/ }; do
    case ",$ALL_TARGETS,$EXTRA_TARGETS," in *",$t,"*) ;; *) die "unknown target $t (known: $ALL_TARGETS,$EXTRA_TARGETS)";; esac
done
MODE=full; [ "$QUICK" = 0 ] || MODE=quick
# A partial run (some workloads, or extra mount options) is named after what it ran, e.g.
# DATE-w5-no-default-permissions.md, and leaves latest-MODE pointing at the last whole run.
TAG=$MODE
if [ "$ONLY" != w1,w2,w3,w4,w5,w6 ] || [ -n "$MOUNT_OPTS$VOLUME_OPTS" ]; then
    TAG=${ONLY//,/-}$(printf '%s %s' "$MOUNT_OPTS" "$VOLUME_OPTS" | tr -s ' =' '--' | sed 's/^-*/-/; s/[^A-Za-z0-9_.-]//g; s/-$//; s/^-$//')
    [ "$QUICK" = 0 ] || TAG=$TAG-quick
fi

# ---- knobs: the environment wins, then the mode's default ---------------------------------
knob() { # knob NAME FULL QUICK
    local v=${!1:-}
    if [ -z "$v" ]; then if [ "$QUICK" = 1 ]; then v=$3; else v=$2; fi; fi
    printf -v "$1" '%s' "$v"; export "${1?}"
}
knob W1_MIB 256 32
knob W1_BS_LIST "4k 128k 1M" "4k 128k 1M"
knob W2_MIB 2048 128
knob W3_FILES 4000 256
knob W3_JOBS 16 4
knob W3_RUNTIME 15 3
knob W3_RAMP 2 1
knob W3_VARIANTS "4k:1 32k:1" "4k:1 32k:1"
knob W3_ENGINE psync psync
knob W4_FILES 2000 120
knob W4_P_LIST "1 2 5 10 20 30" "1 5 30"
knob W4_READER cat cat
knob W5_SRC /usr/src/linux-source-6.1.tar.xz /usr/src/linux-source-6.1.tar.xz
knob W5_SUBSET linux-source-6.1/drivers/net linux-source-6.1/drivers/net/ethernet/intel
knob W6_CLIENTS 8 8
knob W6_SECS 60 10
knob W6_LOADFILE /usr/share/dbench/client.txt /usr/share/dbench/client.txt
knob ANCHOR_DROP_CACHES 1 1
KNOBS="W1_MIB W1_BS_LIST W2_MIB W3_FILES W3_JOBS W3_RUNTIME W3_RAMP W3_VARIANTS W3_ENGINE W4_FILES W4_P_LIST W4_READER W5_SRC W5_SUBSET W6_CLIENTS W6_SECS W6_LOADFILE ANCHOR_DROP_CACHES"
[ -n "$TIMEOUT" ] || { if [ "$QUICK" = 1 ]; then TIMEOUT=300; else TIMEOUT=1800; fi; }
export ANCHOR_CACHE=$BENCH_DIR/cache
export TMPDIR=$BENCH_DIR/tmp
unset W5_TAR ANCHOR_NFS_URL ANCHOR_DROP_HOOK ANCHOR_DIR2 ANCHOR_W6_SNAP

STATE=$BENCH_DIR/state
export XLFS_STATE_DIR=$STATE
RAW=$BENCH_DIR/raw
LOG=$BENCH_DIR/run.log

# ---- what is mounted under the scratch area -------------------------------------------------
our_mounts() { # mount points under BENCH_DIR, deepest first
    awk -v p="$BENCH_DIR/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r
}
force_umount() { # force_umount DIR: every way we know, quietly
    local m=$1
    grep -q " $m " /proc/mounts || return 0
    fusermount -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
}
our_volumes() {
    [ -x "$XLFS" ] && [ -d "$STATE/volumes" ] || return 0
    local v
    for v in "$STATE"/volumes/*/; do [ -d "$v" ] && basename "$v"; done
    return 0
}

# ---- cleanup (EXIT trap; also --cleanup) ----------------------------------------------------
MOUNTED=()        # "kind:dir" in mount order
VOLUMES=()        # xlfs volume names we created
declare -A VOLUME_BIN=()   # volume -> the xlfs binary that made it, when not ours (--baseline)
GVOLUMES=()       # gluster volume names we created
GLUSTERD_STARTED=0
WPID=             # the running workload call (its own process group, from timeout)
CLEANED=0
INTERRUPTED=0

# shellcheck disable=SC2317  # reached through the traps
kill_workload() {
    if [ -n "$WPID" ] && kill -0 "$WPID" 2>/dev/null; then
        kill -TERM -- "-$WPID" 2>/dev/null || kill -TERM "$WPID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$WPID" 2>/dev/null || true
        wait "$WPID" 2>/dev/null || true
    fi
    WPID=
}

# shellcheck disable=SC2317  # reached through the traps
cleanup() {
    local rc=$?
    [ "$CLEANED" = 0 ] || return 0
    CLEANED=1
    trap '' INT TERM
    kill_workload
    local i m kind
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        kind=${MOUNTED[$i]%%:*}; m=${MOUNTED[$i]#*:}
        case $kind in
            xlfs) "$XLFS" umount "$m" >>"$LOG" 2>&1 || true;;
            *) fusermount -u "$m" >>"$LOG" 2>&1 || umount "$m" >>"$LOG" 2>&1 || true;;
        esac
        force_umount "$m"
    done
    local x
    for v in "${VOLUMES[@]}"; do
        x=${VOLUME_BIN[$v]:-$XLFS}
        "$x" volume stop "$v" >>"$LOG" 2>&1 || true
        "$x" volume delete "$v" >>"$LOG" 2>&1 || true
    done
    gluster_down
    for m in $(our_mounts); do force_umount "$m"; done
    if [ -n "$(our_mounts)" ]; then
        echo "run.sh: still mounted under $BENCH_DIR: $(our_mounts | tr '\n' ' ')" >&2
        [ "$rc" != 0 ] || rc=1
    fi
    if [ "$INTERRUPTED" = 1 ]; then
        echo "run.sh: interrupted; cleaned up. Results so far: $RAW, log: $LOG" >&2
    fi
    exit "$rc"
}

# shellcheck disable=SC2317  # reached through the traps
on_signal() {
    trap '' INT TERM
    INTERRUPTED=1
    echo >&2
    say "got SIG$1, stopping"
    kill_workload
    exit 130
}

cleanup_only() {
    say "cleaning up $BENCH_DIR"
    for m in $(our_mounts); do
        if "$XLFS" umount "$m" >/dev/null 2>&1; then echo "unmounted $m (xlfs umount)"; continue; fi
        force_umount "$m"
        grep -q " $m " /proc/mounts || echo "unmounted $m"
    done
    for v in $(our_volumes); do
        "$XLFS" volume stop "$v" 2>&1 || true
        "$XLFS" volume delete "$v" 2>&1 || true
    done
    if command -v gluster >/dev/null 2>&1 && [ -s "$BENCH_DIR/gluster/glusterd.pid" ]; then
        GLUSTERD_STARTED=1
        mapfile -t GVOLUMES < <(gluster --mode=script volume list 2>/dev/null | grep '^xlfsbench-' || true)
        gluster_down
    fi
    rm -f "$BENCH_DIR/pid"
    baseline_remove
    if [ -n "$(our_mounts)" ]; then echo "still mounted: $(our_mounts | tr '\n' ' ')" >&2; exit 1; fi
    say "clean"
}

# ---- the baseline build (--baseline REV) ---------------------------------------------------
baseline_build() { # worktree of BASELINE_REV in the cache, built; sets BASELINE
    local short=${BASELINE_REV:0:12} wt=$BENCH_DIR/cache/baseline-${BASELINE_REV:0:12}
    if [ ! -e "$wt/.git" ]; then
        say "git worktree add --detach $wt $short"
        rm -rf "$wt"
        git -C "$ROOT" worktree add --detach "$wt" "$BASELINE_REV" >>"$LOG" 2>&1 \
            || die "--baseline: git worktree add $wt $short failed (log: $LOG)"
        # seed with this tree's build: the dependencies are the same crates, so only the
        # workspace's own crates compile
        if [ -d "$REL" ] && [ ! -e "$wt/target/release" ]; then
            mkdir -p "$wt/target" && cp -a "$REL" "$wt/target/" || true
        fi
    fi
    [ "$(git -C "$wt" rev-parse HEAD)" = "$BASELINE_REV" ] || die "--baseline: $wt is not at $short (run.sh --cleanup removes it)"
    say "cargo build --release --workspace in $wt (baseline $short)"
    (cd "$wt" && cargo build --release --workspace) >>"$LOG" 2>&1 \
        || { tail -30 "$LOG" >&2; die "--baseline: cargo build --release --workspace failed in $wt (log: $LOG)"; }
    BASELINE=$wt/target/release
    for b in xlfs xlfsd xlfs-mount; do
        [ -x "$BASELINE/$b" ] || die "--baseline: the build in $wt made no $b"
    done
}

baseline_remove() { # the worktrees --baseline REV made in the cache
    local wt
    for wt in "$BENCH_DIR"/cache/baseline-*; do
        [ -d "$wt" ] || continue
        git -C "$ROOT" worktree remove --force "$wt" 2>&1 || rm -rf "$wt"
        echo "removed the baseline worktree $wt"
    done
    git -C "$ROOT" worktree prune 2>/dev/null || true
}

# ---- GlusterFS peer -------------------------------------------------------------------------
G() { gluster --mode=script "$@"; }
GF_HOST=${GF_HOST:-$(hostname)}
gluster_down() {
    local v
    for v in "${GVOLUMES[@]}"; do
        G volume stop "$v" force >>"$LOG" 2>&1 || true
        G volume delete "$v" >>"$LOG" 2>&1 || true
    done
    GVOLUMES=()
    if [ "$GLUSTERD_STARTED" = 1 ] && [ -s "$BENCH_DIR/gluster/glusterd.pid" ]; then
        local pid; pid=$(cat "$BENCH_DIR/gluster/glusterd.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        rm -f "$BENCH_DIR/gluster/glusterd.pid"
        GLUSTERD_STARTED=0
    fi
}

# ---- helpers --------------------------------------------------------------------------------
meta() { echo "META $1=$2" >> "$RAW"; }
skip() { # skip TARGET REASON
    echo "SKIP target=$1 reason=$2" >> "$RAW"
    say "SKIP $1: $2"
}
want() { case ",$TARGETS," in *",$1,"*) return 0;; esac; return 1; }
wants_workload() { case ",$ONLY," in *",$1,"*) return 0;; esac; return 1; }
one_line() { tr '\n' ' ' | sed -e 's/  */ /g' -e 's/ $//' | cut -c1-400; }

apt_install() { # apt_install PACKAGE...
    if [ "$INSTALL" = 0 ]; then return 1; fi
    [ "$(id -u)" = 0 ] || return 1
    say "apt-get install -y $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$LOG" 2>&1 && return 0
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$LOG" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$LOG" 2>&1
}

NAMES=(); DIRS=(); REMOUNTS=()
DIRS2=()          # the second mount of the same volume (xlfs-2m), else empty
TVOL=(); TBIN=()  # xlfs targets: the volume and the xlfs binary that runs it (statedumps)
add_target() { # add_target NAME DIR ROLE INFO [REMOUNT_HOOK]
    NAMES+=("$1"); DIRS+=("$2"); REMOUNTS+=("${5:-}"); DIRS2+=(""); TVOL+=(""); TBIN+=("")
    local fs
    fs=$(findmnt -n -T "$2" -o FSTYPE 2>/dev/null | head -1 || true)
    echo "TARGET name=$1 role=$3 info=$4 (${fs:-?} at $2)" >> "$RAW"
    say "target $1: $2"
}

wait_mounted() { # wait_mounted DIR: up to 10 s
    for _ in $(seq 100); do grep -q " $1 " /proc/mounts && return 0; sleep 0.1; done
    return 1
}

setup_bindfs() { # setup_bindfs NAME [bindfs options]
    local name=$1; shift
    if ! command -v bindfs >/dev/null; then skip "$name" "bindfs is not installed (apt-get install bindfs)"; return; fi
    local src=$BENCH_DIR/dirs/$name-src mnt=$BENCH_DIR/mnt/$name err
    mkdir -p "$src" "$mnt"
    if ! err=$(bindfs "$@" "$src" "$mnt" 2>&1 9>&-) || ! wait_mounted "$mnt"; then
        skip "$name" "bindfs $* failed: $(echo "$err" | one_line)"; return
    fi
    MOUNTED+=("bindfs:$mnt")
    local mt="single-threaded"; [ $# -eq 0 ] || mt="$*"
    add_target "$name" "$mnt" fuse-floor "$BINDFS_VERSION ($mt) over a directory on the bricks' file system"
}

setup_xlfs() { # setup_xlfs NAME: volume create (volgen), start, mount
    local name=$1 vol=bench-$1 bricks=() args=() n=1 layout err i pt= XLFS=$XLFS sets=()
    case $name in
        xlfs) n=1; layout="single brick";;
        xlfs-2m) n=1; layout="single brick, mounted twice (W3, W5: half the work through each mount, at once)";;
        xlfs-base) n=1; layout="single brick, baseline build $BASELINE"; XLFS=$BASELINE/xlfs;;
        xlfs-pt) n=1; layout="single brick, xlfs-mount --passthrough"; pt=--passthrough;;
        xlfs-replica2) n=2; args=(--replica 2); layout="replica 2";;
        xlfs-replica3) n=3; args=(--replica 3); layout="replica 3";;
        xlfs-arbiter) n=3; args=(--replica 3 --arbiter 1); layout="replica 3 arbiter 1";;
        xlfs-stripe4) n=4; args=(--stripe 4); layout="stripe 4";;
        xlfs-dist4) n=4; layout="distribute 4";;
        xlfs-tcp) n=1; layout="single brick over TCP"
            sets=("protocol.client.unix-socket-dir=");;
        xlfs-tls) n=1; layout="single brick over TCP with TLS"
            local tls=$BENCH_DIR/tls
            if [ ! -e "$tls/ca.pem" ]; then
                "$XLFS" tls ca "$tls" --name bench >> "$LOG" 2>&1 &&
                    "$XLFS" tls issue "$tls" brick.bench client.bench >> "$LOG" 2>&1 ||
                    { skip "$name" "xlfs tls failed (see $LOG)"; return; }
            fi
            sets=("protocol.client.unix-socket-dir="
                "protocol.server.tls=on" "protocol.server.tls-cert=$tls/brick.bench.pem"
                "protocol.server.tls-key=$tls/brick.bench.key" "protocol.server.tls-ca=$tls/ca.pem"
                "protocol.client.tls=on" "protocol.client.tls-cert=$tls/client.bench.pem"
                "protocol.client.tls-key=$tls/client.bench.key" "protocol.client.tls-ca=$tls/ca.pem");;
    esac
    for ((i = 0; i < n; i++)); do bricks+=("$BENCH_DIR/bricks/$name/b$i"); done
    if ! err=$("$XLFS" volume create "$vol" "${bricks[@]}" "${args[@]}" 2>&1); then
        # keep the sentence, drop the list of searched paths
        skip "$name" "$layout: xlfs volume create refused: $(echo "$err" | sed 's/ (unknown translator type[^;]*; searched: [^)]*)//' | one_line)"
        return
    fi
    echo "$err" >> "$LOG"
    VOLUMES+=("$vol")
    [ "$XLFS" = "$REL/xlfs" ] || VOLUME_BIN[$vol]=$XLFS
    local kv
    for kv in "${sets[@]}" $VOLUME_OPTS; do
        if ! err=$("$XLFS" volume set "$vol" "${kv%%=*}" "${kv#*=}" 2>&1); then
            skip "$name" "$layout: xlfs volume set $kv refused: $(echo "$err" | one_line)"; return
        fi
        echo "$err" >> "$LOG"
    done
    if ! err=$("$XLFS" volume start "$vol" 2>&1 9>&-); then
        skip "$name" "$layout: xlfs volume start failed: $(echo "$err" | one_line)"; return
    fi
    echo "$err" >> "$LOG"
    local mnt=$BENCH_DIR/mnt/$name
    mkdir -p "$mnt"
    local mo=()
    # shellcheck disable=SC2206
    [ -z "$MOUNT_OPTS$pt" ] || mo=(-- $MOUNT_OPTS $pt)
    if ! err=$("$XLFS" mount "$vol" "$mnt" "${mo[@]}" 2>&1 9>&-) || ! wait_mounted "$mnt"; then
        skip "$name" "$layout: xlfs mount failed: $(echo "$err" | one_line)"; return
    fi
    echo "$err" >> "$LOG"
    MOUNTED+=("xlfs:$mnt")
    local mnt2=
    if [ "$name" = xlfs-2m ]; then
        # the second client: another `xlfs mount` of the same volume (its own xlfs-mount
        # process, graph and caches), as a second machine's mount would be
        mnt2=$BENCH_DIR/mnt/$name-b
        mkdir -p "$mnt2"
        if ! err=$("$XLFS" mount "$vol" "$mnt2" "${mo[@]}" 2>&1 9>&-) || ! wait_mounted "$mnt2"; then
            skip "$name" "$layout: second xlfs mount failed: $(echo "$err" | one_line)"; return
        fi
        echo "$err" >> "$LOG"
        MOUNTED+=("xlfs:$mnt2")
    fi
    local hook=
    if [ "$REMOUNT" = 1 ]; then
        hook="'$XLFS' umount '$mnt' >/dev/null && '$XLFS' mount '$vol' '$mnt' ${mo[*]} >/dev/null"
    fi
    add_target "$name" "$mnt" xlfs "xlfs volume $vol, $layout (volgen default client stack${VOLUME_OPTS:+ with $VOLUME_OPTS})${MOUNT_OPTS:+, xlfs-mount $MOUNT_OPTS}${mnt2:+; second mount $mnt2}" "$hook"
    local last=$((${#NAMES[@]} - 1))
    DIRS2[last]=$mnt2; TVOL[last]=$vol; TBIN[last]=$XLFS
}

gluster_up() { # starts glusterd bound to 127.0.0.1 unless one answers already; 0 when usable
    if G pool list >/dev/null 2>&1; then
        say "using the running glusterd"
        return 0
    fi
    mkdir -p "$BENCH_DIR/gluster"/{etc,log}
    sed 's|^\( *\)option transport.socket.listen-port 24007|&\n\1option transport.socket.bind-address 127.0.0.1|' \
        /etc/glusterfs/glusterd.vol > "$BENCH_DIR/gluster/etc/glusterd.vol"
    glusterd -f "$BENCH_DIR/gluster/etc/glusterd.vol" --pid-file="$BENCH_DIR/gluster/glusterd.pid" \
        --log-file="$BENCH_DIR/gluster/log/glusterd.log" --log-level=INFO >>"$LOG" 2>&1 9>&- || return 1
    GLUSTERD_STARTED=1
    for _ in $(seq 30); do G pool list >/dev/null 2>&1 && return 0; sleep 1; done
    return 1
}

GLUSTER_OK=
setup_gluster() { # setup_gluster NAME
    local name=$1 vol bricks=() n=1 layout err i
    if [ "$GLUSTER" = off ]; then skip "$name" "GlusterFS peer disabled (--gluster off)"; return; fi
    if ! command -v glusterd >/dev/null || ! command -v gluster >/dev/null; then
        skip "$name" "GlusterFS is not installed (glusterd/gluster not found; apt-get install glusterfs-server glusterfs-client to add the peer)"
        return
    fi
    if [ -z "$GLUSTER_OK" ]; then
        GLUSTER_OK=no
        if ! getent hosts "$GF_HOST" | grep -q '^127\.'; then
            GLUSTER_WHY="GF_HOST=$GF_HOST does not resolve to 127.x (the gluster CLI refuses 127.0.0.1 as a brick host; map the host name in /etc/hosts or set GF_HOST)"
        elif ! gluster_up; then
            GLUSTER_WHY="glusterd did not start (see $BENCH_DIR/gluster/log/glusterd.log)"
        else
            GLUSTER_OK=yes
            GLUSTER_VERSION=$(glusterfs --version 2>/dev/null | head -1)
            meta version.glusterfs "$GLUSTER_VERSION"
        fi
    fi
    [ "$GLUSTER_OK" = yes ] || { skip "$name" "$GLUSTER_WHY"; return; }
    vol=xlfsbench-$name
    case $name in
        gluster) n=1; layout="single brick";;
        gluster-replica2) n=2; bricks=(replica 2); layout="replica 2";;
        gluster-dist4) n=4; layout="distribute 4";;
        gluster-shard4) n=4; layout="distribute 4 + features.shard (GlusterFS has no stripe since 6)";;
    esac
    rm -rf "$BENCH_DIR/gluster/bricks/$name"; mkdir -p "$BENCH_DIR/gluster/bricks/$name"
    for ((i = 0; i < n; i++)); do bricks+=("$GF_HOST:$BENCH_DIR/gluster/bricks/$name/b$i"); done
    if G volume info "$vol" >/dev/null 2>&1; then
        skip "$name" "a GlusterFS volume $vol exists already (run.sh --cleanup, or gluster volume delete $vol)"; return
    fi
    if ! err=$(G volume create "$vol" "${bricks[@]}" force 2>&1); then
        skip "$name" "gluster volume create failed: $(echo "$err" | one_line)"; return
    fi
    GVOLUMES+=("$vol")
    if [ "$name" = gluster-shard4 ]; then G volume set "$vol" features.shard on >>"$LOG" 2>&1 || true; fi
    if ! err=$(G volume start "$vol" 2>&1 9>&-); then
        skip "$name" "gluster volume start failed: $(echo "$err" | one_line)"; return
    fi
    local mnt=$BENCH_DIR/mnt/$name
    mkdir -p "$mnt"
    if ! err=$(mount -t glusterfs -o "log-file=$BENCH_DIR/gluster/log/mnt-$name.log" "127.0.0.1:/$vol" "$mnt" 2>&1 9>&-); then
        skip "$name" "mount -t glusterfs failed: $(echo "$err" | one_line)"; return
    fi
    MOUNTED+=("gluster:$mnt")
    add_target "$name" "$mnt" peer "$GLUSTER_VERSION volume $vol, $layout, default volume options, FUSE"
}

# run_wl INDEX ROUND ARGS...: one workloads.sh call on target INDEX, RESULT lines tagged
run_wl() {
    local i=$1 round=$2; shift 2
    local name=${NAMES[$i]} dir=${DIRS[$i]} out rc=0 line snap= sd=
    out=$(mktemp "$TMPDIR/wl.XXXXXX")
    echo "## $(date +%T) round=$round target=$name $*" >> "$LOG"
    if [ "$1" = w6 ] && [ -n "${TVOL[$i]}" ]; then
        # io-stats of the mount (and of the brick: what crossed the wire) at the start and
        # the end of dbench's execute phase
        sd=$(mktemp -d "$TMPDIR/snap.XXXXXX")
        snap="'${TBIN[$i]}' volume statedump '${TVOL[$i]}' --client '$dir' --json > '$sd/client-'\$1.json; '${TBIN[$i]}' volume statedump '${TVOL[$i]}' --brick 0 --json > '$sd/brick-'\$1.json"
    fi
    ANCHOR_DROP_HOOK=${REMOUNTS[$i]} ANCHOR_DIR2=${DIRS2[$i]} ANCHOR_W6_SNAP=$snap \
        timeout -k 10 "$TIMEOUT" "$WL" "$dir" "$@" >"$out" 2>>"$LOG" 9>&- &
    WPID=$!
    wait "$WPID" || rc=$?
    WPID=
    while IFS= read -r line; do
        case $line in
            RESULT*) echo "round=$round target=$name ${line#RESULT }" >> "$RAW";;
            *) echo "$line" >> "$LOG";;
        esac
    done < "$out"
    rm -f "$out"
    if [ -n "$sd" ]; then
        local side
        for side in client brick; do
            if [ -s "$sd/$side-start.json" ] && [ -s "$sd/$side-end.json" ]; then
                python3 "$HERE/fop-delta.py" "$sd/$side-start.json" "$sd/$side-end.json" \
                    | sed "s/^/round=$round target=$name workload=w6 phase=fops side=$side /" >> "$RAW" \
                    || echo "ERROR round=$round target=$name workload=w6 fop counts of the $side statedumps unreadable (see $LOG)" >> "$RAW"
            else
                echo "## w6: no $side statedumps for $name round $round" >> "$LOG"
            fi
        done
        rm -rf "$sd"
    fi
    if [ "$rc" -ne 0 ]; then
        local why=; [ "$rc" != 124 ] || why=" (timeout ${TIMEOUT}s)"
        echo "ERROR round=$round target=$name workload=${1%-prep} rc=$rc$why args=$*" >> "$RAW"
        say "ERROR target=$name round=$round $* rc=$rc$why (see $LOG)"
    fi
}

rotate() { # rotate N WORD...: the words starting at index N (mod count)
    local n=$1; shift
    local a=("$@") k=$# i
    for ((i = 0; i < k; i++)); do printf '%s ' "${a[$(((i + n) % k))]}"; done
}

run_workload() { # run_workload wN
    local w=$1 r i v idx=()
    say "== $w"
    # the two-mount target runs only the workloads that split their work between mounts
    for i in "${!NAMES[@]}"; do
        if [ -n "${DIRS2[$i]}" ] && [ "$w" != w3 ] && [ "$w" != w5 ]; then
            echo "## $w: ${NAMES[$i]} skipped (two-mount target: W3 and W5 only)" >> "$LOG"
            continue
        fi
        idx+=("$i")
    done
    [ "${#idx[@]}" -gt 0 ] || return 0
    case $w in
        w3|w4) for i in "${idx[@]}"; do run_wl "$i" 0 "$w-prep"; done;;
        w5) run_wl "${idx[0]}" 0 w5-prep;;
    esac
    for r in $(seq 1 "$ROUNDS"); do
        # The targets' order rotates by one each round too: no target always runs right
        # after the same other one (a fixed order biased latency-bound rounds by ~8%).
        for i in $(rotate $((r - 1)) "${idx[@]}"); do
            # shellcheck disable=SC2086
            case $w in
                w1) for v in $(rotate $((r - 1)) $W1_BS_LIST); do run_wl "$i" "$r" w1 "$v"; done;;
                w2) run_wl "$i" "$r" w2;;
                w3) for v in $(rotate $((r - 1)) $W3_VARIANTS); do
                        W3_DIRECT=${v#*:} run_wl "$i" "$r" w3 "${v%%:*}"
                    done;;
                w4) for v in $(rotate $((r - 1)) $W4_P_LIST); do run_wl "$i" "$r" w4 "$v"; done;;
                w5) run_wl "$i" "$r" w5;;
                w6) run_wl "$i" "$r" w6;;
            esac
        done
        say "$w round $r/$ROUNDS done"
    done
    for i in "${idx[@]}"; do "$WL" "${DIRS[$i]}" cleanup >>"$LOG" 2>&1 || true; done
}

# ---- main -----------------------------------------------------------------------------------
main() {
    [ "$(id -u)" = 0 ] || die "run as root (FUSE mounts, drop_caches, apt-get)"
    mkdir -p "$BENCH_DIR"
    if [ -n "$(ls -A "$BENCH_DIR" 2>/dev/null)" ] && [ ! -e "$BENCH_DIR/.xlfs-bench" ]; then
        die "$BENCH_DIR is not empty and was not made by run.sh (no .xlfs-bench marker); pick another --bench-dir"
    fi
    touch "$BENCH_DIR/.xlfs-bench"
    # the lock is held by this shell only: every daemon it starts gets `9>&-`
    exec 9>"$BENCH_DIR/lock"
    if ! flock -n 9; then
        local holder; holder=$(cat "$BENCH_DIR/pid" 2>/dev/null || true)
        if [ -n "$holder" ] && tr '\0' ' ' < "/proc/$holder/cmdline" 2>/dev/null | grep -q run.sh; then
            die "another run.sh (pid $holder) is using $BENCH_DIR"
        fi
        [ "$CLEANUP_ONLY" = 1 ] || die "$BENCH_DIR/lock is held by another process (a daemon of a killed run?); try: bash $HERE/run.sh --cleanup --bench-dir $BENCH_DIR"
        say "lock held but no run.sh runs; cleaning up anyway"
    fi
    echo $$ > "$BENCH_DIR/pid"

    if [ "$CLEANUP_ONLY" = 1 ]; then LOG=/dev/null; cleanup_only; exit 0; fi

    if [ -n "$(our_mounts)" ] || [ -n "$(our_volumes)" ]; then
        echo "run.sh: the scratch area $BENCH_DIR is in use (a previous run was killed?):" >&2
        our_mounts | sed 's/^/  mounted: /' >&2
        our_volumes | sed 's/^/  volume:  /' >&2
        echo "clean up with:  bash $HERE/run.sh --cleanup --bench-dir $BENCH_DIR" >&2
        echo "(or by hand: XLFS_STATE_DIR=$STATE $XLFS umount DIR / volume stop NAME; umount -l DIR)" >&2
        exit 2
    fi

    trap cleanup EXIT
    trap 'on_signal INT' INT
    trap 'on_signal TERM' TERM

    rm -rf "${BENCH_DIR:?}"/{state,bricks,dirs,mnt,gluster,tmp}
    mkdir -p "$BENCH_DIR"/{state,bricks,dirs,mnt,tmp,cache}
    : > "$LOG"; : > "$RAW"
    say "scratch $BENCH_DIR, log $LOG, mode $MODE, rounds $ROUNDS, workloads $ONLY"

    # tools
    for tool in dd python3 xz tar findmnt timeout flock; do
        command -v "$tool" >/dev/null || die "$tool is missing"
    done
    if wants_workload w3 && ! command -v fio >/dev/null; then
        apt_install fio || die "fio is missing and could not be installed (apt-get install fio)"
    fi
    if { want bindfs || want bindfs-mt; } && ! command -v bindfs >/dev/null; then
        apt_install bindfs || say "bindfs could not be installed; the bindfs targets are skipped"
    fi
    if wants_workload w6 && ! command -v dbench >/dev/null; then
        apt_install dbench || die "dbench is missing and could not be installed (apt-get install dbench)"
    fi
    if wants_workload w6 && [ ! -r "$W6_LOADFILE" ]; then
        die "W6 needs the dbench load file $W6_LOADFILE (Debian's dbench ships /usr/share/dbench/client.txt; or set W6_LOADFILE)"
    fi
    if wants_workload w5 && [ ! -r "$W5_SRC" ]; then
        if [ "$W5_SRC" = /usr/src/linux-source-6.1.tar.xz ]; then
            apt_install linux-source-6.1 || true
        fi
        [ -r "$W5_SRC" ] || die "W5 needs $W5_SRC (apt-get install linux-source-6.1, or set W5_SRC, or --only without w5)"
    fi

    # build
    if [ "$BUILD" = 1 ]; then
        say "cargo build --release --workspace"
        (cd "$ROOT" && cargo build --release --workspace) >>"$LOG" 2>&1 \
            || { tail -30 "$LOG" >&2; die "cargo build --release --workspace failed (log: $LOG)"; }
    fi
    for b in xlfs xlfsd xlfs-mount xlfs-bench; do
        [ -x "$REL/$b" ] || die "$REL/$b is missing: cargo build --release --workspace (or drop --no-build)"
    done
    [ -z "$BASELINE_REV" ] || baseline_build

    # run description
    BINDFS_VERSION=$(bindfs --version 2>/dev/null | head -1 || echo "bindfs (not installed)")
    meta date "$(date +%F)"
    meta mode "$TAG"
    meta started "$(date -u +%FT%TZ)"
    meta git_rev "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    meta kernel "$(uname -r)"
    meta host "$(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2 / 1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
    meta bricks_fs "$(findmnt -n -T "$BENCH_DIR" -o FSTYPE,SOURCE,OPTIONS 2>/dev/null | head -1)"
    meta version.xlfs "$("$XLFS" --version 2>/dev/null | head -1)"
    meta version.fio "$(fio --version 2>/dev/null || echo 'not installed')"
    meta version.dbench "$(dbench --help 2>/dev/null | sed -n 's/^dbench version \([^ ]*\).*/dbench \1/p' | head -1 || true)"
    [ -z "$BASELINE" ] || meta baseline "${BASELINE_REV:+git $BASELINE_REV, }$BASELINE ($("$BASELINE/xlfs" --version 2>/dev/null | head -1))"
    meta version.bindfs "$BINDFS_VERSION"
    meta version.rustc "$(rustc --version 2>/dev/null || echo unknown)"
    meta rounds "$ROUNDS"
    meta opt.command "bench/run.sh $ARGS_USED"
    meta opt.only "$ONLY"
    meta opt.targets "$TARGETS"
    meta opt.mount_opts "${MOUNT_OPTS:-(none)}"
    meta opt.volume_opts "${VOLUME_OPTS:-(none)}"
    meta opt.remount_on_drop "$REMOUNT"
    meta opt.timeout_s "$TIMEOUT"
    meta opt.bench_dir "$BENCH_DIR"
    for k in $KNOBS; do meta "env.$k" "${!k}"; done

    # targets
    for t in ${TARGETS//,/ }; do
        case $t in
            brick) mkdir -p "$BENCH_DIR/dirs/brick"
                   add_target brick "$BENCH_DIR/dirs/brick" floor "plain directory on the bricks' file system";;
            bindfs) setup_bindfs bindfs;;
            bindfs-mt) setup_bindfs bindfs-mt --multithreaded;;
            xlfs*) setup_xlfs "$t";;
            gluster*) setup_gluster "$t";;
        esac
    done
    [ "${#NAMES[@]}" -gt 0 ] || die "no target could be set up"
    want xlfs && { [[ " ${NAMES[*]} " == *" xlfs "* ]] || say "WARNING: the single-brick xlfs volume could not be set up (see SKIP above)"; }
    for i in "${!NAMES[@]}"; do
        echo "## info ${NAMES[$i]}: $("$WL" "${DIRS[$i]}" info 2>&1 | tr '\n' ' ')" >> "$LOG"
    done

    # workloads
    for w in w1 w2 w3 w4 w5 w6; do
        wants_workload "$w" || continue
        run_workload "$w"
    done
    meta finished "$(date -u +%FT%TZ)"

    # report
    mkdir -p "$OUT"
    base=$OUT/$(date +%F)-$TAG; n=1; stem=$base
    while [ -e "$stem.md" ] || [ -e "$stem.json" ]; do n=$((n + 1)); stem=$base-$n; done
    cp "$RAW" "$stem.raw"
    "$BENCH_BIN" report --raw "$stem.raw" --out-md "$stem.md" --out-json "$stem.json"
    if [ "$TAG" = "$MODE" ]; then
        ln -sfn "$(basename "$stem.md")" "$OUT/latest-$MODE.md"
        ln -sfn "$(basename "$stem.json")" "$OUT/latest-$MODE.json"
    fi
    cat "$stem.md"
    say "results: $stem.md $stem.json $stem.raw (log: $LOG)"
}

# everything is in functions and the file ends on this line, so editing the script while
# an old instance runs cannot make bash read half-updated text
main; exit $?
