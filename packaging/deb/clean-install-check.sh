#!/usr/bin/env bash
# Checks that the Debian package of xlfs installs on a clean Debian system and that
# `xlfs up` works from the installed package, in a debootstrap chroot (no VM needed).
#
#   packaging/deb/clean-install-check.sh [--deb FILE] [--suite SUITE] [--dir DIR] [--keep]
#                                        [--with-recommends] [--mirror URL]
#
# --deb              the package to test (default: build one from target/debug with
#                    `build.sh --profile debug --no-build`; nothing is compiled)
# --suite            the Debian suite of the chroot (default: this machine's, /etc/os-release)
# --dir              the chroot (default /tmp/xlfs-clean/root). A chroot this script made
#                    before (marker file DIR/.xlfs-clean-check) is reused: the packages
#                    installed since debootstrap are purged first, so every run starts clean
# --keep             keep the chroot (and the package built) for the next run or a look;
#                    without it both are deleted at the end
# --with-recommends  install the package's Recommends too (apt's default); without it
#                    only Depends are installed, which shows whether they are enough
# --mirror           Debian mirror (default http://deb.debian.org/debian)
#
# Steps (each prints PASS/FAIL/SKIP in the summary; exit 1 if a required one failed):
#   1 package  2 debootstrap  3 bind mounts  4 apt-get install + file list
#   5 xlfs --help, `xlfs up ./xlfs-demo` (README), write/read through the mount, Ctrl-C
#   6 systemd-analyze verify of the units (optional)  7 mount -t xlfs of that volume (optional)
# Needs root, debootstrap, /dev/fuse and network access to the mirror. Whatever it mounted
# or started is unmounted and stopped on exit, also on failure or Ctrl-C.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }

deb= suite= dir=/tmp/xlfs-clean/root keep=0 recommends=0 mirror=http://deb.debian.org/debian
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) deb=${2:?--deb needs a file}; shift 2 ;;
        --suite) suite=${2:?--suite needs a suite name}; shift 2 ;;
        --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
        --keep) keep=1; shift ;;
        --with-recommends) recommends=1; shift ;;
        --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "clean-install-check.sh: unknown argument $1" >&2; usage ;;
    esac
done

say() { printf '\n=== %s\n' "$*"; }
info() { printf '  %s\n' "$*"; }
die() { echo "clean-install-check.sh: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
if [ -z "$suite" ]; then
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$suite" ] || die "cannot tell this machine's suite from /etc/os-release; pass --suite"
fi
if [ -n "$deb" ]; then
    [ -f "$deb" ] || die "no package at $deb"
    deb=$(realpath "$deb")
fi
case "$dir" in /|"") die "refusing --dir $dir" ;; esac
mkdir -p "$dir"
dir=$(realpath "$dir")

repo=$(cd "$(dirname "$0")/../.." && pwd)
base=/tmp/xlfs-clean
work=$base/run.$$             # this run's logs and scratch
[ -z "$(awk -v d="$dir" '$5 == d || index($5, d "/") == 1' /proc/self/mountinfo)" ] \
    || die "something is mounted under $dir (another run, or leftovers: umount them first)"
mkdir -p "$work"
marker=$dir/.xlfs-clean-check
baseline=$dir/.xlfs-clean-check.packages
built_deb=                    # a package this run built (deleted unless --keep)
results=$work/results
: >"$results"
t0=$(date +%s)

# --- helpers --------------------------------------------------------------------------

# Runs a command in the chroot with a clean environment.
in_chroot() {
    chroot "$dir" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LC_ALL=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
}

# The mount points at or under DIR, innermost last (mountinfo order).
mounts_under() {
    awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo
}

# The pids of processes whose root is the chroot: exactly the ones this script started there.
chroot_pids() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$dir" ] && echo "${p#/proc/}"
    done
    return 0
}

mounted() { awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
fuse_mounted() { awk -v m="$1" '$5 == m && / - fuse/ { f = 1 } END { exit !f }' /proc/self/mountinfo; }

record() { echo "$1 $2 ${3:-}" >>"$results"; }
result_of() { awk -v s="$1" '$1 == s { r = $2 } END { print r }' "$results"; }

# Runs step N's function with errexit active inside it (a subshell outside any `if`), records
# PASS or FAIL unless the function recorded something itself.
run_step() {
    local n=$1 title=$2 fn=$3 rc
    say "step $n: $title"
    set +e
    ( set -e; "$fn" )
    rc=$?
    set -e
    if [ -z "$(result_of "$n")" ]; then
        if [ $rc = 0 ]; then record "$n" PASS "$title"; else record "$n" FAIL "$title"; fi
    fi
    info "step $n: $(result_of "$n")"
    return 0
}
skip_step() { say "step $1: $2"; info "SKIP: $3"; record "$1" SKIP "$2 ($3)"; }

stop_up() {     # stops `xlfs up` as Ctrl-C does; returns its exit status when it is our child
    local pid=$1 i
    [ -d "/proc/$pid" ] || return 0
    info "SIGINT (Ctrl-C) to xlfs up, pid $pid"
    kill -INT "$pid" 2>/dev/null || true
    for i in $(seq 1 60); do [ -d "/proc/$pid" ] || break; sleep 1; done
    if [ -d "/proc/$pid" ]; then
        info "xlfs up (pid $pid) still running 60 s after SIGINT; sending SIGTERM"
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 20); do [ -d "/proc/$pid" ] || break; sleep 1; done
    fi
}

cleanup() {
    local rc=$? pids p m left i
    trap - EXIT INT TERM
    set +e
    say "cleanup"
    [ -f "$work/up.pid" ] && stop_up "$(cat "$work/up.pid")"
    pids=$(chroot_pids)
    if [ -n "$pids" ]; then
        info "stopping processes left in the chroot: $(echo $pids)"
        for p in $pids; do kill -TERM "$p" 2>/dev/null; done
        for i in $(seq 1 10); do [ -z "$(chroot_pids)" ] && break; sleep 1; done
        for p in $(chroot_pids); do kill -KILL "$p" 2>/dev/null; done
        sleep 1
    fi
    for m in $(mounts_under | tac); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || info "cannot unmount $m"
        info "unmounted $m"
    done
    left=$(mounts_under)
    if [ -n "$left" ]; then
        echo "clean-install-check.sh: still mounted, chroot NOT deleted: $left" >&2
        rc=1
    elif [ "$keep" = 0 ]; then
        if [ -f "$marker" ] || [ -f "$dir/.xlfs-clean-check.partial" ] || [ -z "$(ls -A "$dir")" ]; then
            info "deleting the chroot $dir"
            rm -rf --one-file-system "$dir"
        else
            info "not deleting $dir: not a chroot of this script"
        fi
        [ -n "$built_deb" ] && rm -rf "$(dirname "$built_deb")"
    else
        rm -f "$dir/tmp/xlfs.deb"
        info "kept the chroot $dir${built_deb:+ and $built_deb}"
    fi
    rm -rf "$work" "$base/tmp"
    rmdir "$base" 2>/dev/null
    info "done in $(( $(date +%s) - t0 )) s"
    exit $rc
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# --- steps ----------------------------------------------------------------------------

step1() {
    if [ -n "$deb" ]; then
        info "using $deb"
    else
        mkdir -p "$base/tmp" "$base/deb"
        info "packaging/deb/build.sh --profile debug --no-build --out $base/deb"
        TMPDIR=$base/tmp "$repo/packaging/deb/build.sh" --profile debug --no-build --out "$base/deb" \
            | tee "$work/build.out"
        deb=$(tail -n 1 "$work/build.out")
        [ -f "$deb" ]
        echo "$deb" >"$work/deb"
    fi
    info "$(du -h "$deb" | cut -f1)  $deb"
    dpkg-deb -f "$deb" Package Version Architecture Depends Recommends | sed 's/^/  /'
}

step2() {
    if [ -f "$marker" ] && [ "$(cat "$marker")" = "$suite" ] && [ -f "$baseline" ]; then
        info "reusing the $suite chroot in $dir (made $(stat -c %y "$marker" | cut -d. -f1))"
        info "(step 4 purges what earlier runs installed first)"
        rm -rf "$dir/root/xlfs-demo" "$dir/root/rand.bin" "$dir/mnt/xlfs-t" "$dir/var/lib/xlfs" \
            "$dir/etc/xlfs" "$dir/tmp/xlfs.deb"
        touch "$work/reused"
        return 0
    fi
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
        [ -z "$(mounts_under)" ] || { info "$dir has mounts under it"; return 1; }
        [ -f "$marker" ] || [ -e "$dir/.xlfs-clean-check.partial" ] \
            || { info "$dir is not empty and not a chroot of this script: not touching it"; return 1; }
        info "removing the incomplete or other-suite chroot in $dir"
        rm -rf --one-file-system "$dir"
        mkdir -p "$dir"
    fi
    touch "$dir/.xlfs-clean-check.partial"
    info "debootstrap --variant=minbase $suite $dir $mirror"
    if ! debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 30 "$work/debootstrap.log"
        return 1
    fi
    tail -n 2 "$work/debootstrap.log" | sed 's/^/  /'
    # What a freshly installed system has: the suite, its updates and security fixes.
    case "$suite" in
        sid|unstable|experimental) echo "deb $mirror $suite main" >"$dir/etc/apt/sources.list" ;;
        *) cat >"$dir/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
SOURCES
           ;;
    esac
    # Services are never started in a chroot.
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod 0755 "$dir/usr/sbin/policy-rc.d"
    in_chroot dpkg-query -W -f='${Package}\n' | LC_ALL=C sort >"$baseline"
    info "$(wc -l <"$baseline") packages after debootstrap"
    rm -f "$dir/.xlfs-clean-check.partial"
    echo "$suite" >"$marker"
}

step3() {
    local src
    for src in /proc /sys /dev /dev/pts; do
        mkdir -p "$dir$src"
        mount --bind "$src" "$dir$src"
        mount --make-private "$dir$src"
        info "bound $src on $dir$src"
    done
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
    [ -c "$dir/dev/fuse" ] || { info "no /dev/fuse in the chroot"; return 1; }
    info "/dev/fuse present in the chroot"
}

step4() {
    if [ -f "$work/reused" ]; then
        # Back to what debootstrap left: purge what earlier runs installed.
        local extra
        extra=$(in_chroot dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' \
            | awk '$1 != "un" { print $2 }' | LC_ALL=C sort | LC_ALL=C comm -13 "$baseline" -)
        if [ -n "$extra" ]; then
            info "purging what earlier runs installed: $(echo $extra)"
            in_chroot apt-get purge -y -q $extra >"$work/purge.log" 2>&1 \
                || { cat "$work/purge.log"; return 1; }
            grep -E '^(Removing|Purging)' "$work/purge.log" | sed 's/^/  | /' || true
        fi
    fi
    cp "$deb" "$dir/tmp/xlfs.deb"
    info "apt-get update"
    in_chroot apt-get update -q >"$work/update.log" 2>&1 || { cat "$work/update.log"; return 1; }
    local flag=--no-install-recommends
    [ "$recommends" = 1 ] && flag=
    info "apt-get install -y${flag:+ $flag} /tmp/xlfs.deb"
    if ! in_chroot apt-get install -y -q $flag /tmp/xlfs.deb >"$work/install.log" 2>&1; then
        cat "$work/install.log"
        info "apt-get install of the package FAILED"
        return 1
    fi
    grep -E '^(The following|Recommended|Suggested|  |Setting up|W:|E:)' "$work/install.log" | sed 's/^/  | /' || true
    rm -f "$dir/tmp/xlfs.deb"
    touch "$work/installed"
    info "dpkg -s xlfs: $(in_chroot dpkg-query -W -f='${Status} ${Version}' xlfs)"
    in_chroot dpkg -L xlfs >"$work/dpkg-L"
    head "$work/dpkg-L" | sed 's/^/  | /'
    info "(dpkg -L xlfs: $(wc -l <"$work/dpkg-L") lines)"

    local bad=0 f
    for f in /usr/bin/xlfs /usr/bin/xlfsd /usr/bin/xlfs-mgmtd /usr/bin/xlfs-mount \
        /usr/bin/xlfs-nfsd /usr/bin/xlfs-rebalance; do
        if [ -f "$dir$f" ] && [ -x "$dir$f" ]; then info "ok       $f"; else info "MISSING  $f"; bad=1; fi
    done
    for f in /sbin/mount.xlfs /sbin/mount.fuse.xlfs; do
        # A symlink must also resolve (inside the chroot) to an executable.
        if in_chroot test -x "$f"; then
            info "ok       $f -> $(in_chroot readlink "$f") (resolves to $(in_chroot readlink -f "$f"))"
        elif in_chroot test -L "$f"; then
            info "DANGLING $f -> $(in_chroot readlink "$f") (resolves to $(in_chroot readlink -m "$f"), which does not exist)"
            in_chroot ls -ld /sbin "$f" | sed 's/^/  | /'
            bad=1
        else
            info "MISSING  $f"; bad=1
        fi
    done
    local n
    n=$(ls "$dir"/usr/lib/xlfs/xlators/*.so 2>/dev/null | wc -l || true)
    if [ "$n" -gt 0 ]; then info "ok       /usr/lib/xlfs/xlators/*.so ($n plugins)"; else info "MISSING  /usr/lib/xlfs/xlators/*.so"; bad=1; fi
    for f in /lib/systemd/system/xlfs-mgmtd.service /lib/systemd/system/xlfs-volume@.service \
        /etc/default/xlfs-mgmtd; do
        if in_chroot test -f "$f"; then info "ok       $f"; else info "MISSING  $f"; bad=1; fi
    done

    # Shared libraries: all found, and from which packages (compared with Depends).
    local libs missing pkgs depends p
    libs=$(in_chroot sh -c 'ldd /usr/bin/xlfs* /usr/lib/xlfs/xlators/*.so 2>&1' || true)
    missing=$(echo "$libs" | grep 'not found' | sort -u || true)
    if [ -n "$missing" ]; then info "UNRESOLVED shared libraries:"; echo "$missing" | sed 's/^/  | /'; bad=1; fi
    pkgs=$(echo "$libs" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u \
        | while read -r l; do in_chroot dpkg -S "$(in_chroot realpath "$l")" 2>/dev/null \
            || in_chroot dpkg -S "$l" 2>/dev/null || echo "?: $l"; done \
        | cut -d: -f1 | sort -u | tr '\n' ' ')
    depends=$(in_chroot dpkg-query -W -f='${Depends}' xlfs)
    info "shared libraries come from: $pkgs(Depends: $depends)"
    for p in $pkgs; do
        case ", $depends," in *", $p"[\ ,\(]*) ;; *) info "note: $p is used but not in Depends" ;; esac
    done
    # The newest glibc symbol version the binaries need, against a versioned libc6 in Depends.
    if command -v objdump >/dev/null; then
        local glibc
        glibc=$(for f in "$dir"/usr/bin/xlfs* "$dir"/usr/lib/xlfs/xlators/*.so; do objdump -T "$f"; done 2>/dev/null \
            | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
        info "newest glibc symbol version needed: ${glibc:-?} (this chroot: $(in_chroot dpkg-query -W -f='${Version}' libc6))"
        case ", $depends," in
            *", libc6 ("*) ;;
            *) [ -n "$glibc" ] && info "note: Depends has no libc6 (>= $glibc): the package installs where glibc is older and then fails to run" ;;
        esac
    fi
    [ $bad = 0 ]
}

step5() {
    info "xlfs --help"
    in_chroot xlfs --help >"$work/help.out" 2>&1 || { cat "$work/help.out"; return 1; }
    head -n 5 "$work/help.out" | sed 's/^/  | /'
    info "xlfs translator list (plugins found where the package puts them)"
    in_chroot xlfs translator list >"$work/translators.out" 2>&1 || { cat "$work/translators.out"; return 1; }
    info "$(grep -c . "$work/translators.out") lines; cluster/replicate: $(grep -c cluster/replicate "$work/translators.out")"
    grep -q cluster/replicate "$work/translators.out"

    # README, "Two commands": `xlfs up ./xlfs-demo` as root; prints where; Ctrl-C stops.
    info "cd /root && xlfs up ./xlfs-demo   (in the background; log $work/up.log)"
    chroot "$dir" /usr/bin/env -i --default-signal=INT \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LC_ALL=C.UTF-8 TERM=dumb sh -c 'cd /root && exec xlfs up ./xlfs-demo' \
        >"$work/up.log" 2>&1 </dev/null &
    local pid=$! i
    echo "$pid" >"$work/up.pid"
    for i in $(seq 1 180); do
        grep -q 'is up' "$work/up.log" && break
        if ! [ -d "/proc/$pid" ]; then
            wait "$pid" && i=0 || i=$?
            info "xlfs up exited (status $i) before the volume was up:"
            sed 's/^/  | /' "$work/up.log"
            return 1
        fi
        sleep 1
    done
    grep -q 'is up' "$work/up.log" || { info "not up after 180 s:"; sed 's/^/  | /' "$work/up.log"; return 1; }
    sed 's/^/  | /' "$work/up.log"
    local vol mp port
    vol=$(sed -n 's/^xlfs: volume \(.*\) is up$/\1/p' "$work/up.log")
    mp=$(sed -n 's/^  mounted on  //p' "$work/up.log")
    port=$(sed -n 's/^  brick .*(port \([0-9]*\))$/\1/p' "$work/up.log")
    info "volume $vol, mount point $mp, brick port $port"
    [ "$mp" = /root/xlfs-demo/mnt ] || { info "README says it mounts on ./xlfs-demo/mnt, not $mp"; return 1; }
    fuse_mounted "$dir$mp" || { info "no FUSE mount at $dir$mp"; return 1; }
    info "$(awk -v m="$dir$mp" '$5 == m { sub(/.* - /, ""); print "mounted: " $0 }' /proc/self/mountinfo)"

    info "write a file through the mount, read it back"
    local want="hello from a clean $suite chroot, $(date -u +%FT%TZ)"
    in_chroot sh -c 'printf "%s\n" "$1" >"$2/hello.txt"' sh "$want" "$mp"
    [ "$(in_chroot cat "$mp/hello.txt")" = "$want" ] || { info "read back differs"; return 1; }
    [ "$(cat "$dir/root/xlfs-demo/brick/hello.txt")" = "$want" ] \
        || { info "the brick does not hold the file"; return 1; }
    info "ok: $mp/hello.txt reads back, and the brick holds it"
    in_chroot sh -c 'head -c 8388608 /dev/urandom >/root/rand.bin && cp /root/rand.bin "$1/rand.bin" && cmp /root/rand.bin "$1/rand.bin" && cmp /root/rand.bin /root/xlfs-demo/brick/rand.bin' sh "$mp"
    info "ok: an 8 MiB random file copied in compares equal (mount and brick)"
    in_chroot ls -l "$mp" | sed 's/^/  | /'

    # Step 7 runs while the volume is up.
    echo "$vol $port" >"$work/volume"
    run_step 7 "mount -t xlfs 127.0.0.1:$port:/$vol (README's mount -t xlfs form)" step7

    info "stopping it as the README says (Ctrl-C)"
    local rc
    stop_up "$pid"
    if [ -d "/proc/$pid" ]; then info "xlfs up did not stop"; return 1; fi
    wait "$pid" && rc=0 || rc=$?
    rm -f "$work/up.pid"
    sed -n '/Press Ctrl-C/,$p' "$work/up.log" | sed 1d | sed 's/^/  | /'
    info "xlfs up exited with status $rc"
    [ "$rc" = 0 ]
    grep -q "volume $vol stopped" "$work/up.log"
    if mounted "$dir$mp"; then
        info "$mp is still mounted"; return 1
    fi
    local left
    left=$(chroot_pids)
    if [ -n "$left" ]; then
        info "processes left in the chroot after the stop:"
        for i in $left; do info "  $i $(tr '\0' ' ' <"/proc/$i/cmdline")"; done
        return 1
    fi
    info "ok: unmounted, no xlfsd/xlfs-mount left"
}

step7() {
    local vol port
    read -r vol port <"$work/volume"
    local secret=/root/xlfs-demo/state/volumes/$vol/secret
    in_chroot test -f "$secret" || { info "no secret at $secret"; return 1; }
    mkdir -p "$dir/mnt/xlfs-t"
    info "mount -t xlfs 127.0.0.1:$port:/$vol /mnt/xlfs-t -o secret-file=$secret"
    if ! in_chroot mount -t xlfs "127.0.0.1:$port:/$vol" /mnt/xlfs-t -o "secret-file=$secret" \
        >"$work/mount.out" 2>&1; then
        sed 's/^/  | /' "$work/mount.out"
        if ! in_chroot test -x /sbin/mount.xlfs; then
            # Tell a broken helper link from a broken helper: the binary called by that name.
            info "/sbin/mount.xlfs does not resolve; the helper called by its name instead:"
            info "exec -a /sbin/mount.xlfs /usr/bin/xlfs-mount 127.0.0.1:$port:/$vol /mnt/xlfs-t -o secret-file=$secret"
            if in_chroot bash -c 'exec -a /sbin/mount.xlfs /usr/bin/xlfs-mount "$@"' bash \
                "127.0.0.1:$port:/$vol" /mnt/xlfs-t -o "secret-file=$secret" >"$work/mount2.out" 2>&1 \
                && fuse_mounted "$dir/mnt/xlfs-t"; then
                info "that mounts: the helper works, only the /sbin/mount.xlfs link is broken"
                cmp "$dir/root/xlfs-demo/brick/hello.txt" "$dir/mnt/xlfs-t/hello.txt" \
                    && info "and reads hello.txt"
                in_chroot umount /mnt/xlfs-t || umount -l "$dir/mnt/xlfs-t"
            else
                sed 's/^/  | /' "$work/mount2.out"
            fi
        fi
        return 1
    fi
    sed 's/^/  | /' "$work/mount.out"
    fuse_mounted "$dir/mnt/xlfs-t" || { info "no FUSE mount at /mnt/xlfs-t"; return 1; }
    in_chroot cat /mnt/xlfs-t/hello.txt | sed 's/^/  | read: /'
    cmp "$dir/root/xlfs-demo/brick/hello.txt" "$dir/mnt/xlfs-t/hello.txt"
    cmp "$dir/root/rand.bin" "$dir/mnt/xlfs-t/rand.bin"
    info "ok: the second mount reads both files"
    in_chroot umount /mnt/xlfs-t
    local i
    for i in $(seq 1 20); do
        mounted "$dir/mnt/xlfs-t" || break
        sleep 0.5
    done
    if mounted "$dir/mnt/xlfs-t"; then info "/mnt/xlfs-t still mounted after umount"; return 1; fi
    info "ok: umount /mnt/xlfs-t"
}

step6() {
    info "apt-get install -y --no-install-recommends systemd"
    if ! in_chroot apt-get install -y -q --no-install-recommends systemd >"$work/systemd.log" 2>&1; then
        tail -n 20 "$work/systemd.log" | sed 's/^/  | /'
        record 6 SKIP "systemd-analyze verify (systemd does not install in the chroot)"
        return 0
    fi
    info "systemd $(in_chroot dpkg-query -W -f='${Version}' systemd)"
    local out rc=0 unit warned=0
    # verify must be able to see a broken unit here, or its silence means nothing.
    printf '[Service]\nType=bogus\nExecStart=/nonexistent/bin\n' >"$dir/tmp/xlfs-broken-test.service"
    out=$(in_chroot env SYSTEMD_COLORS=0 systemd-analyze verify /tmp/xlfs-broken-test.service 2>&1 || true)
    rm -f "$dir/tmp/xlfs-broken-test.service"
    info "sanity: systemd-analyze verify of a deliberately broken unit says:"
    echo "$out" | sed 's/^/  | /'
    if ! echo "$out" | grep -q -e bogus -e nonexistent; then
        info "so verify does not work in this chroot"
        record 6 SKIP "systemd-analyze verify (does not work in this chroot: see above)"
        return 0
    fi
    for unit in /lib/systemd/system/xlfs-mgmtd.service /lib/systemd/system/xlfs-volume@.service \
        xlfs-volume@gv0.service; do
        info "systemd-analyze verify $unit"
        out=$(in_chroot env SYSTEMD_COLORS=0 systemd-analyze verify "$unit" 2>&1) || { rc=1; info "  exit status non-zero"; }
        if [ -n "$out" ]; then warned=1; echo "$out" | sed 's/^/  | /'; else info "  (no output)"; fi
    done
    if [ $rc != 0 ]; then record 6 FAIL "systemd-analyze verify (errors above)"
    elif [ $warned = 1 ]; then record 6 WARN "systemd-analyze verify (warnings above)"
    fi
    return $rc
}

# --- run ------------------------------------------------------------------------------

echo "xlfs clean-install check: suite $suite, chroot $dir, $(date -u +%FT%TZ)"
run_step 1 "package" step1
[ -z "$deb" ] && [ -f "$work/deb" ] && { deb=$(cat "$work/deb"); built_deb=$deb; }
if [ "$(result_of 1)" = PASS ]; then run_step 2 "debootstrap $suite (minbase) into $dir" step2
else skip_step 2 debootstrap "no package"; fi
if [ "$(result_of 2)" = PASS ]; then run_step 3 "bind /proc /sys /dev /dev/pts, resolv.conf" step3
else skip_step 3 "bind mounts" "no chroot"; fi
if [ "$(result_of 3)" = PASS ]; then run_step 4 "apt-get install the package, check its files" step4
else skip_step 4 "apt-get install" "chroot not ready"; fi
if [ -f "$work/installed" ]; then
    run_step 5 "xlfs --help, xlfs up ./xlfs-demo, I/O through the mount, Ctrl-C" step5
    [ -n "$(result_of 7)" ] || record 7 SKIP "mount -t xlfs (step 5 did not get to it)"
    run_step 6 "systemd-analyze verify the units" step6
else
    skip_step 5 "xlfs up" "package not installed"
    skip_step 6 "systemd-analyze verify" "package not installed"
    skip_step 7 "mount -t xlfs" "package not installed"
fi

say "summary ($(( $(date +%s) - t0 )) s)"
status=0
for n in 1 2 3 4 5 6 7; do
    line=$(awk -v s="$n" '$1 == s { l = $0 } END { print l }' "$results")
    r=$(echo "$line" | cut -d' ' -f2)
    req=required; [ "$n" -ge 6 ] && req=optional
    printf '  step %s %-4s [%s] %s\n' "$n" "${r:-?}" "$req" "$(echo "$line" | cut -d' ' -f3-)"
    [ "$req" = required ] && [ "$r" != PASS ] && status=1
done
if [ $status = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
exit $status
