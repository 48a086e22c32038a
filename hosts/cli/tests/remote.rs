//! Mounting a volume started by `xlfs volume start` the GlusterFS way, `xlfs-mount
//! HOST:PORT:/VOLUME MOUNTPOINT` (the client volfile fetched from the brick), and what a mount
//! does when its brick is killed with `kill -9` and restarted.
//!
//! Needs root, /dev/fuse and the `xlfsd` and `xlfs-mount` binaries next to `xlfs`
//! (`cargo build --workspace --bins`). Without them the tests say why and pass, unless
//! `XLFS_E2E_REQUIRE=1` (CI) makes that a failure. Every wait has a deadline, and a guard
//! unmounts and kills what a test started even when it fails.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::{Cleanup, bin, free_port, mounted, run_json, skip, xlfs_raw};

/// The protocol/client ping-timeout the kill test sets on its volume.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// protocol/client's longest reconnect backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(3);
/// Slack for process start, FUSE round trips and a loaded CI machine.
const MARGIN: Duration = Duration::from_secs(5);
const CHUNK: usize = 4096;

fn xlfs(state: &Path, args: &[&str]) -> Output {
    let o = xlfs_raw(state, args);
    assert!(
        o.status.success(),
        "xlfs {}: exit {:?}: {}",
        args.join(" "),
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Runs `f` on its own thread; panics if it does not finish within `limit` (a hang). A thread
/// stuck in a FUSE call is abandoned; the guard's unmount wakes it.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {limit:?}: it hangs"),
    }
}

/// Starts `xlfs-mount ARGS` in the background (output to `log`) and waits for `mnt`.
fn mount(args: &[String], mnt: &Path, log: &Path, guard: &mut Cleanup) {
    let out = File::create(log).expect("log");
    let child = Command::new(bin("xlfs-mount"))
        .args(args)
        .arg(mnt)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("run xlfs-mount");
    guard.children.push(child);
    let start = Instant::now();
    while !mounted(mnt) {
        let text = || std::fs::read_to_string(log).unwrap_or_default();
        if let Some(c) = guard.children.last_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            panic!("xlfs-mount {args:?} exited with {status}:\n{}", text());
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "xlfs-mount {args:?} did not mount {} in 30 s:\n{}",
            mnt.display(),
            text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `xlfs-mount ARGS MNT` expecting it to fail before mounting; returns its stderr.
fn mount_fails(args: &[String], mnt: &Path) -> String {
    let mut child = Command::new(bin("xlfs-mount"))
        .args(args)
        .arg(mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run xlfs-mount");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("xlfs-mount {args:?} neither failed nor mounted in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    eprintln!("$ xlfs-mount {} {}\n{err}", args.join(" "), mnt.display());
    assert!(!status.success(), "xlfs-mount {args:?} succeeded");
    assert!(!mounted(mnt), "xlfs-mount {args:?} mounted anyway");
    err
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn mount_by_host_port_volume_fetches_the_volfile() {
    if skip("mount_by_host_port_volume_fetches_the_volfile") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let brick = tmp.path().join("brick");
    let mnt = tmp.path().join("mnt");
    let mnt2 = tmp.path().join("mnt2");
    for d in [&mnt, &mnt2] {
        std::fs::create_dir(d).expect("mkdir");
    }
    let mut guard = Cleanup {
        state: state.clone(),
        volume: "fetched".into(),
        mountpoints: vec![mnt.clone(), mnt2.clone()],
        children: Vec::new(),
    };
    let port = free_port();
    xlfs(
        &state,
        &[
            "volume",
            "create",
            "fetched",
            &s(&brick),
            "--port",
            &port.to_string(),
        ],
    );
    xlfs(&state, &["volume", "start", "fetched"]);

    // The volume got a secret (0600) that its volfiles name but do not carry.
    let vol = state.join("volumes/fetched");
    let secret_file = vol.join("secret");
    let secret = std::fs::read_to_string(&secret_file).expect("the volume's secret file");
    let secret = secret.trim();
    assert_eq!(secret.len(), 64, "{secret:?}");
    let mode = std::fs::metadata(&secret_file)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    for f in ["client.vol", "brick-0.vol", "volume.ron"] {
        let text = std::fs::read_to_string(vol.join(f)).expect("state file");
        assert!(!text.contains(secret), "{f} carries the secret:\n{text}");
    }
    let client = std::fs::read_to_string(vol.join("client.vol")).expect("client.vol");
    assert!(client.contains("\"secret-file\""), "{client}");

    // A copy elsewhere, as a machine without the state directory would have.
    let copy = tmp.path().join("my-secret");
    std::fs::write(&copy, format!("{secret}\n")).expect("copy");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let server = format!("127.0.0.1:{port}:/fetched");
    let args = vec![server.clone(), "--secret-file".into(), s(&copy)];
    // The fetched volfile names the state's file; the mount must use its own instead (the
    // brick read the secret when it started).
    let aside = vol.join("secret.aside");
    std::fs::rename(&secret_file, &aside).expect("move the state's secret aside");
    mount(&args, &mnt, &tmp.path().join("mount.log"), &mut guard);
    std::fs::rename(&aside, &secret_file).expect("put it back");
    let (m, b) = (mnt.clone(), brick.clone());
    within(
        Duration::from_secs(30),
        "write/read through the mount",
        move || {
            let f = m.join("hello.txt");
            std::fs::write(&f, b"fetched from the brick\n").expect("write through the mount");
            assert_eq!(
                std::fs::read(&f).expect("read"),
                b"fetched from the brick\n"
            );
            assert_eq!(
                std::fs::read(b.join("hello.txt")).expect("on the brick"),
                b"fetched from the brick\n"
            );
            let names: Vec<_> = std::fs::read_dir(&m)
                .expect("list")
                .map(|e| e.expect("entry").file_name())
                .collect();
            assert_eq!(names, ["hello.txt"]);
        },
    );

    // An unknown volume, another volume's secret, no secret, a secret file others may read,
    // a secret on the command line, a bad spelling: clear errors, no mount.
    let err = mount_fails(
        &[
            format!("127.0.0.1:{port}:/nope"),
            "--secret-file".into(),
            s(&copy),
        ],
        &mnt2,
    );
    assert!(
        err.contains("volume \"nope\" is not served by this brick; it serves: \"fetched\""),
        "{err}"
    );
    let other = tmp.path().join("other-secret");
    std::fs::write(&other, "another volume's secret\n").expect("write");
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let err = mount_fails(&[server.clone(), "--secret-file".into(), s(&other)], &mnt2);
    assert!(
        err.contains("could not prove it holds the secret") && err.contains("--secret-file"),
        "{err}"
    );
    let err = mount_fails(std::slice::from_ref(&server), &mnt2);
    assert!(
        err.contains("requires the volume's secret") && err.contains("--secret-file"),
        "{err}"
    );
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = mount_fails(&[server.clone(), "--secret-file".into(), s(&copy)], &mnt2);
    assert!(err.contains("chmod 600"), "{err}");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let err = mount_fails(&[server.clone(), "--secret".into(), secret.into()], &mnt2);
    assert!(err.contains("--secret-file FILE"), "{err}");
    let err = mount_fails(&[format!("127.0.0.1:{port}:fetched")], &mnt2);
    assert!(err.contains("HOST:/VOLUME"), "{err}");

    // xlfs-nfsd loads the same way (when it is built).
    if bin("xlfs-nfsd").is_file() {
        let mut nfsd = Command::new(bin("xlfs-nfsd"))
            .args([&server, "--secret-file", &s(&copy), "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run xlfs-nfsd");
        let out = nfsd.stdout.take().expect("stdout");
        let line = within(Duration::from_secs(30), "xlfs-nfsd start", move || {
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
            line
        });
        let _ = nfsd.kill();
        let _ = nfsd.wait();
        assert!(
            line.contains("serving volume \"fetched\"") && line.contains(&server),
            "{line}"
        );
    }
}

/// The bytes of chunk `i` of the writer's file.
fn chunk(i: u64) -> Vec<u8> {
    (0..CHUNK as u64)
        .map(|j| ((i * 7 + j) % 251) as u8)
        .collect()
}

/// How the writer stopped.
struct WriterEnd {
    file: File,
    step: &'static str,
    err: std::io::Error,
    at: Instant,
}

fn brick_pid(state: &Path, volume: &str) -> libc::pid_t {
    run_json(state, volume)["bricks"][0]["pid"]
        .as_i64()
        .expect("brick pid in run.json") as libc::pid_t
}

fn gone(pid: libc::pid_t) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    matches!(state, None | Some('Z') | Some('X'))
}

/// `kill -9` of xlfsd while a client writes: the writer gets an error within the ping
/// timeout (at the latest at fsync: write-behind may acknowledge a write before it fails),
/// nothing hangs, fops fail fast while the brick is down; after restarting xlfsd the same
/// mount works again without remounting, and what was fsynced before the kill is intact.
#[test]
fn kill_9_of_the_brick_fails_fast_and_the_mount_recovers() {
    if skip("kill_9_of_the_brick_fails_fast_and_the_mount_recovers") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let brick = tmp.path().join("brick");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mut guard = Cleanup {
        state: state.clone(),
        volume: "k9".into(),
        mountpoints: vec![mnt.clone()],
        children: Vec::new(),
    };
    let port = free_port();
    xlfs(
        &state,
        &[
            "volume",
            "create",
            "k9",
            &s(&brick),
            "--port",
            &port.to_string(),
        ],
    );
    let ping = format!("{}s", PING_TIMEOUT.as_secs());
    xlfs(
        &state,
        &["volume", "set", "k9", "protocol.client.ping-timeout", &ping],
    );
    xlfs(&state, &["volume", "start", "k9"]);
    // The graph under test is volgen's (what `xlfs volume start` serves): say which.
    let client_vol =
        std::fs::read_to_string(state.join("volumes/k9/client.vol")).expect("client volfile");
    let types: Vec<&str> = client_vol
        .lines()
        .filter_map(|l| l.split("type: \"").nth(1))
        .filter_map(|t| t.split('"').next())
        .collect();
    eprintln!("client graph (bottom to top): {types:?}");
    assert!(client_vol.contains(&format!("\"ping-timeout\": \"{ping}\"")));
    mount(
        &[
            format!("127.0.0.1:{port}:/k9"),
            "--secret-file".into(),
            s(&state.join("volumes/k9/secret")),
        ],
        &mnt,
        &tmp.path().join("mount.log"),
        &mut guard,
    );
    let io_limit = PING_TIMEOUT + MARGIN;

    // A file written and fsynced before the kill.
    let before: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 253) as u8).collect();
    let (p, b) = (mnt.join("before.bin"), before.clone());
    within(io_limit, "write before.bin", move || {
        let mut f = File::create(&p).expect("create before.bin");
        f.write_all(&b).expect("write before.bin");
        f.sync_all().expect("fsync before.bin");
    });

    // The writer: 4 KiB + fsync in a loop until an error (or told to stop).
    let synced = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<WriterEnd>();
    let (path, synced2, stop2) = (mnt.join("stream.bin"), synced.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("create stream.bin");
        let mut i = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            let r = f
                .write_all(&chunk(i))
                .map_err(|e| ("write", e))
                .and_then(|()| f.sync_all().map_err(|e| ("fsync", e)));
            if let Err((step, err)) = r {
                let at = Instant::now();
                let _ = tx.send(WriterEnd {
                    file: f,
                    step,
                    err,
                    at,
                });
                return;
            }
            i += 1;
            synced2.store(i * CHUNK as u64, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let start = Instant::now();
    while synced.load(Ordering::Relaxed) < 16 * CHUNK as u64 {
        if let Ok(end) = rx.try_recv() {
            panic!(
                "the writer failed before the kill: {} {}",
                end.step, end.err
            );
        }
        assert!(
            start.elapsed() < io_limit,
            "the writer made no progress: {} bytes",
            synced.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // kill -9 the brick.
    let pid = brick_pid(&state, "k9");
    // SAFETY: kill(2) on the xlfsd pid `xlfs volume start` recorded for this test.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    let synced_at_kill = synced.load(Ordering::Relaxed);
    let end = rx.recv_timeout(io_limit).unwrap_or_else(|_| {
        panic!(
            "the writer got no error within {io_limit:?} of kill -9 (ping-timeout \
             {PING_TIMEOUT:?}): it hangs or writes into the void"
        )
    });
    let took = end.at.saturating_duration_since(killed);
    eprintln!(
        "writer: {} failed {took:?} after kill -9: {} (raw {:?}); {} bytes fsynced before",
        end.step,
        end.err,
        end.err.raw_os_error(),
        synced.load(Ordering::Relaxed)
    );
    assert!(took <= io_limit, "error after {took:?}");
    let synced_total = synced.load(Ordering::Relaxed);
    assert!(synced_total >= synced_at_kill);
    assert!(
        gone(pid) || {
            std::thread::sleep(Duration::from_millis(500));
            gone(pid)
        }
    );

    // While the brick is down, lookups and opens fail fast (not ENOENT: the brick is not
    // saying the file is absent, it is not there).
    let m = mnt.clone();
    let errs = within(io_limit, "stat/open while the brick is down", move || {
        // Past the kernel's entry/attr cache (1 s), so the fops reach the graph.
        std::thread::sleep(Duration::from_millis(1100));
        let t0 = Instant::now();
        let stat = std::fs::metadata(m.join("absent-while-down"));
        let open = File::open(m.join("before.bin")).and_then(|mut f| {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).map(|_| buf)
        });
        (stat.map(|_| ()), open.map(|_| ()), t0.elapsed())
    });
    eprintln!(
        "while down: stat {:?}, open+read {:?} in {:?}",
        errs.0, errs.1, errs.2
    );
    let stat_err = errs
        .0
        .expect_err("stat of a new name succeeded with the brick down");
    assert_ne!(stat_err.kind(), std::io::ErrorKind::NotFound, "{stat_err}");
    errs.1
        .expect_err("open + read of a file succeeded with the brick down");
    assert!(
        errs.2 < io_limit,
        "fops took {:?} with the brick down",
        errs.2
    );

    // Restart xlfsd on the same port and brick directory.
    xlfs(&state, &["volume", "start", "k9"]);
    let restarted = Instant::now();
    let deadline = MAX_BACKOFF + MARGIN + PING_TIMEOUT;
    let after: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 241) as u8).collect();
    let recovered = loop {
        let (p, a) = (mnt.join("after.bin"), after.clone());
        let r = within(io_limit, "write after restart", move || {
            let mut f = File::create(&p)?;
            f.write_all(&a)?;
            f.sync_all()?;
            drop(f);
            std::fs::read(&p)
        });
        let last = match r {
            Ok(back) => {
                assert_eq!(back, after, "after.bin read back differs");
                break restarted.elapsed();
            }
            Err(e) => e.to_string(),
        };
        assert!(
            restarted.elapsed() < deadline,
            "the mount did not recover within {deadline:?} of the restart: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("the same mount works again {recovered:?} after the restart");

    // What was fsynced before the kill is intact.
    let (p, b) = (mnt.join("before.bin"), before);
    let got = within(io_limit, "read before.bin", move || std::fs::read(p));
    assert!(got.expect("read before.bin") == b, "before.bin changed");
    let p = mnt.join("stream.bin");
    let got =
        within(io_limit, "read stream.bin", move || std::fs::read(p)).expect("read stream.bin");
    assert!(
        got.len() as u64 >= synced_total,
        "stream.bin has {} bytes, {synced_total} were fsynced",
        got.len()
    );
    for (i, c) in got[..synced_total as usize].chunks(CHUNK).enumerate() {
        assert!(
            c == chunk(i as u64),
            "fsynced chunk {i} of stream.bin differs"
        );
    }

    // The writer's fd, opened before the kill, works again: protocol/client re-opens it by
    // GFID on the new connection (it took no lock, so it is not failed with EBADF).
    let WriterEnd { mut file, .. } = end;
    let n = synced_total / CHUNK as u64;
    let r = within(io_limit, "write on the old fd", move || {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(n * CHUNK as u64))?;
        file.write_all(&chunk(n))?;
        file.sync_all()
    });
    r.expect("the fd opened before the kill works after the restart");
    stop.store(true, Ordering::Relaxed);
}

/// Several volfile servers (`H1:P1,H2:P2:/VOL`): with the first one's brick dead, the mount
/// fetches from the next and works (replica 2: the other brick serves the files); a mount
/// watching the first server's volfile follows a change through the next once the first dies;
/// with every one dead a mount fails and names the first error.
#[test]
fn a_mount_fetches_from_the_next_volfile_server_when_the_first_is_down() {
    if skip("a_mount_fetches_from_the_next_volfile_server_when_the_first_is_down") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let (b0, b1) = (tmp.path().join("b0"), tmp.path().join("b1"));
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mut guard = Cleanup {
        state: state.clone(),
        volume: "backups".into(),
        mountpoints: vec![mnt.clone()],
        children: Vec::new(),
    };
    let port = free_port();
    xlfs(
        &state,
        &[
            "volume",
            "create",
            "backups",
            &s(&b0),
            &s(&b1),
            "--replica",
            "2",
            "--port",
            &port.to_string(),
        ],
    );
    xlfs(&state, &["volume", "start", "backups"]);
    let secret = s(&state.join("volumes/backups/secret"));
    // Brick 0 (the first volfile server) dies.
    let kill = |i: u64| {
        let pid = common::brick_pid(&state, "backups", i);
        // SAFETY: kill(2) of the brick process this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    kill(0);
    let source = format!("127.0.0.1:{port},127.0.0.1:{}:/backups", port + 1);
    let args = vec![source.clone(), "--secret-file".into(), secret.clone()];
    mount(&args, &mnt, &tmp.path().join("mount.log"), &mut guard);
    std::fs::write(mnt.join("f"), b"through brick 1").expect("write");
    assert_eq!(
        std::fs::read(b1.join("f")).expect("on brick 1"),
        b"through brick 1"
    );
    let o = Command::new("umount").arg(&mnt).output().expect("umount");
    assert!(o.status.success());

    // Both up again; a mount watching brick 0's volfile follows a change made while brick 0
    // is dead, through brick 1.
    xlfs(&state, &["volume", "start", "backups"]);
    let sock = tmp.path().join("mount.sock");
    let mut with_sock = args.clone();
    with_sock.extend(["--control-socket".into(), s(&sock)]);
    mount(&with_sock, &mnt, &tmp.path().join("mount2.log"), &mut guard);
    let dump = || {
        let o = xlfs_raw(
            &state,
            &["volume", "statedump", "--socket", &s(&sock), "--json"],
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // An option the dump shows (read-ahead's page count), changed in place when it changes.
    assert!(dump().contains("\"page_count\": 4"), "{}", dump());
    kill(0);
    xlfs(
        &state,
        &[
            "volume",
            "set",
            "backups",
            "performance.read-ahead.page-count",
            "8",
        ],
    );
    let end = Instant::now() + Duration::from_secs(40);
    while !dump().contains("\"page_count\": 8") {
        assert!(
            Instant::now() < end,
            "the mount did not follow the volfile through brick 1: {}\n{}",
            dump(),
            std::fs::read_to_string(tmp.path().join("mount2.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = Command::new("umount").arg(&mnt).output().expect("umount");
    assert!(o.status.success());
    // Every server down: the mount fails and says why.
    kill(1);
    let err = mount_fails(&args, &mnt);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}
