#!/usr/bin/env bash
# NFS-Ganesha (FSAL_VFS) on 127.0.0.1 for comparing with xlfs-nfsd in the smallfile bench.
#
#   ganesha.sh up DIR     export DIR as /vfs on 127.0.0.1 (NFS 2049, MOUNT 20048)
#   ganesha.sh down       stop ganesha and the private rpcbind
#
# Needs the Debian packages nfs-ganesha, nfs-ganesha-vfs (rpcbind comes with them). Ganesha
# registers NFSv3 with rpcbind, which cannot bind loopback only, so rpcbind runs in a private
# network namespace and Ganesha reaches it through /run/rpcbind.sock; clients skip the
# portmapper by naming the ports:
#   cargo bench -p xlfs-nfsd --bench smallfile -- --target ganesha=2049:20048:/vfs
set -euo pipefail
S=${GANESHA_SCRATCH:-/tmp/xlfs-ganesha}

stop_pidfile() {
    [ -s "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$1"
}

case "${1:-}" in
up)
    dir=$(realpath "${2:?usage: ganesha.sh up DIR}")
    mkdir -p "$S/log" "$S/etc" /run/rpcbind
    if ! { [ -s "$S/rpcbind.pid" ] && kill -0 "$(cat "$S/rpcbind.pid")" 2>/dev/null; }; then
        rm -f /run/rpcbind.sock
        unshare -n sh -c "echo \$\$ > '$S/rpcbind.pid'; exec rpcbind -f" >"$S/log/rpcbind.log" 2>&1 &
        for _ in $(seq 1 20); do [ -S /run/rpcbind.sock ] && break; sleep 0.5; done
    fi
    cat >"$S/etc/ganesha.conf" <<CONF
NFS_CORE_PARAM {
    Bind_addr = 127.0.0.1;
    NFS_Port = 2049;
    MNT_Port = 20048;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Protocols = 3, 4;
    Enable_UDP = false;
    Mount_Path_Pseudo = true;
}
NFSV4 { Graceless = true; RecoveryBackend = fs; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { Access_Type = RW; Squash = No_Root_Squash; SecType = sys; Protocols = 3, 4; Transports = TCP; }
EXPORT { Export_Id = 1; Path = "$dir"; Pseudo = "/vfs"; FSAL { Name = VFS; } }
LOG { Default_Log_Level = EVENT; }
CONF
    stop_pidfile "$S/ganesha.pid"
    ganesha.nfsd -f "$S/etc/ganesha.conf" -L "$S/log/ganesha.log" -p "$S/ganesha.pid" -N NIV_EVENT
    for _ in $(seq 1 50); do
        ss -ltn | grep -q '127.0.0.1:2049 ' && break
        sleep 0.2
    done
    kill -0 "$(cat "$S/ganesha.pid")" || { echo "ganesha did not start, see $S/log/ganesha.log" >&2; exit 1; }
    echo "ganesha=2049:20048:/vfs"
    ;;
down)
    stop_pidfile "$S/ganesha.pid"
    if [ -s "$S/rpcbind.pid" ]; then stop_pidfile "$S/rpcbind.pid"; rm -f /run/rpcbind.sock; fi
    ;;
*)
    echo "usage: ganesha.sh up DIR | down" >&2
    exit 2
    ;;
esac
