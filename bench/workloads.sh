#!/usr/bin/env bash
# Copied from /work/shared/bench/workloads.sh (the project's standard workload script, shared with
# the peer measurements in /work/shared/bench/README.md); keep the two in sync, do not fork it.
# Target-agnostic anchor workloads (derived from GlusterFS user reports).
#
#   workloads.sh TARGET_DIR WORKLOAD [ARG]
#
# TARGET_DIR is any mounted directory (local ext4, a FUSE mount, a GlusterFS
# mount, our own project's mount...). Everything is created below
# TARGET_DIR/anchor-* and removed by the workload itself (or by `cleanup`).
#
# Each measurement prints one machine-readable line on stdout:
#   RESULT workload=wN key=value ...
# Everything else (warnings, tool chatter) goes to stderr.
#
# WORKLOAD:
#   w1 BS        small-block streaming write: dd if=/dev/zero bs=BS conv=fsync,
#                W1_MIB MiB in total (BS: 4k, 128k, 1M, ...)
#   w2           big-file write (bs=1M, conv=fsync) of W2_MIB MiB, drop caches,
#                read it back with bs=1M
#   w3-prep      lay out W3_FILES files of 64 KiB in W3_JOBS sub-directories (fio)
#   w3 BS        fio randrw 60/40 over those files, W3_JOBS jobs, BS transfers,
#                W3_RUNTIME s, O_DIRECT if W3_DIRECT=1
#   w4-prep      create W4_FILES files of 500-800 KiB in a 2-level tree
#   w4 P         drop caches, read every corpus file whole from P concurrent
#                processes (W4_READER=cat|dd)
#   w5-prep      build the uncompressed tar used by w5 (local, not on target)
#   w5           tar xf W5_TAR into the target, sync, rm -rf it (each timed)
#   w6           dbench: W6_CLIENTS clients for W6_SECS s with W6_LOADFILE, in
#                TARGET_DIR/anchor-w6; prints MB/s ("Throughput ... MB/sec"), the
#                op count, and (phase=ops) dbench's per-operation counts. With
#                ANCHOR_W6_SNAP set, that command is run with the argument "start"
#                at dbench's first "execute" line and "end" at its first "cleanup"
#                line (the measured phase; warmup and cleanup are outside), and
#                the seconds between the two are printed as window_secs
#   cleanup      remove TARGET_DIR/anchor-*
#   info         print what the target is (fs type, mount line)
#
# Environment (defaults in brackets):
#   W1_MIB [256]  W2_MIB [2048]
#   W3_FILES [4000] W3_JOBS [16] W3_RUNTIME [15] W3_RAMP [2] W3_DIRECT [1]
#   W3_ENGINE [psync]
#   W4_FILES [2000] W4_READER [cat]
#   W5_SRC [/usr/src/linux-source-6.1.tar.xz]
#   W5_SUBSET [linux-source-6.1/drivers/net]  (space separated paths, or "all")
#   W6_CLIENTS [8] W6_SECS [60] W6_LOADFILE [/usr/share/dbench/client.txt]
#   ANCHOR_DIR2        []   two-mount mode for w3 and w5: a second mount of the SAME
#                           volume as TARGET_DIR. The work is split between the two
#                           mounts, both halves at once: w3 runs two fio groups of
#                           W3_JOBS/2 jobs over W3_FILES/2 files each (TARGET_DIR/
#                           anchor-w3/m0 through the first mount, .../m1 through the
#                           second; ops/s and MB/s are the sums), w5 extracts one copy
#                           of the tar per mount (anchor-w5/m0, anchor-w5/m1: twice the
#                           entries of one-mount w5), syncs, and removes both at once
#   ANCHOR_CACHE [${TMPDIR:-/tmp}/anchor-cache]   local cache (w5 tar, w4 list)
#   W5_TAR [$ANCHOR_CACHE/w5-<subset-hash>.tar]
#   ANCHOR_DROP_CACHES [1]  sync + echo 3 > /proc/sys/vm/drop_caches before reads
#   ANCHOR_DROP_HOOK   []   extra shell command run after dropping caches
#                           (e.g. remount a target whose daemon caches data)
#   ANCHOR_NFS_URL     []   NFS mode for w3/w4: libnfs URL of an export whose
#                           root is TARGET_DIR (prep still writes via TARGET_DIR,
#                           the measurement goes through the user-space NFS
#                           client). Example:
#                           nfs://127.0.0.1/vfs?version=3&nfsport=2049&mountport=20048
#   FIO_NFS [$ANCHOR_CACHE/fio-nfs if present, else fio]  fio with the libnfs
#                           engine "nfs" for w3 (build it with build-fio-nfs.sh)
#   NFS_READ [$ANCHOR_CACHE/nfs-read]  built from nfs-read.c on first use (w4)
set -euo pipefail

usage() { awk 'NR > 1 && /^set -e/ {exit} NR > 1' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
T=$1; W=$2; ARG=${3:-}
[ -d "$T" ] || { echo "workloads.sh: target dir '$T' does not exist" >&2; exit 2; }

W1_MIB=${W1_MIB:-256}
W2_MIB=${W2_MIB:-2048}
W3_FILES=${W3_FILES:-4000}
W3_JOBS=${W3_JOBS:-16}
W3_RUNTIME=${W3_RUNTIME:-15}
W3_RAMP=${W3_RAMP:-2}
W3_DIRECT=${W3_DIRECT:-1}
W3_ENGINE=${W3_ENGINE:-psync}
W4_FILES=${W4_FILES:-2000}
W4_READER=${W4_READER:-cat}
W5_SRC=${W5_SRC:-/usr/src/linux-source-6.1.tar.xz}
W5_SUBSET=${W5_SUBSET:-linux-source-6.1/drivers/net}
W6_CLIENTS=${W6_CLIENTS:-8}
W6_SECS=${W6_SECS:-60}
W6_LOADFILE=${W6_LOADFILE:-/usr/share/dbench/client.txt}
T2=${ANCHOR_DIR2:-}
if [ -n "$T2" ]; then
    [ -d "$T2" ] || { echo "workloads.sh: ANCHOR_DIR2 '$T2' does not exist" >&2; exit 2; }
fi
ANCHOR_CACHE=${ANCHOR_CACHE:-${TMPDIR:-/tmp}/anchor-cache}
W5_TAR=${W5_TAR:-$ANCHOR_CACHE/w5-$(printf '%s' "$W5_SRC $W5_SUBSET" | md5sum | cut -c1-10).tar}

now() { date +%s.%N; }
# elapsed T0 T1 -> seconds with 3 decimals
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
# div A B [fmt]
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN{ if (b>0) printf f, a/b; else print "nan"}'; }
mbps() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.1f", a/b/1e6; else print "nan"}'; }
result() { echo "RESULT workload=$W $*"; }
die() { echo "workloads.sh: $*" >&2; exit 1; }

drop_caches() {
    sync
    if [ "${ANCHOR_DROP_CACHES:-1}" = 1 ]; then
        if ! (echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; then
            echo "WARN: could not drop page cache (not root?); reads may be warm" >&2
        fi
    fi
    if [ -n "${ANCHOR_DROP_HOOK:-}" ]; then sh -c "$ANCHOR_DROP_HOOK"; fi
}

bytes_of() { # 4k / 128k / 1M / 1G / plain number -> bytes
    local v=$1 n u
    n=${v%[kKmMgG]}; u=${v#"$n"}
    case $u in
        k|K) echo $((n * 1024));;
        m|M) echo $((n * 1024 * 1024));;
        g|G) echo $((n * 1024 * 1024 * 1024));;
        '') echo "$n";;
    esac
}

w1() {
    local bs=${ARG:?w1 needs a block size, e.g. 4k}
    local bsb total count d=$T/anchor-w1 t0 t1 s
    bsb=$(bytes_of "$bs"); total=$((W1_MIB * 1024 * 1024)); count=$((total / bsb))
    mkdir -p "$d"; rm -f "$d/f"; sync
    t0=$(now)
    dd if=/dev/zero of="$d/f" bs="$bs" count="$count" conv=fsync status=none
    t1=$(now)
    rm -f "$d/f"; rmdir "$d" 2>/dev/null || true
    s=$(elapsed "$t0" "$t1")
    result "bs=$bs bytes=$total secs=$s mbps=$(mbps "$total" "$s")"
}

w2() {
    local d=$T/anchor-w2 total t0 t1 ws rs
    total=$((W2_MIB * 1024 * 1024))
    mkdir -p "$d"; rm -f "$d/big"; sync
    t0=$(now)
    dd if=/dev/zero of="$d/big" bs=1M count="$W2_MIB" conv=fsync status=none
    t1=$(now); ws=$(elapsed "$t0" "$t1")
    drop_caches
    t0=$(now)
    dd if="$d/big" of=/dev/null bs=1M status=none
    t1=$(now); rs=$(elapsed "$t0" "$t1")
    rm -f "$d/big"; rmdir "$d" 2>/dev/null || true
    result "bytes=$total write_secs=$ws read_secs=$rs write_mbps=$(mbps "$total" "$ws") read_mbps=$(mbps "$total" "$rs") read_over_write=$(div "$ws" "$rs" %.3f)"
}

w3_args() { # w3_args [DIR JOBS FILES]: fills the array W3A with the fio options shared by prep and run
    local dir=${1:-$T/anchor-w3} jobs=${2:-$W3_JOBS} files=${3:-$W3_FILES}
    local per=$((files / jobs))
    W3A=(--name=w3 --directory="$dir" '--filename_format=d$jobnum/f$filenum'
         --nrfiles="$per" --filesize=64k --numjobs="$jobs" --rw=randrw --rwmixread=60
         --fallocate=none --file_service_type=random --group_reporting)
}

# Two-mount mode (ANCHOR_DIR2): half the jobs and half the files per mount, in m0 (first
# mount) and m1 (second mount) below anchor-w3; the halves' fio groups run at once.
w3_half_args() { # w3_half_args K: W3A for half K (0 or 1)
    local jobs=$((W3_JOBS / 2)) files=$((W3_FILES / 2)) root=$T
    [ "$1" = 0 ] || root=$T2
    [ "$jobs" -ge 1 ] || die "two-mount w3 needs W3_JOBS >= 2"
    w3_args "$root/anchor-w3/m$1" "$jobs" "$files"
}

w3_prep() {
    local t0 t1 s
    mkdir -p "$T/anchor-w3"
    t0=$(now)
    if [ -n "$T2" ]; then
        mkdir -p "$T/anchor-w3/m0" "$T/anchor-w3/m1"
        local pids=() k
        for k in 0 1; do
            w3_half_args "$k"
            fio "${W3A[@]}" --bs=64k --ioengine=psync --create_only=1 --output=/dev/null &
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k" || die "w3-prep: a fio half failed"; done
    else
        w3_args
        fio "${W3A[@]}" --bs=64k --ioengine=psync --create_only=1 --output=/dev/null
    fi
    sync
    t1=$(now); s=$(elapsed "$t0" "$t1")
    local n; n=$(find "$T/anchor-w3" -type f | wc -l)
    result "phase=prep files=$n secs=$s files_per_s=$(div "$n" "$s")"
}

w3() {
    local bs=${ARG:?w3 needs a block size, e.g. 4k} json client=kernel
    [ -d "$T/anchor-w3" ] || die "run w3-prep first"
    json=$(mktemp "${TMPDIR:-/tmp}/anchor-w3.XXXXXX")
    w3_args
    if [ -n "${ANCHOR_NFS_URL:-}" ]; then
        # user-space NFS client: no page cache on the client, O_DIRECT is moot;
        # only the direct=1 variant is run
        if [ "$W3_DIRECT" != 1 ]; then echo "w3: NFS mode runs only direct=1" >&2; rm -f "$json"; return 0; fi
        client=libnfs
        local per=$((W3_FILES / W3_JOBS))
        local fio_nfs=${FIO_NFS:-$ANCHOR_CACHE/fio-nfs}
        [ -x "$fio_nfs" ] || fio_nfs=fio
        "$fio_nfs" --name=w3 '--filename_format=anchor-w3/d$jobnum/f$filenum' \
            --nrfiles="$per" --filesize=64k --numjobs="$W3_JOBS" --rw=randrw --rwmixread=60 \
            --file_service_type=random --group_reporting --bs="$bs" --ioengine=nfs \
            --nfs_url="$ANCHOR_NFS_URL" --iodepth=1 \
            --time_based --runtime="$W3_RUNTIME" --ramp_time="$W3_RAMP" \
            --output-format=json --output="$json"
    elif [ -n "$T2" ]; then
        # two mounts: one fio group per mount, both at once; the halves' numbers are summed
        local pids=() k
        for k in 0 1; do
            w3_half_args "$k"
            fio "${W3A[@]}" --bs="$bs" --ioengine="$W3_ENGINE" --direct="$W3_DIRECT" \
                --time_based --runtime="$W3_RUNTIME" --ramp_time="$W3_RAMP" \
                --output-format=json --output="$json.m$k" &
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k" || die "w3: a fio half failed"; done
        client=kernel-2mounts
    else
        fio "${W3A[@]}" --bs="$bs" --ioengine="$W3_ENGINE" --direct="$W3_DIRECT" \
            --time_based --runtime="$W3_RUNTIME" --ramp_time="$W3_RAMP" \
            --output-format=json --output="$json"
    fi
    local jsons=("$json")
    [ -z "$T2" ] || [ -n "${ANCHOR_NFS_URL:-}" ] || jsons=("$json.m0" "$json.m1")
    python3 - "$bs" "$W3_DIRECT" "$client" "${jsons[@]}" <<'EOF2'
import json, sys
# one fio JSON per mount; the sums are what the volume served (p50 latencies: the mean of
# the halves' p50, one value for one mount)
bs, direct, client, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
riops = wiops = mbps = rlat = wlat = 0.0
err = 0
for path in files:
    job = json.load(open(path))["jobs"][0]
    r, w = job["read"], job["write"]
    riops += r["iops"]; wiops += w["iops"]
    mbps += (r["io_bytes"] + w["io_bytes"]) / 1e6 / (max(r["runtime"], w["runtime"]) / 1000.0)
    rlat += r["clat_ns"]["percentile"].get("50.000000", 0) / 1000 / len(files)
    wlat += w["clat_ns"]["percentile"].get("50.000000", 0) / 1000 / len(files)
    err = err or job.get("error", 0)
mounts = f"mounts={len(files)} " if len(files) > 1 else ""
print(f"RESULT workload=w3 bs={bs} direct={direct} client={client} {mounts}ops_per_s={riops+wiops:.0f} "
      f"read_iops={riops:.0f} write_iops={wiops:.0f} mbps={mbps:.1f} "
      f"rlat_us_p50={rlat:.0f} wlat_us_p50={wlat:.0f} fio_error={err}")
EOF2
    rm -f "$json" "${jsons[@]}"
}

NFS_READ=${NFS_READ:-$ANCHOR_CACHE/nfs-read}
build_nfs_read() {
    [ -x "$NFS_READ" ] && return 0
    mkdir -p "$(dirname "$NFS_READ")"
    cc -O2 -o "$NFS_READ" "$(dirname "$0")/nfs-read.c" -lnfs || die "cannot build nfs-read (apt-get install libnfs-dev)"
}

w4_list() { # deterministic relative file names + sizes (no target access)
    awk -v n="$W4_FILES" 'BEGIN{for(i=0;i<n;i++){printf "d%02d/f%05d %d\n", i%40, i, (500 + (i*7919)%301)*1024}}'
}

w4_prep() {
    local d=$T/anchor-w4 t0 t1 s
    rm -rf "$d"; mkdir -p "$d"
    t0=$(now)
    w4_list | python3 -c '
import os, sys, zlib
root = sys.argv[1]
blob = os.urandom(1 << 20)
for line in sys.stdin:
    name, size = line.split(); size = int(size)
    p = os.path.join(root, name)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    # rotate the start so files differ
    off = (zlib.crc32(name.encode()) & 0xffff) * 8
    data = (blob[off:] + blob[:off])[:size]
    with open(p, "wb") as f:
        f.write(data)
' "$d"
    sync
    t1=$(now); s=$(elapsed "$t0" "$t1")
    local bytes; bytes=$(w4_list | awk '{s+=$2} END{print s}')
    result "phase=prep files=$W4_FILES bytes=$bytes secs=$s"
}

w4() {
    local p=${ARG:?w4 needs a reader count P} d=$T/anchor-w4 list n batch t0 t1 s bytes reader=$W4_READER
    [ -d "$d" ] || die "run w4-prep first"
    if [ -n "${ANCHOR_NFS_URL:-}" ]; then build_nfs_read; reader=libnfs; fi
    list=$(mktemp "${TMPDIR:-/tmp}/anchor-w4.XXXXXX")
    w4_list | awk '{print $1}' > "$list"
    bytes=$(w4_list | awk '{s+=$2} END{print s}')
    n=$W4_FILES
    batch=$(( (n + 4 * p - 1) / (4 * p) ))   # >= 4 batches per reader for balance
    drop_caches
    t0=$(now)
    if [ -n "${ANCHOR_NFS_URL:-}" ]; then
        "$NFS_READ" "$ANCHOR_NFS_URL" "$p" "$list" /anchor-w4/ || die "nfs-read failed"
    else case $W4_READER in
        cat) (cd "$d" && xargs -a "$list" -P "$p" -n "$batch" cat > /dev/null);;
        dd)  (cd "$d" && xargs -a "$list" -P "$p" -n "$batch" \
                sh -c 'for f do dd if="$f" of=/dev/null bs=1M status=none; done' sh);;
        *) die "W4_READER must be cat or dd";;
    esac; fi
    t1=$(now); s=$(elapsed "$t0" "$t1")
    rm -f "$list"
    result "p=$p reader=$reader files=$n bytes=$bytes secs=$s files_per_s=$(div "$n" "$s" %.1f) mbps=$(mbps "$bytes" "$s")"
}

w5_prep() {
    mkdir -p "$ANCHOR_CACHE"
    if [ -s "$W5_TAR" ]; then echo "w5 tar exists: $W5_TAR" >&2; else
        [ -r "$W5_SRC" ] || die "missing $W5_SRC (apt-get install linux-source-6.1)"
        local tmp; tmp=$(mktemp -d "$ANCHOR_CACHE/w5x.XXXXXX")
        if [ "$W5_SUBSET" = all ]; then
            xz -dc "$W5_SRC" > "$W5_TAR.part"
        else
            # shellcheck disable=SC2086
            xz -dc "$W5_SRC" | tar xf - -C "$tmp" $W5_SUBSET
            # shellcheck disable=SC2086
            (cd "$tmp" && tar cf "$W5_TAR.part" --sort=name $W5_SUBSET)
        fi
        rm -rf "$tmp"; mv "$W5_TAR.part" "$W5_TAR"
    fi
    local n b
    n=$(tar tf "$W5_TAR" | wc -l); b=$(stat -c %s "$W5_TAR")
    result "phase=prep tar=$W5_TAR entries=$n tar_bytes=$b subset=${W5_SUBSET// /,}"
}

w5() {
    local d=$T/anchor-w5 t0 t1 ts ss rs n mounts=1 extra=
    [ -s "$W5_TAR" ] || die "run w5-prep first ($W5_TAR missing)"
    rm -rf "$d"; mkdir -p "$d"
    cat "$W5_TAR" > /dev/null      # source tar warm in page cache: not measured
    sync
    n=$(tar tf "$W5_TAR" | wc -l)
    if [ -n "$T2" ]; then
        # two mounts: one copy per mount (m0 through the first, m1 through the second), at once
        mounts=2; extra="mounts=2 "
        mkdir -p "$d/m0" "$d/m1"
        local dirs=("$d/m0" "$T2/anchor-w5/m1") pids=() k
        [ -d "${dirs[1]}" ] || die "w5: $d/m1 made through the first mount is not seen as ${dirs[1]} through the second"
        t0=$(now)
        for k in 0 1; do tar xf "$W5_TAR" -C "${dirs[$k]}" & pids+=($!); done
        for k in "${pids[@]}"; do wait "$k" || die "w5: a tar x half failed"; done
        t1=$(now); ts=$(elapsed "$t0" "$t1")
        t0=$(now); sync; t1=$(now); ss=$(elapsed "$t0" "$t1")
        pids=()
        t0=$(now)
        for k in 0 1; do rm -rf "${dirs[$k]}" & pids+=($!); done
        for k in "${pids[@]}"; do wait "$k" || die "w5: an rm -rf half failed"; done
        rm -rf "$d"
        t1=$(now); rs=$(elapsed "$t0" "$t1")
    else
        t0=$(now); tar xf "$W5_TAR" -C "$d"; t1=$(now); ts=$(elapsed "$t0" "$t1")
        t0=$(now); sync; t1=$(now); ss=$(elapsed "$t0" "$t1")
        t0=$(now); rm -rf "$d"; t1=$(now); rs=$(elapsed "$t0" "$t1")
    fi
    sync
    n=$((n * mounts))
    result "${extra}entries=$n tar_secs=$ts sync_secs=$ss rm_secs=$rs tar_sync_secs=$(awk -v a="$ts" -v b="$ss" 'BEGIN{printf "%.3f", a+b}') entries_per_s_tar=$(div "$n" "$ts" %.0f) entries_per_s_rm=$(div "$n" "$rs" %.0f)"
}

w6() {
    local d=$T/anchor-w6 out line mbps lat ops secs
    command -v dbench >/dev/null || die "w6 needs dbench (apt-get install dbench)"
    [ -r "$W6_LOADFILE" ] || die "w6: no load file $W6_LOADFILE (W6_LOADFILE; Debian's dbench ships /usr/share/dbench/client.txt)"
    rm -rf "$d"; mkdir -p "$d"; sync
    out=$(mktemp "${TMPDIR:-/tmp}/anchor-w6.XXXXXX")
    # dbench prints a progress line a second: "warmup N sec", then "execute N sec", then
    # "cleanup"; the snapshot hook marks the execute phase (what dbench's counts cover)
    dbench -c "$W6_LOADFILE" -D "$d" -t "$W6_SECS" "$W6_CLIENTS" 2>&1 | while IFS= read -r line; do
        printf '%s\n' "$line" >> "$out"
        case $line in
            *" execute "*" sec "*) if [ ! -e "$out.t0" ]; then
                    [ -z "${ANCHOR_W6_SNAP:-}" ] || sh -c "$ANCHOR_W6_SNAP" w6-snap start >&2 || echo "w6: the snapshot hook failed (start)" >&2
                    now > "$out.t0"; fi;;
            *" cleanup "*) if [ -e "$out.t0" ] && [ ! -e "$out.t1" ]; then
                    now > "$out.t1"
                    [ -z "${ANCHOR_W6_SNAP:-}" ] || sh -c "$ANCHOR_W6_SNAP" w6-snap end >&2 || echo "w6: the snapshot hook failed (end)" >&2
                    fi;;
        esac
    done
    grep -v ' sec  latency ' "$out" >&2 || true
    mbps=$(awk '/^Throughput /{print $2}' "$out" | tail -1)
    lat=$(sed -n 's/^Throughput .*max_latency=\([0-9.]*\) ms.*/\1/p' "$out" | tail -1)
    [ -n "$mbps" ] || { rm -f "$out" "$out".t?; die "w6: dbench printed no Throughput line"; }
    # the operation table: " NTCreateX      35809     0.021    43.476"
    local opsline
    opsline=$(awk '$1 ~ /^[A-Za-z]+$/ && NF == 4 && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ {printf "%s=%s ", $1, $2}' "$out")
    ops=$(awk '$1 ~ /^[A-Za-z]+$/ && NF == 4 && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ {s += $2} END {print s + 0}' "$out")
    secs=nan
    if [ -s "$out.t0" ] && [ -s "$out.t1" ]; then secs=$(elapsed "$(cat "$out.t0")" "$(cat "$out.t1")"); fi
    rm -f "$out" "$out".t?
    result "clients=$W6_CLIENTS secs=$W6_SECS mbps=$mbps max_latency_ms=${lat:-nan} ops=$ops ops_per_s=$(div "$ops" "$W6_SECS" %.0f) window_secs=$secs"
    result "phase=ops $opsline"
    # after the results: a target that cannot remove what dbench left is reported as a
    # failed call (run.sh lists it under the table) without losing the measurement
    rm -rf "$d" || die "w6: rm -rf $d failed after dbench (the measurement above stands)"
}

main() {
    case $W in
        w1) w1;;
        w2) w2;;
        w3-prep) W=w3; w3_prep;;
        w3) w3;;
        w4-prep) W=w4; w4_prep;;
        w4) w4;;
        w5-prep) W=w5; w5_prep;;
        w5) w5;;
        w6) w6;;
        cleanup) rm -rf "$T"/anchor-w1 "$T"/anchor-w2 "$T"/anchor-w3 "$T"/anchor-w4 "$T"/anchor-w5 "$T"/anchor-w6;;
        info)
            echo "target=$T fstype=$(stat -f -c %T "$T") blksize=$(stat -c %o "$T")"
            findmnt -n -T "$T" -o SOURCE,FSTYPE,OPTIONS 2>/dev/null || true
            [ -z "${ANCHOR_NFS_URL:-}" ] || echo "nfs_url=$ANCHOR_NFS_URL (w3/w4 through libnfs)";;
        *) usage;;
    esac
}

# everything is in functions and the file ends on this line, so editing the
# script while an old instance runs cannot make bash read half-updated text
main "$@"; exit $?
