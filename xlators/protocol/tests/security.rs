//! Least privilege at protocol/server: the Unix socket is not world-writable, a local peer
//! that is not root acts only as itself (SO_PEERCRED), root-squash / all-squash map callers
//! to anonuid/anongid, and a live socket of another brick is never taken over. The tests
//! that run as another user or check ownership need root and pass without it, saying so.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use xlator_api::{Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_protocol::Server;
use xlfs_testkit::build::{options_for, try_build};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn new_fd(n: u64, flags: i32) -> Fd {
    Fd {
        id: FdId(n),
        gfid: Gfid::NULL,
        flags,
    }
}

/// A storage/posix brick on a new directory of mode `mode`, with `secret` (0600, root's)
/// and `open/` (0777) in it.
async fn brick(mode: u32) -> (Subvol, tempfile::TempDir) {
    let (leaf, dir) = common::posix();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).expect("chmod");
    let root = Ctx::root();
    let f = new_fd(1, libc::O_RDWR);
    let e = leaf
        .create(&root, Loc::new(Gfid::ROOT, "secret"), f, 0o600, 0)
        .await
        .expect("create secret");
    leaf.writev(
        &root,
        Fd {
            gfid: e.attr.gfid,
            ..f
        },
        0,
        b"root's".as_slice().into(),
        0,
    )
    .await
    .expect("write");
    leaf.release(
        &root,
        Fd {
            gfid: e.attr.gfid,
            ..f
        },
    )
    .await
    .expect("release");
    leaf.mkdir(&root, Loc::new(Gfid::ROOT, "open"), 0o777, 0)
        .await
        .expect("mkdir open");
    (leaf, dir)
}

fn dir_str(d: &Path) -> &str {
    d.to_str().expect("utf-8 path")
}

/// A protocol/server over `leaf` named so `common::client`'s `remote-subvolume` finds it.
fn server(leaf: &Subvol, o: &[(&str, &str)]) -> (Subvol, std::net::SocketAddr) {
    let mut o = o.to_vec();
    o.push(("volume-name", "memory"));
    common::server(leaf, &o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unix_socket_is_not_world_writable() {
    let (leaf, _d) = common::posix();
    let sockets = tempfile::tempdir().expect("tempdir");
    let (srv, _addr) = server(&leaf, &[("unix-socket-dir", dir_str(sockets.path()))]);
    let path = common::json_field(&srv, "unix-socket");
    let path = path.as_str().expect("a unix socket");
    let md = std::fs::metadata(path).expect("socket");
    assert_eq!(md.mode() & 0o7777, 0o660, "{path}");
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        md.uid(),
        unsafe { libc::geteuid() },
        "owned by the brick's user"
    );
}

const CHILD_ENV: &str = "XLFS_PEERCRED_CHILD";

/// A local peer that is not root sends uid 0 and is served as itself: it cannot create a
/// file in a root-owned 0755 directory nor open root's 0600 file, and what it makes is its
/// own. Before the fix the brick believed the uid 0 it sent. The peer is this test binary
/// run again (`peer_child` below) as uid 65534 (gid 0: the socket is 0660 root:root).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_peer_that_is_not_root_acts_only_as_itself() {
    if !is_root() {
        println!("SKIPPED: needs root (to run a peer as another user)");
        return;
    }
    let (leaf, _d) = brick(0o755).await;
    let sockets = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(sockets.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let (_srv, addr) = server(&leaf, &[("unix-socket-dir", dir_str(sockets.path()))]);
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["peer_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_ENV, format!("{addr} {}", dir_str(sockets.path())))
        .uid(65534)
        .gid(0)
        .output()
        .expect("run the peer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the peer failed:\n{text}");
    assert!(text.contains("PEER-DONE"), "the peer did not run:\n{text}");
    // What it made is its own.
    let e = leaf
        .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "open"))
        .await
        .expect("open/");
    let made = leaf
        .lookup(&Ctx::root(), Loc::new(e.attr.gfid, "by-peer"))
        .await
        .expect("the peer's directory");
    assert_eq!((made.attr.uid, made.attr.gid), (65534, 0));
    let none = leaf
        .lookup(&Ctx::root(), Loc::new(Gfid::ROOT, "by-peer"))
        .await;
    assert_eq!(none.err(), Some(Errno::ENOENT));
}

use std::os::unix::process::CommandExt;

/// The peer of the test above (run only by it: ignored otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_local_peer_that_is_not_root_acts_only_as_itself"]
async fn peer_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (addr, dir) = spec.split_once(' ').expect("addr dir");
    let addr: std::net::SocketAddr = addr.parse().expect("addr");
    // SAFETY: no arguments.
    assert_eq!(unsafe { libc::geteuid() }, 65534, "the peer runs as nobody");
    let c = common::client(addr, &[("unix-socket-dir", dir)]);
    common::wait_up(&c).await;
    assert_eq!(common::json_field(&c, "transport"), "unix");
    // It claims to be root.
    let root = Ctx::root();
    let made = c
        .create(
            &root,
            Loc::new(Gfid::ROOT, "by-peer"),
            new_fd(1, libc::O_RDWR),
            0o644,
            0,
        )
        .await;
    assert_eq!(
        made.err(),
        Some(Errno::EACCES),
        "create in root's 0755 directory"
    );
    let secret = c
        .lookup(&root, Loc::new(Gfid::ROOT, "secret"))
        .await
        .expect("lookup in a 0755 directory");
    let opened = c
        .open(
            &root,
            Fd {
                gfid: secret.attr.gfid,
                ..new_fd(2, libc::O_RDONLY)
            },
        )
        .await;
    assert_eq!(
        opened.err(),
        Some(Errno::EACCES),
        "open of root's 0600 file"
    );
    let open = c
        .lookup(&root, Loc::new(Gfid::ROOT, "open"))
        .await
        .expect("open/");
    let d = c
        .mkdir(&root, Loc::new(open.attr.gfid, "by-peer"), 0o755, 0)
        .await
        .expect("mkdir in a 0777 directory");
    assert_eq!((d.attr.uid, d.attr.gid), (65534, 0), "made as the peer");
    println!("PEER-DONE");
}

/// root-squash: calls as uid 0 over TCP run as anonuid/anongid (what they create is theirs,
/// root's 0600 file is closed to them); other users keep their ids; off again, root is root.
/// all-squash: every caller is anonuid/anongid. A root peer on the Unix socket is not
/// squashed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn squashed_callers_run_as_anonuid() {
    if !is_root() {
        println!("SKIPPED: needs root (the brick switches credentials only as root)");
        return;
    }
    let (leaf, _d) = brick(0o777).await;
    let squash = [
        ("unix-socket-dir", ""),
        ("root-squash", "on"),
        ("anonuid", "1234"),
        ("anongid", "1235"),
    ];
    let (srv, addr) = server(&leaf, &squash);
    let c = common::client(addr, &[("unix-socket-dir", "")]);
    common::wait_up(&c).await;
    assert_eq!(common::json_field(&c, "transport"), "tcp");
    let root = Ctx::root();
    let mk = |name: &'static str, cx: Ctx| {
        let c = c.clone();
        async move {
            c.mkdir(&cx, Loc::new(Gfid::ROOT, name), 0o755, 0)
                .await
                .map(|e| (e.attr.uid, e.attr.gid))
        }
    };
    assert_eq!(mk("by-root", root.clone()).await, Ok((1234, 1235)));
    assert_eq!(mk("by-user", Ctx::new(1000, 1000)).await, Ok((1000, 1000)));
    assert_eq!(
        mk("by-user-gid0", Ctx::new(1000, 0)).await,
        Ok((1000, 1235))
    );
    let secret = c
        .lookup(&root, Loc::new(Gfid::ROOT, "secret"))
        .await
        .expect("lookup");
    let opened = c
        .open(
            &root,
            Fd {
                gfid: secret.attr.gfid,
                ..new_fd(1, libc::O_RDONLY)
            },
        )
        .await;
    assert_eq!(
        opened.err(),
        Some(Errno::EACCES),
        "squashed root opens root's 0600 file"
    );

    let set = |o: &[(&str, &str)]| {
        srv.reconfigure(options_for::<Server>(o))
            .expect("reconfigure")
    };
    set(&[("root-squash", "off")]);
    assert_eq!(mk("by-root-unsquashed", root.clone()).await, Ok((0, 0)));
    set(&[
        ("all-squash", "on"),
        ("anonuid", "4321"),
        ("anongid", "4322"),
    ]);
    assert_eq!(
        mk("by-user-all", Ctx::new(1000, 1000)).await,
        Ok((4321, 4322))
    );
    assert_eq!(mk("by-root-all", root.clone()).await, Ok((4321, 4322)));

    // Root on this machine, through the Unix socket: not squashed.
    let sockets = tempfile::tempdir().expect("tempdir");
    let mut o = squash.to_vec();
    o[0] = ("unix-socket-dir", dir_str(sockets.path()));
    let (_srv2, addr2) = server(&leaf, &o);
    let local = common::client(addr2, &[("unix-socket-dir", dir_str(sockets.path()))]);
    common::wait_up(&local).await;
    assert_eq!(common::json_field(&local, "transport"), "unix");
    let e = local
        .mkdir(&root, Loc::new(Gfid::ROOT, "by-local-root"), 0o755, 0)
        .await
        .expect("mkdir");
    assert_eq!((e.attr.uid, e.attr.gid), (0, 0));
}

/// A brick whose Unix socket path another brick serves (same port on another address) is
/// refused and leaves that socket alone; a socket nobody answers on (a dead brick's) is
/// replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_unix_socket_is_never_taken_over() {
    let (leaf, _d) = common::posix();
    let sockets = tempfile::tempdir().expect("tempdir");
    let dir = dir_str(sockets.path());
    let (first, addr) = server(&leaf, &[("unix-socket-dir", dir)]);
    let path = common::json_field(&first, "unix-socket");
    let path = path.as_str().expect("socket").to_owned();
    let port = addr.port().to_string();
    let second = try_build::<Server>(
        "server-second",
        &[
            ("listen-host", "127.0.0.2"),
            ("listen-port", port.as_str()),
            ("unix-socket-dir", dir),
            ("volume-name", "memory"),
        ],
        vec![leaf.clone()],
    );
    let Err(e) = second else {
        panic!("the second brick was not refused");
    };
    assert!(e.contains("another process") && e.contains(&path), "{e}");
    assert!(
        e.contains(&format!("pid {}", std::process::id())),
        "names the pid: {e}"
    );
    // The first brick's socket still serves.
    assert!(Path::new(&path).exists(), "{path} was removed");
    let c = common::client(addr, &[("unix-socket-dir", dir)]);
    common::wait_up(&c).await;
    assert_eq!(common::json_field(&c, "transport"), "unix");

    // A stale socket file (no listener) on a free port is replaced.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let stale = sockets.path().join(format!("brick-{free}.sock"));
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    let free = free.to_string();
    let third = try_build::<Server>(
        "server-third",
        &[
            ("listen-port", free.as_str()),
            ("unix-socket-dir", dir),
            ("volume-name", "memory"),
        ],
        vec![leaf.clone()],
    )
    .expect("a stale socket does not stop a brick");
    assert_eq!(
        common::json_field(&third, "unix-socket").as_str(),
        stale.to_str()
    );
}

/// A volfile fetched from a brick (what `xlfs-mount HOST:/VOL` and `xlfs-nfsd HOST:/VOL`
/// run, as root) with storage/posix or protocol/server in it is refused with one line naming
/// the type; a client-side graph is served as before (the same path `watch_volfile` takes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetched_volfile_with_a_server_side_type_is_refused() {
    use xlfs_protocol::Credentials;
    use xlfs_protocol::fetch::{FetchError, VolfileServer, fetch_volfile, watch_volfile};
    let files = tempfile::tempdir().expect("tempdir");
    let path = files.path().join("client.vol");
    let p = dir_str(&path).to_owned();
    let (leaf, _d) = common::posix();
    let (_srv, addr) = server(
        &leaf,
        &[("client-volfile", &p), ("client-volfile-name", "gv0")],
    );
    let at = VolfileServer {
        host: addr.ip().to_string(),
        port: addr.port(),
        volume: "gv0".into(),
    };
    let t = std::time::Duration::from_secs(5);
    let good = r#"(volumes: [
        (name: "c", type: "protocol/client", options: { "remote-host": "127.0.0.1" }),
        (name: "wb", type: "performance/write-behind", subvolumes: ["c"]),
    ])"#;
    std::fs::write(&path, good).expect("write");
    assert_eq!(
        fetch_volfile(&at, &Credentials::default(), t)
            .await
            .expect("fetch"),
        good
    );
    for (t_name, bad) in [
        (
            "storage/posix",
            r#"(volumes: [
            (name: "root", type: "storage/posix", options: { "directory": "/" }),
            (name: "srv", type: "protocol/server", options: { "listen-host": "0.0.0.0" },
             subvolumes: ["root"]),
        ])"#,
        ),
        (
            "protocol/server",
            r#"(volumes: [
            (name: "c", type: "protocol/client", options: { "remote-host": "127.0.0.1" }),
            (name: "srv", type: "protocol/server", subvolumes: ["c"]),
        ])"#,
        ),
    ] {
        std::fs::write(&path, bad).expect("write");
        let e = fetch_volfile(&at, &Credentials::default(), t)
            .await
            .expect_err(t_name);
        assert!(matches!(e, FetchError::Forbidden { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("type {t_name},")), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        // A reload (watch) takes the same check.
        let e = watch_volfile(
            &at,
            &Credentials::default(),
            0,
            std::time::Duration::from_millis(100),
            t,
        )
        .await
        .expect_err(t_name);
        assert!(matches!(e, FetchError::Forbidden { .. }), "{e}");
    }
}
