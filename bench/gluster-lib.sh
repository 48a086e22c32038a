# Sourced by bench/heal.sh and bench/rebalance.sh: a glusterd of the script's own when none
# runs (bound to 127.0.0.1, its files under $WORK/gluster), and its end; the end of a round's
# volume. The script sets ME (the prefix of its messages), WORK, GF_HOST, XLFS and VOL, and
# calls gluster_stop in its cleanup.
# shellcheck shell=bash

G() { gluster --mode=script "$@"; }
GLUSTERD_PID=

# gluster_usable: 0 when a glusterd answers (started here if need be), else 1 with the reason
gluster_usable() {
    command -v glusterd >/dev/null && command -v gluster >/dev/null || {
        echo "$ME: GlusterFS is not installed: gluster left out" >&2; return 1; }
    getent hosts "$GF_HOST" | grep -q '^127\.' || {
        echo "$ME: GF_HOST=$GF_HOST does not resolve to 127.x: gluster left out" >&2; return 1; }
    G pool list >/dev/null 2>&1 && return 0
    mkdir -p "$WORK/gluster"/{etc,log}
    sed 's|^\( *\)option transport.socket.listen-port 24007|&\n\1option transport.socket.bind-address 127.0.0.1|' \
        /etc/glusterfs/glusterd.vol > "$WORK/gluster/etc/glusterd.vol"
    glusterd -f "$WORK/gluster/etc/glusterd.vol" --pid-file="$WORK/gluster/glusterd.pid" \
        --log-file="$WORK/gluster/log/glusterd.log" || return 1
    for _ in $(seq 30); do
        [ -s "$WORK/gluster/glusterd.pid" ] && GLUSTERD_PID=$(cat "$WORK/gluster/glusterd.pid")
        G pool list >/dev/null 2>&1 && return 0
        sleep 1
    done
    echo "$ME: glusterd did not start: gluster left out" >&2
    return 1
}

# gluster_stop VOLPREFIX: stops the glusterd gluster_usable started (none: nothing to do),
# then what it left running: the bricks of volumes named VOLPREFIX..., self-heal daemons
gluster_stop() {
    [ -n "$GLUSTERD_PID" ] || return 0
    kill "$GLUSTERD_PID" 2>/dev/null
    for _ in $(seq 60); do kill -0 "$GLUSTERD_PID" 2>/dev/null || break; sleep 0.5; done
    pkill -f "glusterfsd.*$1" 2>/dev/null
    pkill -f glustershd 2>/dev/null
    GLUSTERD_PID=
}

# volume_down SYSTEM: unmounts $WORK/mnt, stops and deletes volume $VOL of SYSTEM (xlfs or
# gluster), removes its bricks ($WORK/bricks)
volume_down() {
    case $1 in
        xlfs)
            "$XLFS" umount "$WORK/mnt" >/dev/null
            "$XLFS" volume stop "$VOL" >/dev/null
            "$XLFS" volume delete "$VOL" >/dev/null;;
        gluster)
            umount "$WORK/mnt"
            G volume stop "$VOL" force >/dev/null
            G volume delete "$VOL" >/dev/null;;
    esac
    VOL=
    rm -rf "$WORK/bricks"
}
