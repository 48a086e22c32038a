#!/usr/bin/env bash
# Checks the Debian package's systemd units under a real systemd: a debootstrap container
# booted by systemd-nspawn with systemd as PID 1 (no VM, no systemd on this machine needed).
#
#   packaging/deb/systemd-check.sh [--deb FILE] [--dir DIR] [--suite SUITE] [--mirror URL] [--keep]
#
# --deb     the package to test (default: `build.sh --profile debug --no-build`; nothing is
#           compiled)
# --dir     work directory (default /tmp/xlfs-nspawn): the container root is DIR/root, the
#           logs DIR/run.PID. A root this script made (marker DIR/root/.xlfs-systemd-check) is
#           reused with --keep, and deleted at the end without it
# --suite   Debian suite of the container (default bookworm)
# --mirror  Debian mirror (default http://deb.debian.org/debian)
# --keep    keep the container root (powered off) for the next run or a look
#
# What it does, as README.md and docs/management.md describe it, each check PASS or FAIL
# (exit status 1 if one failed); INFO lines are diagnostics (workarounds), never failures:
#   xlfs-mgmtd.service: an empty XLFS_MGMTD_LISTEN (as installed), then 127.0.0.1, enable
#   --now, `xlfs pool list`; a replica-2 volume created and started through the daemon, a
#   brick killed with -9 and started again; the fstab line of the README (`_netdev`) through
#   systemd's fstab generator (mnt-gv0.mount), I/O, `mount -a`, how systemd classifies the
#   mount; `systemctl restart xlfs-mgmtd` (bricks and the mount keep serving?); a reboot with
#   the daemon enabled and the fstab line with x-systemd.requires=xlfs-mgmtd.service (is the
#   volume mounted after boot? no ordering cycle at shutdown?); xlfs-volume@ skipped on the
#   managed host. xlfs-volume@.service without the daemon: a volume started, mounted, stopped
#   by the unit; a reboot with the unit enabled and an fstab line requiring it.
# Needs root, debootstrap, systemd-nspawn (apt-get install systemd-container), nsenter,
# /dev/fuse and the mirror. The container has its own network namespace (only lo: every
# address is 127.0.0.1, no port of this machine is used). Everything started is powered off
# on exit, also on failure or Ctrl-C.
set -uo pipefail

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }

deb= dir=/tmp/xlfs-nspawn suite=bookworm mirror=http://deb.debian.org/debian keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) deb=${2:?--deb needs a file}; shift 2 ;;
        --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
        --suite) suite=${2:?--suite needs a suite}; shift 2 ;;
        --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) usage ;;
        *) echo "systemd-check.sh: unknown argument $1" >&2; usage ;;
    esac
done

say() { printf '\n=== %s\n' "$*"; }
info() { printf '  %s\n' "$*"; }
indent() { sed 's/^/  | /'; }
die() { echo "systemd-check.sh: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root"
for c in debootstrap systemd-nspawn nsenter; do
    command -v $c >/dev/null || die "$c is missing (apt-get install debootstrap systemd-container util-linux)"
done
[ -c /dev/fuse ] || die "no /dev/fuse"
case "$dir" in /|"") die "refusing --dir $dir" ;; esac
[ -z "$deb" ] || { [ -f "$deb" ] || die "no package at $deb"; deb=$(realpath "$deb"); }
mkdir -p "$dir"
dir=$(realpath "$dir")
root=$dir/root
marker=$root/.xlfs-systemd-check
machine=xlfs-check
work=$dir/run.$$
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
results=$work/results
: >"$results"
t0=$(date +%s)
nspawn_pid=
built_deb=

# --- helpers --------------------------------------------------------------------------

record() { echo "$1|$2" >>"$results"; info "$1: $2"; }      # PASS|FAIL|INFO, text
elapsed() { echo "$(( $(date +%s%N) / 1000000 - $1 ))"; }    # ms since $1 (ms)
now_ms() { echo "$(( $(date +%s%N) / 1000000 ))"; }

# PID 1 of the container (the child of systemd-nspawn).
leader() {
    [ -n "$nspawn_pid" ] && [ -d "/proc/$nspawn_pid" ] || return 1
    local l
    l=$(cat /proc/"$nspawn_pid"/task/*/children 2>/dev/null | awk '{ print $1; exit }')
    [ -n "$l" ] && echo "$l"
}

# Runs a command inside the booted container (all its namespaces, a clean environment).
in_ct() {
    local l
    l=$(leader) || { echo "container not running" >&2; return 125; }
    nsenter -t "$l" -m -u -i -n -p -C -r -w env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LC_ALL=C.UTF-8 TERM=dumb SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
}

boot() {
    local start l i state
    start=$(now_ms)
    # --register=no --keep-unit: this machine has no systemd (no machined, no system bus).
    setsid systemd-nspawn --register=no --keep-unit -D "$root" -M "$machine" \
        --private-network --bind=/dev/fuse --console=read-only -b \
        >>"$work/console.log" 2>&1 </dev/null &
    nspawn_pid=$!
    for i in $(seq 1 300); do
        state=$(in_ct systemctl is-system-running 2>/dev/null) || true
        case "$state" in running|degraded) break ;; esac
        [ -d "/proc/$nspawn_pid" ] || break
        sleep 0.2
    done
    case "$state" in
        running|degraded) info "booted: $state after $(elapsed "$start") ms" ;;
        *) info "the container did not boot (state '${state:-none}'); console:"
           tail -n 30 "$work/console.log" | indent; return 1 ;;
    esac
}

poweroff() {
    local start i
    [ -n "$nspawn_pid" ] && [ -d "/proc/$nspawn_pid" ] || { nspawn_pid=; return 0; }
    start=$(now_ms)
    in_ct systemctl poweroff >/dev/null 2>&1 || true
    for i in $(seq 1 300); do [ -d "/proc/$nspawn_pid" ] || break; sleep 0.2; done
    if [ -d "/proc/$nspawn_pid" ]; then
        info "still running 60 s after poweroff: SIGTERM to systemd-nspawn $nspawn_pid"
        kill -TERM "$nspawn_pid" 2>/dev/null
        for i in $(seq 1 50); do [ -d "/proc/$nspawn_pid" ] || break; sleep 0.2; done
        [ -d "/proc/$nspawn_pid" ] && kill -KILL "$nspawn_pid" 2>/dev/null
        sleep 1
    fi
    wait "$nspawn_pid" 2>/dev/null
    info "powered off in $(elapsed "$start") ms"
    nspawn_pid=
}

reboot_ct() { poweroff && boot; }

# The pid of the online brick PATH of volume VOL (empty if offline).
brick_pid() { in_ct xlfs volume status "$1" 2>/dev/null | awk -v b="$2" '$2 == b && $4 == "yes" { print $5 }'; }

# Waits up to $1 s for `xlfs pool list` to list this host Connected.
wait_daemon() {
    local i
    for i in $(seq 1 $(( $1 * 5 ))); do
        in_ct xlfs pool list 2>/dev/null | grep -q Connected && return 0
        sleep 0.2
    done
    return 1
}

cleanup() {
    local rc=$? m
    trap - EXIT INT TERM
    say "cleanup"
    poweroff
    for m in $(awk -v d="$dir" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | tac); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; info "unmounted $m"
    done
    # systemd-nspawn leaves this behind when /run is not a tmpfs (it refuses to remove it).
    rm -rf "/run/systemd/nspawn/propagate/$machine"
    if [ "$keep" = 0 ]; then
        if [ -f "$marker" ] || [ -f "$root/.xlfs-systemd-check.partial" ]; then
            info "deleting $root"; rm -rf --one-file-system "$root"
        fi
        [ -n "$built_deb" ] && rm -rf "$(dirname "$built_deb")"
        rm -rf "$work"
        rmdir "$dir" 2>/dev/null
    else
        info "kept $root and the logs in $work"
    fi
    info "done in $(( $(date +%s) - t0 )) s"
    exit $rc
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# --- steps ----------------------------------------------------------------------------

step_package() {
    say "package"
    if [ -z "$deb" ]; then
        mkdir -p "$dir/deb"
        deb=$("$repo/packaging/deb/build.sh" --profile debug --no-build --out "$dir/deb" | tail -n 1) \
            || die "build.sh failed"
        built_deb=$deb
    fi
    info "$(du -h "$deb" | cut -f1)  $deb"
}

step_root() {
    say "debootstrap $suite + install the package"
    if [ -f "$marker" ]; then
        info "reusing $root (made $(stat -c %y "$marker" | cut -d. -f1)); removing the last run's state"
        rm -rf "$root/var/lib/xlfs" "$root/srv/gv0" "$root/srv/gv1" "$root/etc/xlfs" \
            "$root/var/log/xlfs-gv0.log" "$root/root/r.bin" \
            "$root"/etc/systemd/system/multi-user.target.wants/xlfs-*
        echo '# UNCONFIGURED FSTAB FOR BASE SYSTEM' >"$root/etc/fstab"
        sed -i 's/^XLFS_MGMTD_LISTEN=.*/XLFS_MGMTD_LISTEN=/' "$root/etc/default/xlfs-mgmtd"
    else
        [ -z "$(ls -A "$root" 2>/dev/null)" ] || [ -f "$root/.xlfs-systemd-check.partial" ] \
            || die "$root is not empty and not made by this script"
        rm -rf --one-file-system "$root"; mkdir -p "$root"
        touch "$root/.xlfs-systemd-check.partial"
        local start; start=$(now_ms)
        debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,iproute2 \
            "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
            || { tail -n 20 "$work/debootstrap.log" | indent; die "debootstrap failed"; }
        info "debootstrap: $(elapsed "$start") ms"
        # A persistent journal (the boots before are looked at), root without a password.
        mkdir -p "$root/var/log/journal"
        systemd-nspawn -q --register=no --keep-unit -D "$root" passwd -d root >/dev/null 2>&1
        mv "$root/.xlfs-systemd-check.partial" "$marker"
    fi
    cp "$deb" "$root/xlfs.deb"
    local start; start=$(now_ms)
    if ! systemd-nspawn -q --register=no --keep-unit -D "$root" /usr/bin/env \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall /xlfs.deb \
        >"$work/install.log" 2>&1; then
        tail -n 30 "$work/install.log" | indent; rm -f "$root/xlfs.deb"; die "apt-get install failed"
    fi
    rm -f "$root/xlfs.deb"
    info "apt-get install /xlfs.deb: $(elapsed "$start") ms"
    grep -E '^(The following NEW|  |Setting up xlfs)' "$work/install.log" | indent
}

step_units() {
    say "the units as installed"
    local out
    out=$(in_ct systemd-analyze verify xlfs-mgmtd.service xlfs-volume@gv0.service 2>&1)
    if [ -z "$out" ]; then record PASS "systemd-analyze verify: no complaint"
    else echo "$out" | indent; record FAIL "systemd-analyze verify complains"; fi
    info "is-enabled after install: xlfs-mgmtd $(in_ct systemctl is-enabled xlfs-mgmtd 2>&1)"
    in_ct cat /etc/default/xlfs-mgmtd | indent

    info "systemctl start xlfs-mgmtd with XLFS_MGMTD_LISTEN empty (as installed), 7 s"
    in_ct systemctl start xlfs-mgmtd; info "systemctl start: exit status $?"
    sleep 7
    local n msg
    n=$(in_ct systemctl show -p NRestarts --value xlfs-mgmtd)
    msg=$(in_ct journalctl -b -u xlfs-mgmtd -o cat --no-pager | grep -m1 -- '--listen is empty')
    in_ct systemctl stop xlfs-mgmtd
    if [ -n "$msg" ]; then record PASS "empty XLFS_MGMTD_LISTEN is refused: $msg"
    else record FAIL "empty XLFS_MGMTD_LISTEN: no clear message in the journal"; fi
    info "restarted $n times in 7 s (Restart=on-failure, RestartSec=2: a configuration error loops until stopped)"
}

step_mgmtd() {
    say "xlfs-mgmtd.service: XLFS_MGMTD_LISTEN=127.0.0.1, enable --now"
    in_ct sed -i 's/^XLFS_MGMTD_LISTEN=.*/XLFS_MGMTD_LISTEN=127.0.0.1/' /etc/default/xlfs-mgmtd
    in_ct systemctl enable --now xlfs-mgmtd 2>&1 | indent
    if wait_daemon 20; then record PASS "xlfs-mgmtd active, xlfs pool list: this host Connected"
    else record FAIL "xlfs pool list has no Connected peer after 20 s"; fi
    in_ct systemctl status xlfs-mgmtd --no-pager -n 5 | indent
    in_ct xlfs pool list | indent

    say "a replica-2 volume through the daemon"
    in_ct xlfs volume create gv0 127.0.0.1:/srv/gv0/b0 127.0.0.1:/srv/gv0/b1 --replica 2 2>&1 | indent
    in_ct xlfs volume start gv0 2>&1 | indent
    local i b0 b1
    for i in $(seq 1 50); do
        b0=$(brick_pid gv0 /srv/gv0/b0); b1=$(brick_pid gv0 /srv/gv0/b1)
        [ -n "$b0" ] && [ -n "$b1" ] && break; sleep 0.2
    done
    in_ct xlfs volume status gv0 | indent
    if [ -n "$b0" ] && [ -n "$b1" ] && in_ct grep -q xlfs-mgmtd.service /proc/"$b0"/cgroup; then
        record PASS "volume start: the daemon started both bricks (pids $b0 $b1, in xlfs-mgmtd.service's cgroup)"
    else record FAIL "volume start: bricks not online under xlfs-mgmtd"; fi

    say "kill -9 brick 0 (pid $b0)"
    local start new=; start=$(now_ms)
    in_ct sh -c "kill -9 $b0"
    for i in $(seq 1 100); do
        new=$(brick_pid gv0 /srv/gv0/b0); [ -n "$new" ] && [ "$new" != "$b0" ] && break; new=; sleep 0.2
    done
    if [ -n "$new" ]; then record PASS "brick 0 started again by the daemon in $(elapsed "$start") ms (pid $new)"
    else record FAIL "brick 0 not started again within 20 s"; fi
}

fstab_gv0='127.0.0.1:/gv0  /mnt/gv0  xlfs  defaults,_netdev,secret-file=/etc/xlfs/gv0.secret  0 0'

set_fstab() {   # replaces the line of mount point $1 by $2 (none: only removes it)
    in_ct sh -c 'grep -v " $1 " /etc/fstab >/etc/fstab.new; [ -z "$2" ] || echo "$2" >>/etc/fstab.new; mv /etc/fstab.new /etc/fstab' sh "$1" "$2"
    in_ct systemctl daemon-reload
}

step_fstab() {
    say "the README's fstab line, through systemd-fstab-generator"
    in_ct sh -c 'mkdir -p /etc/xlfs /mnt/gv0 && install -m 0600 /var/lib/xlfs/volumes/gv0/secret /etc/xlfs/gv0.secret'
    set_fstab /mnt/gv0 "$fstab_gv0"
    info "/etc/fstab: $fstab_gv0"
    in_ct cat /run/systemd/generator/mnt-gv0.mount | grep -E '^(What|Where|Type|Options)=' | indent
    local start; start=$(now_ms)
    if in_ct systemctl start mnt-gv0.mount; then
        record PASS "systemctl start mnt-gv0.mount ($(elapsed "$start") ms)"
    else
        in_ct systemctl status mnt-gv0.mount --no-pager -n 10 | indent
        record FAIL "systemctl start mnt-gv0.mount"; return
    fi
    in_ct findmnt /mnt/gv0 | indent
    if in_ct sh -c 'echo hello >/mnt/gv0/hello.txt && head -c 8388608 /dev/urandom >/root/r.bin &&
            cp /root/r.bin /mnt/gv0/r.bin && cmp /root/r.bin /mnt/gv0/r.bin &&
            cmp /root/r.bin /srv/gv0/b0/r.bin && cmp /root/r.bin /srv/gv0/b1/r.bin &&
            [ "$(cat /mnt/gv0/hello.txt)" = hello ]'; then
        record PASS "write/read through mnt-gv0.mount: hello.txt and 8 MiB, equal on both bricks"
    else record FAIL "write/read through mnt-gv0.mount"; fi

    local out rc
    out=$(in_ct mount -a 2>&1); rc=$?
    if [ $rc = 0 ]; then record PASS "mount -a with /mnt/gv0 mounted: exit 0"
    else echo "$out" | indent; record FAIL "mount -a with /mnt/gv0 mounted: exit $rc (the kernel's source '$(in_ct findmnt -n -o SOURCE /mnt/gv0)' is not fstab's 127.0.0.1:/gv0, so mount(8) does not see it mounted)"; fi
    local before
    before=$(in_ct systemctl show -p Before --value mnt-gv0.mount)
    case " $before " in
        *" local-fs.target "*) record FAIL "mnt-gv0.mount, once mounted, is also a LOCAL mount for systemd (Before=$before): /run/mount/utab's _netdev is not merged, its source 127.0.0.1:/gv0 is not the kernel's $(in_ct findmnt -n -o SOURCE /mnt/gv0)" ;;
        *" remote-fs.target "*) record PASS "mnt-gv0.mount is a network mount for systemd (Before=$before)" ;;
        *) record FAIL "mnt-gv0.mount is ordered neither way (Before=$before)" ;;
    esac
}

step_restart() {
    say "systemctl restart xlfs-mgmtd with the volume mounted"
    local pids_before pids_after start
    pids_before="$(brick_pid gv0 /srv/gv0/b0) $(brick_pid gv0 /srv/gv0/b1)"
    start=$(now_ms)
    in_ct systemctl restart xlfs-mgmtd
    wait_daemon 20 || info "the daemon is not back after 20 s"
    info "restart: daemon back in $(elapsed "$start") ms"
    sleep 3
    pids_after="$(brick_pid gv0 /srv/gv0/b0) $(brick_pid gv0 /srv/gv0/b1)"
    if [ "$pids_before" = "$pids_after" ]; then
        record PASS "bricks kept serving across the restart (pids $pids_after unchanged)"
    else record FAIL "brick pids changed: $pids_before -> $pids_after"; fi
    in_ct journalctl -b -u xlfs-mgmtd --no-pager -n 12 -o short-precise | grep -E 'remains running|left-over' | head -3 | indent
    local out
    if out=$(in_ct cat /mnt/gv0/hello.txt 2>&1) && [ "$out" = hello ]; then
        record PASS "mnt-gv0.mount still readable after the restart"
    else
        info "cat /mnt/gv0/hello.txt: $out"
        in_ct systemctl status mnt-gv0.mount --no-pager -n 0 | sed -n '1,3p;/CGroup/p' | indent
        info "(no xlfs-mount process is left in the unit's cgroup: the FUSE daemon is gone)"
        record FAIL "the fstab mount died when xlfs-mgmtd restarted (Transport endpoint is not connected)"
    fi

    # The mount logs to /var/log/xlfs/mnt-gv0.log (it once logged to mount.xlfs's pipe,
    # closed once mount.xlfs returned, and its next log line aborted it).
    in_ct test -s /var/log/xlfs/mnt-gv0.log && record PASS "the mount logs to /var/log/xlfs/mnt-gv0.log" \
        || record FAIL "no /var/log/xlfs/mnt-gv0.log"
    in_ct systemctl stop mnt-gv0.mount
}

step_reboot_mgmtd() {
    say "reboot with xlfs-mgmtd enabled and the fstab line for a peer host (x-systemd.requires)"
    set_fstab /mnt/gv0 "${fstab_gv0/gv0.secret/gv0.secret,x-systemd.requires=xlfs-mgmtd.service}"
    reboot_ct || { record FAIL "reboot"; return; }
    if [ "$(in_ct systemctl is-active mnt-gv0.mount)" = active ]; then
        record PASS "mnt-gv0.mount mounted at boot (x-systemd.requires=xlfs-mgmtd.service, Type=notify)"
    else record FAIL "mnt-gv0.mount failed at boot with x-systemd.requires=xlfs-mgmtd.service"; fi
    in_ct journalctl -b -o short-precise --no-pager | grep -E 'mnt-gv0|mount\[|Started xlfs-mgmtd|serving client volfiles|started volume' | head -12 | indent
    [ "$(in_ct xlfs volume status gv0 | grep -c ' yes ')" = 2 ] \
        && record PASS "both bricks of gv0 started by the daemon at boot" \
        || record FAIL "bricks of gv0 not online after boot"
    reboot_ct || return
    local cycles; cycles=$(in_ct journalctl -b -1 --no-pager | grep -c 'ordering cycle')
    [ "$cycles" = 0 ] && record PASS "no ordering cycle at the shutdown with the mount up" \
        || record FAIL "$cycles ordering cycles logged at the shutdown with the mount up"

    say "diagnostic: the README's bare line (no x-systemd.requires) at boot"
    set_fstab /mnt/gv0 "$fstab_gv0"
    reboot_ct || return
    record INFO "without x-systemd.requires: mnt-gv0.mount $(in_ct systemctl is-active mnt-gv0.mount) after boot (nothing orders it after the local daemon; the docs say to add it on a peer host)"
    in_ct systemctl stop mnt-gv0.mount
    set_fstab /mnt/gv0 ""
}

step_volume_unit() {
    say "xlfs-volume@.service on a host the daemon manages: skipped"
    in_ct xlfs volume stop gv0 2>&1 | indent
    in_ct systemctl start xlfs-volume@gv0 2>&1 | indent
    if [ "$(in_ct systemctl show -p ConditionResult --value xlfs-volume@gv0)" = no ]; then
        record PASS "xlfs-volume@gv0 skipped on a managed host (its bricks are the daemon's)"
    else record FAIL "xlfs-volume@gv0 ran on a host xlfs-mgmtd manages"; fi

    say "xlfs-volume@.service without the daemon"
    in_ct systemctl disable --now xlfs-mgmtd 2>&1 | indent
    # No longer a managed host: its cluster state goes.
    in_ct sh -c 'mv /var/lib/xlfs/mgmt /var/lib/xlfs/mgmt.off && rm -rf /var/lib/xlfs/volumes/gv0' 2>&1 | indent
    in_ct xlfs volume create gv1 /srv/gv1/b0 --port 49200 2>&1 | indent
    local start; start=$(now_ms)
    if in_ct systemctl start xlfs-volume@gv1; then record PASS "systemctl start xlfs-volume@gv1 ($(elapsed "$start") ms)"
    else record FAIL "systemctl start xlfs-volume@gv1"; fi
    in_ct systemctl status xlfs-volume@gv1 --no-pager -n 4 | indent
    local b; b=$(brick_pid gv1 /srv/gv1/b0)
    if [ -n "$b" ] && in_ct grep -q 'xlfs-volume@gv1.service' /proc/"$b"/cgroup; then
        record PASS "the brick (pid $b) runs in xlfs-volume@gv1.service's cgroup"
    else record FAIL "no brick of gv1 in the unit's cgroup"; fi

    local line='127.0.0.1:49200:/gv1  /mnt/gv1  xlfs  defaults,_netdev,secret-file=/etc/xlfs/gv1.secret  0 0'
    in_ct sh -c 'mkdir -p /mnt/gv1 && install -m 0600 /var/lib/xlfs/volumes/gv1/secret /etc/xlfs/gv1.secret'
    set_fstab /mnt/gv1 "$line"
    if in_ct systemctl start mnt-gv1.mount && in_ct sh -c 'echo one >/mnt/gv1/one.txt && [ "$(cat /srv/gv1/b0/one.txt)" = one ]'; then
        record PASS "mnt-gv1.mount ($line): write/read"
    else record FAIL "mnt-gv1.mount: mount or write/read"; fi
    in_ct systemctl stop mnt-gv1.mount

    in_ct sh -c "kill -9 $b"; sleep 4
    record INFO "after kill -9 of the brick: $( [ -n "$(brick_pid gv1 /srv/gv1/b0)" ] && echo restarted || echo 'not restarted') (unit $(in_ct systemctl is-active xlfs-volume@gv1): a oneshot unit supervises nothing)"
    in_ct systemctl restart xlfs-volume@gv1
    b=$(brick_pid gv1 /srv/gv1/b0)
    start=$(now_ms)
    in_ct systemctl stop xlfs-volume@gv1
    if [ -z "$(brick_pid gv1 /srv/gv1/b0)" ] && ! in_ct test -d /proc/"$b"; then
        record PASS "systemctl stop xlfs-volume@gv1 stopped the brick ($(elapsed "$start") ms)"
    else record FAIL "brick $b still running after systemctl stop xlfs-volume@gv1"; fi

    say "reboot with xlfs-volume@gv1 enabled and its fstab line (x-systemd.requires)"
    in_ct systemctl enable xlfs-volume@gv1 2>&1 | indent
    set_fstab /mnt/gv1 "${line/gv1.secret/gv1.secret,x-systemd.requires=xlfs-volume@gv1.service}"
    reboot_ct || { record FAIL "reboot"; return; }
    if [ "$(in_ct systemctl is-active mnt-gv1.mount)" = active ] \
        && in_ct sh -c '[ "$(cat /mnt/gv1/one.txt)" = one ]'; then
        record PASS "mnt-gv1.mount mounted at boot (x-systemd.requires=xlfs-volume@gv1.service), one.txt reads back"
    else record FAIL "mnt-gv1.mount failed at boot with x-systemd.requires=xlfs-volume@gv1.service"; fi
    in_ct journalctl -b -o short-precise --no-pager | grep -E 'gv1|mount\[' | head -8 | indent
    set_fstab /mnt/gv1 "$line"
    reboot_ct || return
    record INFO "without x-systemd.requires: mnt-gv1.mount $(in_ct systemctl is-active mnt-gv1.mount) after boot"
}

# --- run ------------------------------------------------------------------------------

echo "xlfs systemd check: $suite container in $root, $(date -u +%FT%TZ)"
step_package
step_root
say "boot (systemd-nspawn -b, systemd as PID 1)"
boot || { record FAIL "the container does not boot"; exit 1; }
in_ct systemctl --failed --no-legend --no-pager | indent
step_units
step_mgmtd
step_fstab
step_restart
step_reboot_mgmtd
step_volume_unit
say "power off"
poweroff

say "summary ($(( $(date +%s) - t0 )) s)"
status=0
while IFS='|' read -r r text; do
    printf '  %-4s %s\n' "$r" "$text"
    [ "$r" = FAIL ] && status=1
done <"$results"
if [ $status = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
exit $status
