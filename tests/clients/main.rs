//! Many clients of one volume: the volume `xlfs up` starts (brick server + its own FUSE
//! mount), a second FUSE mount of it (`xlfs-mount 127.0.0.1:PORT:/NAME`, default options) and
//! an NFSv3 client (libnfs-utils through `xlfs-nfsd`), checked against the guarantees in
//! docs/consistency.md: appends from any number of clients never overlap or get lost, a
//! rename over a name is atomic to every client, close-to-open consistency, locks exclude
//! across clients (fcntl and flock), an unlink on one client leaves another's open fds
//! working, and a random mix of operations through both mounts and the NFS client agrees
//! with an in-memory model. The appends and the
//! random mix also run over the cluster layouts (replica 2, stripe 2, distribute 2, one
//! xlfsd per brick, volumes made by `xlfs volume create`).
//!
//! Needs root and /dev/fuse. Without them a test says why and passes, unless
//! XLFS_E2E_REQUIRE=1 (set by .ci/run) makes it fail. Every test tears its processes and
//! mounts down, also when it fails (guards).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xlfs_integration_tests::{bin, free_ports, is_mounted, spawn_rm_rf, xattrs};

macro_rules! require {
    () => {
        xlfs_integration_tests::require_e2e!()
    };
}

/// A child process that is stopped (SIGTERM, then SIGKILL) and whose mount, if any, is
/// detached when dropped.
struct Proc {
    child: Child,
    mnt: Option<PathBuf>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(m) = &self.mnt
            && is_mounted(m)
        {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

fn wait_mounted(mnt: &Path, p: &mut Proc, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !is_mounted(mnt) {
        if let Ok(Some(st)) = p.child.try_wait() {
            panic!(
                "{} exited ({st}) before mounting:\n{}",
                mnt.display(),
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "no mount on {}", mnt.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One volume, its own mount `a` and a second mount `b` (dropped in reverse order: the
/// second mount first, then `xlfs up`, which unmounts `a` and stops the brick).
struct Volume {
    b: Option<Proc>,
    up: Option<Proc>,
    /// For a volume made by `xlfs volume create` (see [`Volume::start_layout`]): its state
    /// directory, whose bricks `xlfs volume stop` stops once both mounts are gone.
    state: Option<PathBuf>,
    a: PathBuf,
    bm: PathBuf,
    port: u16,
    name: String,
    dir: tempfile::TempDir,
}

impl Drop for Volume {
    fn drop(&mut self) {
        drop(self.b.take());
        drop(self.up.take());
        if let Some(state) = &self.state {
            let _ = Command::new(bin("xlfs"))
                .args(["volume", "stop", &self.name])
                .env("XLFS_STATE_DIR", state)
                .output();
        }
        if std::env::var_os("XLFS_KEEP").is_some() {
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"));
            println!("kept {}", kept.keep().display());
        }
    }
}

impl Volume {
    fn start(name: &str) -> Volume {
        Volume::start_with(name, &[])
    }

    /// [`Volume::start`] with `mount_args` for both mounts.
    fn start_with(name: &str, mount_args: &[&str]) -> Volume {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, bm) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir_all(&a).expect("mkdir a");
        fs::create_dir_all(&bm).expect("mkdir b");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let log = dir.path().join("up.log");
        let child = Command::new(bin("xlfs"))
            .arg("up")
            .arg(dir.path().join("vol"))
            .arg(&a)
            .args(["--name", name, "--port", &port.to_string()])
            .arg("--")
            .args(mount_args)
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log"))
            .spawn()
            .expect("xlfs up");
        let mut up = Proc {
            child,
            mnt: Some(a.clone()),
        };
        wait_mounted(&a, &mut up, &log);
        let blog = dir.path().join("b.log");
        // The volume's secret, made by `xlfs up` in its state directory.
        let secret = dir
            .path()
            .join("vol/state/volumes")
            .join(name)
            .join("secret");
        let child = Command::new(bin("xlfs-mount"))
            .arg(format!("127.0.0.1:{port}:/{name}"))
            .arg("--secret-file")
            .arg(&secret)
            .arg(&bm)
            .args(mount_args)
            .stdout(Stdio::null())
            .stderr(File::create(&blog).expect("log"))
            .spawn()
            .expect("xlfs-mount");
        let mut b = Proc {
            child,
            mnt: Some(bm.clone()),
        };
        wait_mounted(&bm, &mut b, &blog);
        Volume {
            b: Some(b),
            up: Some(up),
            state: None,
            a,
            bm,
            port,
            name: name.into(),
            dir,
        }
    }

    /// A volume of `bricks` local bricks made with `xlfs volume create NAME ARGS...` (replica,
    /// stripe, distribute: the cluster translators), one xlfsd per brick, and two
    /// `xlfs-mount`s of it: the same kit over a cluster layout.
    fn start_layout(name: &str, args: &[&str], bricks: usize) -> Volume {
        Volume::start_layout_with(name, args, bricks, &[])
    }

    /// [`Volume::start_layout`] with `mount_args` for both mounts.
    fn start_layout_with(name: &str, args: &[&str], bricks: usize, mount_args: &[&str]) -> Volume {
        Volume::start_layout_set(name, args, bricks, mount_args, &[])
    }

    /// [`Volume::start_layout_with`], with `xlfs volume set NAME KEY VALUE` for each of
    /// `set` before the volume starts.
    fn start_layout_set(
        name: &str,
        args: &[&str],
        bricks: usize,
        mount_args: &[&str],
        set: &[(&str, &str)],
    ) -> Volume {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let port = free_ports(bricks as u16);
        let xlfs = |a: &[String]| {
            let out = Command::new(bin("xlfs"))
                .args(a)
                .env("XLFS_STATE_DIR", &state)
                .output()
                .expect("xlfs");
            assert!(
                out.status.success(),
                "xlfs {a:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let mut create: Vec<String> = vec!["volume".into(), "create".into(), name.into()];
        create.extend(args.iter().map(|a| a.to_string()));
        create.extend(["--port".into(), port.to_string()]);
        create.extend((0..bricks).map(|i| {
            format!(
                "127.0.0.1:{}",
                dir.path().join(format!("brick{i}")).display()
            )
        }));
        xlfs(&create);
        for (k, v) in set {
            xlfs(&[
                "volume".into(),
                "set".into(),
                name.into(),
                k.to_string(),
                v.to_string(),
            ]);
        }
        xlfs(&["volume".into(), "start".into(), name.into()]);
        let mut mounts = Vec::new();
        for m in ["a", "b"] {
            let mnt = dir.path().join(m);
            fs::create_dir_all(&mnt).expect("mkdir mount point");
            let log = dir.path().join(format!("{m}.log"));
            let child = Command::new(bin("xlfs-mount"))
                .arg(format!("127.0.0.1:{port}:/{name}"))
                .arg("--secret-file")
                .arg(state.join("volumes").join(name).join("secret"))
                .arg(&mnt)
                .args(mount_args)
                .stdout(Stdio::null())
                .stderr(File::create(&log).expect("log"))
                .spawn()
                .expect("xlfs-mount");
            let mut p = Proc {
                child,
                mnt: Some(mnt.clone()),
            };
            wait_mounted(&mnt, &mut p, &log);
            mounts.push((p, mnt));
        }
        let (b, bm) = mounts.pop().expect("b");
        let (a_proc, a) = mounts.pop().expect("a");
        Volume {
            b: Some(b),
            up: Some(a_proc),
            state: Some(state),
            a,
            bm,
            port,
            name: name.into(),
            dir,
        }
    }

    /// The volume's secret file (made by `xlfs up` or `xlfs volume create`).
    fn secret_file(&self) -> PathBuf {
        let state = match &self.state {
            Some(s) => s.clone(),
            None => self.dir.path().join("vol/state"),
        };
        state.join("volumes").join(&self.name).join("secret")
    }

    /// An NFSv3 server of the volume (`xlfs-nfsd` fetching the client volfile from the
    /// brick) and its port.
    fn nfs(&self) -> (Proc, u16) {
        let log = self.dir.path().join("nfs.log");
        let mut child = Command::new(bin("xlfs-nfsd"))
            .arg(format!("127.0.0.1:{}:/{}", self.port, self.name))
            .arg("--secret-file")
            .arg(self.secret_file())
            .args(["--port", "0", "--no-root-squash"])
            .stdout(Stdio::piped())
            .stderr(File::create(&log).expect("log"))
            .spawn()
            .expect("xlfs-nfsd");
        let out = child.stdout.take().expect("stdout");
        let p = Proc { child, mnt: None };
        let mut lines = BufReader::new(out);
        let mut line = String::new();
        loop {
            line.clear();
            let n = lines.read_line(&mut line).expect("nfsd stdout");
            assert!(
                n > 0,
                "xlfs-nfsd exited before serving:\n{}",
                fs::read_to_string(&log).unwrap_or_default()
            );
            if let Some(rest) = line.split(" on 127.0.0.1:").nth(1) {
                let port = rest
                    .split_whitespace()
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("port");
                // Keep draining stdout so the server never blocks on it.
                std::thread::spawn(move || for _ in lines.lines() {});
                return (p, port);
            }
        }
    }
}

fn have_nfs_cat() -> bool {
    let found = Command::new("nfs-cat").arg("--help").output().is_ok();
    if !found {
        assert!(
            std::env::var("XLFS_E2E_REQUIRE").as_deref() != Ok("1"),
            "libnfs-utils is missing: apt-get install -y libnfs-utils"
        );
        println!("NFS part skipped: libnfs-utils is not installed");
    }
    found
}

/// The contents of `path` through NFS, `None` when it cannot be opened (no such name).
fn nfs_try_cat(port: u16, path: &str) -> Option<Vec<u8>> {
    let url = format!("nfs://127.0.0.1/{path}?version=3&nfsport={port}&mountport={port}");
    let o = Command::new("nfs-cat").arg(&url).output().expect("nfs-cat");
    o.status.success().then_some(o.stdout)
}

/// Creates `name` in the volume's root through NFS with the contents of local file `src`.
fn nfs_cp(port: u16, src: &Path, name: &str) {
    let url = format!("nfs://127.0.0.1//{name}?version=3&nfsport={port}&mountport={port}");
    let o = Command::new("nfs-cp")
        .arg(src)
        .arg(&url)
        .output()
        .expect("nfs-cp");
    assert!(
        o.status.success(),
        "nfs-cp {url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn nfs_cat(port: u16, path: &str) -> Vec<u8> {
    let url = format!("nfs://127.0.0.1/{path}?version=3&nfsport={port}&mountport={port}");
    let o = Command::new("nfs-cat").arg(&url).output().expect("nfs-cat");
    assert!(
        o.status.success(),
        "nfs-cat {url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

const RECORD: usize = 1000;

fn record(writer: usize, i: usize) -> Vec<u8> {
    let mut r = format!("{writer:03}:{i:07}:").into_bytes();
    r.resize(RECORD - 1, b'a' + (writer % 26) as u8);
    r.push(b'\n');
    r
}

/// 8 writers, 4 on each mount, each appending 2,000 records of 1,000 bytes with O_APPEND
/// to one file: every record is there once, whole. (Issue 24 bug 1: half were lost with
/// the kernel writeback cache, and records were torn when a write was split at a page.)
#[test]
fn appends_from_two_mounts_are_all_there_and_whole() {
    require!();
    appends(&Volume::start("appends"), 2000);
}

/// 8 writers, 4 on each mount, each append `each` records to one file; every record is
/// there once, whole, through both mounts.
fn appends(v: &Volume, each: usize) {
    const WRITERS: usize = 8;
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let p = if w % 2 == 0 { &v.a } else { &v.bm }.join("log");
            std::thread::spawn(move || {
                let mut f = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&p)
                    .expect("open O_APPEND");
                for i in 0..each {
                    f.write_all(&record(w, i)).expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    for m in [&v.a, &v.bm] {
        let data = fs::read(m.join("log")).expect("read back");
        assert_eq!(data.len(), WRITERS * each * RECORD, "size through {m:?}");
        let mut seen = std::collections::HashSet::new();
        for (k, r) in data.chunks(RECORD).enumerate() {
            let head = std::str::from_utf8(&r[..12]).unwrap_or("?");
            let (w, i): (usize, usize) = match (head[..3].parse(), head[4..11].parse()) {
                (Ok(w), Ok(i)) => (w, i),
                _ => panic!("record {k} torn through {m:?}: {:?}", &r[..40.min(r.len())]),
            };
            assert_eq!(r, &record(w, i)[..], "record {k} torn through {m:?}");
            assert!(seen.insert((w, i)), "record {w}:{i} twice");
        }
        assert_eq!(seen.len(), WRITERS * each);
    }
}

/// One mount writes a temporary file, closes it and renames it over a name that always
/// exists; the other mount stats, opens and reads that name all along, then links it.
/// Readers never get an error, a short file or mixed contents. (Issue 24 bug 2: ESTALE,
/// ENOENT and zero-length reads.)
#[test]
fn a_rename_over_a_name_is_atomic_to_the_other_mount() {
    require!();
    let v = Volume::start("renames");
    const SIZE: usize = 64 << 10;
    fs::write(v.a.join("name"), vec![1u8; SIZE]).expect("first version");
    std::thread::sleep(Duration::from_millis(300));
    let run = |linker: bool, pause: Duration| {
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b) = (v.a.clone(), v.bm.clone());
        let st = stop.clone();
        let writer = std::thread::spawn(move || {
            let mut n = 0u32;
            while !st.load(Ordering::Relaxed) {
                let tmp = a.join(format!(".tmp{n}"));
                fs::write(&tmp, vec![(n % 250 + 2) as u8; SIZE]).expect("write temp");
                fs::rename(&tmp, a.join("name")).expect("rename over");
                n += 1;
                std::thread::sleep(pause);
            }
            n
        });
        let p = b.join("name");
        let mut errors: BTreeMap<String, u32> = BTreeMap::new();
        let mut ops = 0u32;
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            ops += 1;
            let r: std::io::Result<()> = (|| {
                if linker {
                    let l = b.join("lnk");
                    fs::hard_link(&p, &l)?;
                    let m = fs::metadata(&l)?;
                    fs::remove_file(&l)?;
                    if m.len() != SIZE as u64 {
                        return Err(std::io::Error::other(format!("linked size {}", m.len())));
                    }
                    return Ok(());
                }
                let m =
                    fs::metadata(&p).map_err(|e| std::io::Error::other(format!("stat: {e}")))?;
                if m.len() != SIZE as u64 {
                    return Err(std::io::Error::other(format!("stat size {}", m.len())));
                }
                let mut data = Vec::new();
                File::open(&p)
                    .map_err(|e| std::io::Error::other(format!("open: {e}")))?
                    .read_to_end(&mut data)
                    .map_err(|e| std::io::Error::other(format!("read: {e}")))?;
                if data.len() != SIZE || data.iter().any(|&x| x != data[0]) {
                    return Err(std::io::Error::other(format!(
                        "read {} bytes, mixed: {}",
                        data.len(),
                        data.iter().any(|&x| x != data[0])
                    )));
                }
                Ok(())
            })();
            if let Err(e) = r {
                *errors.entry(e.to_string()).or_default() += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let renames = writer.join().expect("writer");
        (ops, renames, errors)
    };
    // Readers: no error at all, at full rename speed.
    let (ops, renames, errors) = run(false, Duration::ZERO);
    println!("readers: {ops} rounds during {renames} renames: {errors:?}");
    assert!(renames > 20 && ops > 20, "too little happened");
    assert!(errors.is_empty(), "readers saw {errors:?} in {ops} rounds");
    // link(2): a link through a name replaced at that very moment can fail once the
    // kernel's single retry with a fresh lookup races another rename (ESTALE, as on NFS);
    // at 50 renames/s that is rare, and nothing else may go wrong.
    let (ops, renames, errors) = run(true, Duration::from_millis(20));
    println!("linker: {ops} links during {renames} renames: {errors:?}");
    let estale = errors
        .iter()
        .filter(|(e, _)| e.contains("Stale file handle"))
        .map(|(_, n)| *n)
        .sum::<u32>();
    let other: u32 = errors.values().sum::<u32>() - estale;
    assert_eq!(other, 0, "links failed otherwise than ESTALE: {errors:?}");
    assert!(
        estale * 50 <= ops,
        "more than 2% of links failed with ESTALE: {errors:?} in {ops}"
    );
}

/// Upcalls: with the kernel allowed to cache attributes, names and absent names for 30 s,
/// what one mount changes still shows on the other within a few seconds, because the brick
/// tells the other mount to drop what it cached (docs/consistency.md). Without upcalls each
/// step below would take the full 30 s.
#[test]
fn another_mounts_changes_show_before_the_cache_timeouts() {
    require!();
    changes_show_soon(&Volume::start_with("upcalls", &LONG_CACHE));
}

/// The same over the cluster layouts: each brick of a replica tells the mount, and
/// replicate, distribute and stripe pass the upcalls up.
#[test]
fn another_mounts_changes_show_before_the_cache_timeouts_on_each_cluster_layout() {
    require!();
    for (name, args) in [
        ("upr2", &["--replica", "2"][..]),
        ("upd2", &[][..]),
        ("ups2", &["--stripe", "2"][..]),
    ] {
        println!("layout {name} {args:?}");
        changes_show_soon(&Volume::start_layout_with(name, args, 2, &LONG_CACHE));
    }
}

/// A lock one mount of a replica 2 volume holds eagerly (it keeps the file's inodelk after a
/// write, for `post-op-delay`, here 20 s) is given up as soon as the other mount wants it:
/// the bricks send the holder a lock-contention upcall. Without it the other mount's first
/// write to the file would wait out the delay.
#[test]
fn an_eager_lock_is_given_up_when_another_mount_writes() {
    require!();
    let v = Volume::start_layout_set(
        "eagr2",
        &["--replica", "2"],
        2,
        &[],
        &[("cluster.replicate.post-op-delay", "20s")],
    );
    let a = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(v.a.join("f"))
        .expect("open a");
    use std::os::unix::fs::FileExt;
    // A writes and keeps the file open: its hold (lock and pre-op) stays.
    a.write_all_at(b"from a", 0).expect("write a");
    a.sync_data().ok();
    a.write_all_at(b"from a", 0).expect("write a again");
    std::thread::sleep(Duration::from_millis(200));
    for round in 0..3 {
        let t0 = Instant::now();
        let b = OpenOptions::new()
            .write(true)
            .open(v.bm.join("f"))
            .expect("open b");
        b.write_all_at(b"from b", 100).expect("write b");
        // close waits for the write to reach the bricks (flush-behind off).
        drop(b);
        let took = t0.elapsed();
        println!("round {round}: B's write and close took {took:?}");
        assert!(
            took < Duration::from_secs(5),
            "B waited {took:?}: the eager lock was not given up"
        );
        // A takes its hold again.
        a.write_all_at(b"from a", 200).expect("write a");
    }
    drop(a);
    let got = fs::read(v.a.join("f")).expect("read");
    assert_eq!(&got[100..106], b"from b");
    assert_eq!(&got[200..206], b"from a");
}

/// A directory one mount of a replica 2 volume holds eagerly (it keeps the directory's
/// entrylk and entry pre-op after a create, for `post-op-delay`, here 20 s) is given up as
/// soon as the other mount makes or removes a name there: the bricks send the holder a
/// lock-contention upcall for entrylks too. And a mount that exits first ends its holds
/// (post-ops and unlocks): afterwards no copy of anything is marked.
#[test]
fn a_directory_hold_is_given_up_when_another_mount_makes_a_name_there() {
    require!();
    let mut v = Volume::start_layout_set(
        "edir2",
        &["--replica", "2"],
        2,
        &[],
        &[("cluster.replicate.post-op-delay", "20s")],
    );
    fs::create_dir(v.a.join("d")).expect("mkdir");
    for round in 0..3 {
        fs::write(v.a.join(format!("d/a{round}")), b"a").expect("create on a");
        let t0 = Instant::now();
        fs::write(v.bm.join(format!("d/b{round}")), b"b").expect("create on b");
        fs::remove_file(v.bm.join(format!("d/a{round}"))).expect("unlink on b");
        let took = t0.elapsed();
        println!("round {round}: B's create and unlink took {took:?}");
        assert!(
            took < Duration::from_secs(5),
            "B waited {took:?}: the directory hold was not given up"
        );
    }
    let mut names: Vec<String> = fs::read_dir(v.a.join("d"))
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["b0", "b1", "b2"]);
    // Both mounts exit (SIGTERM) right after writing: their holds end before they do.
    fs::write(v.a.join("d/last"), b"x").expect("create on a");
    drop(v.up.take());
    drop(v.b.take());
    for brick in ["brick0", "brick1"] {
        for name in ["d", "d/last", "d/b2"] {
            let p = v.dir.path().join(brick).join(name);
            for (k, val) in xattrs(&p) {
                if k.starts_with("trusted.afr.") {
                    assert!(
                        val.iter().all(|b| *b == 0),
                        "{}: {k} = {val:?} after both mounts exited",
                        p.display()
                    );
                }
            }
        }
    }
}

/// Kernel caches of 30 s, for [`changes_show_soon`].
const LONG_CACHE: [&str; 6] = [
    "--attr-timeout",
    "30s",
    "--entry-timeout",
    "30s",
    "--negative-timeout",
    "30s",
];

fn changes_show_soon(v: &Volume) {
    let (a, b) = (v.a.clone(), v.bm.clone());
    // Within this, or the upcall did not do its work.
    let soon = Duration::from_secs(5);
    let until = |what: &str, ok: &dyn Fn() -> bool| {
        let t0 = Instant::now();
        while !ok() {
            assert!(
                t0.elapsed() < soon,
                "{what}: not seen through the other mount within {soon:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        println!("{what}: seen after {:?}", t0.elapsed());
    };
    fs::write(a.join("f"), b"0123456789").expect("write f");
    let mode = |p: &Path| fs::metadata(p).map(|m| m.mode() & 0o7777);
    // B caches f's attributes and the name.
    let before = mode(&b.join("f")).expect("b stats f");
    fs::set_permissions(a.join("f"), fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_ne!(before, 0o600);
    until("chmod", &|| mode(&b.join("f")).ok() == Some(0o600));
    // A write changes the size B holds.
    OpenOptions::new()
        .append(true)
        .open(a.join("f"))
        .and_then(|mut f| f.write_all(b"more"))
        .expect("append");
    until("append", &|| {
        fs::metadata(b.join("f")).map(|m| m.len()).ok() == Some(14)
    });
    // B is told the bytes changed too: a read through B's page cache sees the new ones.
    until("read", &|| {
        fs::read(b.join("f")).ok().as_deref() == Some(&b"0123456789more"[..])
    });
    // A name B found absent (cached for 30 s) is made by A.
    assert!(fs::metadata(b.join("g")).is_err());
    fs::write(a.join("g"), b"g").expect("create g");
    until("create", &|| b.join("g").exists());
    // A rename moves a name B has cached away.
    fs::rename(a.join("f"), a.join("h")).expect("rename");
    until("rename away", &|| !b.join("f").exists());
    until("rename to", &|| fs::read(b.join("h")).is_ok());
    // And in a directory B listed.
    fs::create_dir(a.join("d")).expect("mkdir");
    until("mkdir", &|| b.join("d").is_dir());
    let listing = |d: &Path| -> Vec<String> {
        let names = fs::read_dir(d)
            .expect("ls")
            .map(|e| e.expect("entry").file_name());
        names.map(|n| n.to_string_lossy().into_owned()).collect()
    };
    // B's kernel caches the listing (FOPEN_CACHE_DIR); the upcall of A's create drops it,
    // although B never looked the name up.
    assert_eq!(listing(&b.join("d")), Vec::<String>::new());
    fs::write(a.join("d/x"), b"x").expect("create d/x");
    until("create, in a listing", &|| listing(&b.join("d")) == ["x"]);
    until("create in a listed directory", &|| b.join("d/x").exists());
    fs::remove_file(a.join("d/x")).expect("unlink");
    until("unlink", &|| !b.join("d/x").exists());
    until("unlink, in a listing", &|| listing(&b.join("d")).is_empty());
    // Nothing of this came from B's own changes: B's writes show on A the same way.
    fs::write(b.join("from-b"), b"b").expect("b creates");
    assert_eq!(mode(&a.join("from-b")).expect("a stats it"), before);
    fs::set_permissions(b.join("from-b"), fs::Permissions::from_mode(0o640)).expect("chmod");
    until("chmod from b", &|| {
        mode(&a.join("from-b")).ok() == Some(0o640)
    });
}

/// Close-to-open: after one client closes a file, an open on another client sees all of
/// its data and its size, although that client had the old contents cached (FUSE and NFS).
#[test]
fn an_open_after_another_clients_close_sees_everything() {
    require!();
    let v = Volume::start("cto");
    let (pa, pb) = (v.a.join("f"), v.bm.join("f"));
    fs::write(&pa, vec![b'1'; 10_000]).expect("v1");
    // B caches v1 (pages and attributes).
    assert_eq!(fs::read(&pb).expect("b reads v1"), vec![b'1'; 10_000]);
    for round in 0..20u8 {
        // Same size, new bytes: only the open's check can tell.
        let c = b'a' + round;
        fs::write(&pa, vec![c; 10_000]).expect("rewrite");
        let got = fs::read(&pb).expect("b reads");
        assert_eq!(got.len(), 10_000, "round {round}");
        assert!(got.iter().all(|&x| x == c), "round {round}: stale bytes");
        // Grows: the size must show through fstat of the new open, and every byte read.
        let mut f = OpenOptions::new().append(true).open(&pa).expect("open a");
        f.write_all(&[c; 5_000]).expect("append");
        drop(f);
        let mut g = File::open(&pb).expect("open b");
        assert_eq!(g.metadata().expect("fstat").len(), 15_000, "round {round}");
        let mut got = Vec::new();
        g.read_to_end(&mut got).expect("read");
        assert_eq!(got.len(), 15_000, "round {round}");
        // Shrinks back.
        OpenOptions::new()
            .write(true)
            .open(&pa)
            .expect("open")
            .set_len(10_000)
            .expect("truncate");
        assert_eq!(
            File::open(&pb).and_then(|f| f.metadata()).expect("b").len(),
            10_000
        );
    }
    if have_nfs_cat() {
        let (_nfsd, port) = v.nfs();
        assert_eq!(nfs_cat(port, "/f"), fs::read(&pa).expect("a"));
        fs::write(&pb, b"written through b\n").expect("write b");
        assert_eq!(nfs_cat(port, "/f"), b"written through b\n");
        assert_eq!(fs::read(&pa).expect("a"), b"written through b\n");
    }
}

fn setlk(f: &File, typ: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = 0;
    fl.l_len = 100;
    // SAFETY: a valid fd and a flock that outlives the call.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A POSIX lock taken through one mount excludes the other; unlinking a file through one
/// mount leaves the other's open fd reading and writing it.
#[test]
fn locks_exclude_across_mounts_and_an_unlink_leaves_the_others_fds_working() {
    require!();
    let v = Volume::start("lkul");
    fs::write(v.a.join("l"), b"x").expect("mk");
    let fa = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.a.join("l"))
        .expect("a");
    let fb = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.bm.join("l"))
        .expect("b");
    setlk(&fa, libc::F_WRLCK).expect("a locks");
    let e = setlk(&fb, libc::F_WRLCK).expect_err("b must be refused");
    assert!(
        matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)),
        "{e}"
    );
    setlk(&fa, libc::F_UNLCK).expect("a unlocks");
    setlk(&fb, libc::F_WRLCK).expect("b locks now");
    let e = setlk(&fa, libc::F_RDLCK).expect_err("a must be refused");
    assert!(
        matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)),
        "{e}"
    );
    drop(fb);
    setlk(&fa, libc::F_WRLCK).expect("b's close released its lock");

    fs::write(v.a.join("u"), b"before").expect("mk u");
    let mut held = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.bm.join("u"))
        .expect("b opens u");
    fs::remove_file(v.a.join("u")).expect("a unlinks");
    std::thread::sleep(Duration::from_secs(6)); // past the brick's unlinked-grace
    let mut s = String::new();
    held.read_to_string(&mut s).expect("read after unlink");
    assert_eq!(s, "before");
    use std::os::unix::fs::FileExt;
    held.write_at(b"after!", 0).expect("write after unlink");
    let mut back = [0u8; 6];
    held.read_exact_at(&mut back, 0).expect("read back");
    assert_eq!(&back, b"after!");
    assert_eq!(held.metadata().expect("fstat").nlink(), 0);
    assert_eq!(
        fs::metadata(v.bm.join("u")).map_err(|e| e.kind()).err(),
        Some(ErrorKind::NotFound),
        "the name is gone on the other mount"
    );
}

fn flock(f: &File, op: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock(2) on a valid fd.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn would_block(r: std::io::Result<()>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.raw_os_error(), Some(libc::EWOULDBLOCK), "{what}: {e}");
}

/// flock(2) locks exclude across mounts (FUSE_FLOCK_LOCKS: whole-file locks on the bricks
/// owned by the open file description): exclusive through a read-only fd, shared with shared,
/// conversion, a blocked waiter woken by the holder's last close (not by closing a dup), a
/// holder killed with SIGKILL gives it back, and a flock excludes an fcntl lock of another
/// client as over NFS (docs/consistency.md).
#[test]
fn flock_locks_exclude_across_mounts_and_go_with_the_last_close() {
    require!();
    flocks(&Volume::start("flk"));
}

/// The same over replica 2 (locks on every copy; a read-only fd opens on the other copy at
/// its first lock) and distribute 2 (one xlfsd per brick).
#[test]
fn flock_locks_exclude_across_mounts_of_replica_and_distribute() {
    require!();
    for (name, args) in [("flkr2", &["--replica", "2"][..]), ("flkd2", &[][..])] {
        println!("layout {name} {args:?}");
        flocks(&Volume::start_layout(name, args, 2));
    }
}

fn flocks(v: &Volume) {
    fs::write(v.a.join("f"), b"x").expect("mk");
    let open = |p: PathBuf| File::open(p).expect("open read-only");
    let fa = open(v.a.join("f"));
    let fb = open(v.bm.join("f"));
    flock(&fa, libc::LOCK_EX | libc::LOCK_NB).expect("a: exclusive through a read-only fd");
    would_block(
        flock(&fb, libc::LOCK_SH | libc::LOCK_NB),
        "b: shared while a holds it",
    );
    would_block(
        flock(&fb, libc::LOCK_EX | libc::LOCK_NB),
        "b: exclusive too",
    );
    flock(&fa, libc::LOCK_SH | libc::LOCK_NB).expect("a: down to shared");
    flock(&fb, libc::LOCK_SH | libc::LOCK_NB).expect("b: shared beside a's");
    would_block(
        flock(&fb, libc::LOCK_EX | libc::LOCK_NB),
        "b: exclusive beside a's shared",
    );
    flock(&fa, libc::LOCK_UN).expect("a: unlock");
    flock(&fb, libc::LOCK_EX | libc::LOCK_NB).expect("b: up to exclusive once a let go");

    // A waiter on mount a, woken when b's last fd of the description closes.
    let fa2 = open(v.a.join("f"));
    let dup = fb.try_clone().expect("dup");
    drop(fb);
    would_block(
        flock(&fa2, libc::LOCK_EX | libc::LOCK_NB),
        "a: closing one of two fds of b's description keeps its lock",
    );
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        flock(&fa2, libc::LOCK_EX).map(|()| (fa2, t0.elapsed()))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!waiter.is_finished(), "a's LOCK_EX waits while b holds it");
    drop(dup);
    let (fa2, waited) = waiter.join().expect("join").expect("a's waiter granted");
    assert!(waited < Duration::from_secs(10), "woken late: {waited:?}");

    // A flock excludes another client's fcntl lock of the file (as flock over NFS).
    let fbw = OpenOptions::new()
        .write(true)
        .open(v.bm.join("f"))
        .expect("b rw");
    let e = setlk(&fbw, libc::F_WRLCK).expect_err("fcntl beside a flock");
    assert!(
        matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)),
        "{e}"
    );
    // The kernel sends the release of a closed description without waiting for it: the
    // lock goes a moment after close(2) returns, not at once (docs/consistency.md).
    drop(fa2);
    let t0 = Instant::now();
    while let Err(e) = setlk(&fbw, libc::F_WRLCK) {
        assert!(
            matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)),
            "{e}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the flock of a closed description was not given back"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("flock gone {:?} after the close", t0.elapsed());
    setlk(&fbw, libc::F_UNLCK).expect("fcntl unlock");

    // A holder killed with SIGKILL: its description is released, and so is the lock.
    // (`flock -o`: the lock stays with the flock process, not with `sleep`.)
    use std::os::unix::process::CommandExt;
    let mut holder = Command::new("flock")
        .arg("-o")
        .arg(v.a.join("f"))
        .args(["sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("flock(1)");
    let fb3 = open(v.bm.join("f"));
    let t0 = Instant::now();
    while flock(&fb3, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
        flock(&fb3, libc::LOCK_UN).expect("unlock");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "flock(1) never took it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) of the process group made for flock(1) and its sleep.
    unsafe { libc::kill(-(holder.id() as i32), libc::SIGKILL) };
    holder.wait().expect("reap");
    let t0 = Instant::now();
    while let Err(e) = flock(&fb3, libc::LOCK_EX | libc::LOCK_NB) {
        assert_eq!(e.raw_os_error(), Some(libc::EWOULDBLOCK), "{e}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "a killed holder's flock was never given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the model knows of one file.
type Model = BTreeMap<String, Vec<u8>>;

/// A random mix through both mounts, one operation at a time (each opens and closes what
/// it uses), checked against an in-memory model after every step through the *other*
/// mount, then this one: close-to-open makes every completed operation visible there.
/// Names come and go too (create, rename over, link, unlink, truncating rewrites).
///
/// Default mount options. An open re-checks the names it may have come through, so a
/// name another client replaced or removed is looked up again instead of opening the file
/// it named (docs/consistency.md); `XLFS_MIX_SEED` and `XLFS_MIX_STEPS` pick other runs.
#[test]
fn a_random_mix_through_two_mounts_agrees_with_a_model() {
    require!();
    random_mix(&Volume::start_with("mix", &[]), 600);
}

/// The kit on the cluster layouts: replica 2, stripe 2, distribute 2 (one xlfsd per brick).
#[test]
fn a_random_mix_through_two_mounts_of_each_cluster_layout_agrees_with_a_model() {
    require!();
    for (name, args) in [
        ("mixr2", &["--replica", "2"][..]),
        ("mixs2", &["--stripe", "2"][..]),
        ("mixd2", &[][..]),
    ] {
        println!("layout {name} {args:?}");
        random_mix(&Volume::start_layout(name, args, 2), 250);
    }
}

/// A directory another mount removed, still open here, behaves as a removed directory does
/// on a local file system: removals in it fail with ENOENT (not ESTALE, which no walk can
/// mend: the directory fd is where it starts), fstat(2) shows no link, a listing is empty
/// (not EINVAL: ext4 no longer takes the brick's cookie). And `rm -rf` of one tree through
/// two mounts at once succeeds in both, as two local ones do (it ignores ENOENT), on a
/// single brick, replica 2 and distribute 2. Before, each of those layouts failed it.
#[test]
fn a_tree_removed_through_two_mounts_at_once_goes_without_an_error() {
    require!();
    for (name, args, bricks) in [
        ("rmrf1", &[][..], 1),
        ("rmrfr2", &["--replica", "2"][..], 2),
        ("rmrfd2", &[][..], 2),
    ] {
        let v = Volume::start_layout(name, args, bricks);
        removed_dir_stays_removed(&v);
        for round in 0..3 {
            let top = v.a.join("t");
            for d in 0..12 {
                fs::create_dir_all(top.join(format!("d{d}/e"))).expect("mkdir");
                for f in 0..20 {
                    File::create(top.join(format!("d{d}/f{f}"))).expect("create");
                }
            }
            let rms = spawn_rm_rf(&[&v.a, &v.bm], "t");
            for rm in rms {
                let out = rm.wait_with_output().expect("rm");
                assert!(
                    out.status.success() && out.stderr.is_empty(),
                    "{name} round {round}: rm -rf {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            for m in [&v.a, &v.bm] {
                assert!(!m.join("t").exists(), "{name}: the tree is left");
            }
        }
    }
}

/// The checks of a directory removed through mount A while mount B has it open.
fn removed_dir_stays_removed(v: &Volume) {
    let d = v.a.join("gone");
    fs::create_dir(&d).expect("mkdir");
    for f in 0..40 {
        File::create(d.join(format!("f{f}"))).expect("create");
    }
    let dir = File::open(v.bm.join("gone")).expect("open the directory");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
    let mut buf = vec![0u8; 256];
    // SAFETY: getdents64 into a buffer of the length given, on an open directory.
    let first = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
    assert!(
        first > 0,
        "the first listing: {}",
        std::io::Error::last_os_error()
    );
    for f in 0..40 {
        fs::remove_file(d.join(format!("f{f}"))).expect("unlink");
    }
    fs::remove_dir(&d).expect("rmdir");
    for f in ["f0", "f1", "new"] {
        let name = std::ffi::CString::new(f).expect("name");
        // SAFETY: unlinkat(2) of a NUL-terminated name under an open directory fd.
        let r = unsafe { libc::unlinkat(fd, name.as_ptr(), 0) };
        let e = std::io::Error::last_os_error();
        assert!(
            r == -1 && e.raw_os_error() == Some(libc::ENOENT),
            "unlink {f} in a removed directory: {r} {e}"
        );
    }
    assert_eq!(
        dir.metadata().expect("fstat").nlink(),
        0,
        "fstat's link count"
    );
    // The rest of the listing (from where the first part ended): nothing, or ENOENT.
    // SAFETY: as above.
    let rest = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
    let e = std::io::Error::last_os_error();
    assert!(
        rest == 0 || (rest == -1 && e.raw_os_error() == Some(libc::ENOENT)),
        "the rest of the listing of a removed directory: {rest} {e}"
    );
}

/// The kit with performance/md-cache in both mounts' graphs (off by default; its negative
/// cache off, as the kernel's is): the attributes it caches must never break what the kit
/// checks, since every open asks the bricks again and upcalls drop the rest.
#[test]
fn a_random_mix_through_two_mounts_with_md_cache_agrees_with_a_model() {
    require!();
    let set = [
        ("performance.md-cache", "on"),
        ("performance.md-cache.negative-timeout", "0"),
    ];
    random_mix(&Volume::start_layout_set("mixmd", &[], 1, &[], &set), 250);
}

/// Appends from two mounts of a replica 2 and a stripe 2 volume (replicate and stripe
/// resolve O_APPEND themselves, under their locks).
#[test]
fn appends_from_two_mounts_of_replica_and_stripe_are_all_there_and_whole() {
    require!();
    for (name, args) in [
        ("appr2", &["--replica", "2"][..]),
        ("apps2", &["--stripe", "2"][..]),
    ] {
        appends(&Volume::start_layout(name, args, 2), 250);
    }
}

/// `steps` unless XLFS_MIX_STEPS says otherwise.
fn random_mix(v: &Volume, steps: usize) {
    let seed: u64 = std::env::var("XLFS_MIX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let steps: usize = std::env::var("XLFS_MIX_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(steps);
    let mut rng = seed;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let names = ["f0", "f1", "f2", "f3", "f4"];
    let mut model: Model = BTreeMap::new();
    // Inodes shared by hard links: name -> id, id -> data.
    let mut links: BTreeMap<String, u32> = BTreeMap::new();
    let mut data: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut next_id = 0u32;
    let mounts = [v.a.clone(), v.bm.clone()];
    // The third client: an NFSv3 one (libnfs-utils, a new connection per command) through
    // xlfs-nfsd, which creates files and checks one name after every step.
    let nfs = have_nfs_cat().then(|| v.nfs());
    let nfs_port = nfs.as_ref().map(|(_, port)| *port);
    let nfs_src = v.dir.path().join("nfs-src");
    let (mut nfs_creates, mut nfs_reads) = (0, 0);
    let mut history: Vec<String> = Vec::new();
    for step in 0..steps {
        let (m, other) = if next(2) == 0 {
            (&mounts[0], &mounts[1])
        } else {
            (&mounts[1], &mounts[0])
        };
        let name = names[next(names.len() as u64) as usize];
        let p = m.join(name);
        let op = next(if nfs_port.is_some() { 10 } else { 9 });
        let mut via = m.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let what = match op {
            0 => {
                // create or truncate-and-write
                let len = next(20_000) as usize;
                let byte = (step % 251) as u8;
                fs::write(&p, vec![byte; len]).expect("write");
                let id = *links.entry(name.into()).or_insert_with(|| {
                    next_id += 1;
                    next_id
                });
                data.insert(id, vec![byte; len]);
                format!("write {name} {len}")
            }
            1 if links.contains_key(name) => {
                let rec = vec![b'0' + (step % 10) as u8; next(3000) as usize + 1];
                let mut f = OpenOptions::new()
                    .append(true)
                    .open(&p)
                    .expect("append open");
                f.write_all(&rec).expect("append");
                let id = links[name];
                data.get_mut(&id).expect("data").extend_from_slice(&rec);
                format!("append {name} {}", rec.len())
            }
            2 if links.contains_key(name) => {
                let len = next(25_000);
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .expect("open")
                    .set_len(len)
                    .expect("truncate");
                let id = links[name];
                data.get_mut(&id).expect("data").resize(len as usize, 0);
                format!("truncate {name} {len}")
            }
            3 if links.contains_key(name) => {
                let to = names[next(names.len() as u64) as usize];
                fs::rename(&p, m.join(to)).expect("rename");
                // POSIX: two links of one file are left as they are.
                if links.get(to) != links.get(name) {
                    let id = links.remove(name).expect("id");
                    let old = links.insert(to.into(), id);
                    gc(&mut data, &links, old);
                }
                format!("rename {name} {to}")
            }
            4 if links.contains_key(name) => {
                let to = names[next(names.len() as u64) as usize];
                if !links.contains_key(to) {
                    fs::hard_link(&p, m.join(to)).expect("link");
                    links.insert(to.into(), links[name]);
                }
                format!("link {name} {to}")
            }
            5 if links.contains_key(name) => {
                fs::remove_file(&p).expect("unlink");
                let old = links.remove(name);
                gc(&mut data, &links, old);
                format!("unlink {name}")
            }
            6 if links.contains_key(name) => {
                // Write in the middle through an fd (pwrite).
                use std::os::unix::fs::FileExt;
                let off = next(20_000);
                let rec = vec![b'A' + (step % 26) as u8; next(4000) as usize + 1];
                let f = OpenOptions::new().write(true).open(&p).expect("open");
                f.write_all_at(&rec, off).expect("pwrite");
                drop(f);
                let d = data.get_mut(&links[name]).expect("data");
                let end = off as usize + rec.len();
                if d.len() < end {
                    d.resize(end, 0);
                }
                d[off as usize..end].copy_from_slice(&rec);
                format!("pwrite {name} {off} {}", rec.len())
            }
            7 => {
                // An O_DIRECT-free read on the same mount, then through the other.
                format!("read {name}")
            }
            9 if !links.contains_key(name) => {
                // A new file made through NFS (nfs-cp creates exclusively).
                let port = nfs_port.expect("op 9 only with NFS");
                let len = next(20_000) as usize;
                let byte = (step % 251) as u8;
                fs::write(&nfs_src, vec![byte; len]).expect("nfs source");
                nfs_cp(port, &nfs_src, name);
                next_id += 1;
                links.insert(name.into(), next_id);
                data.insert(next_id, vec![byte; len]);
                via = "nfs";
                nfs_creates += 1;
                format!("create {name} {len}")
            }
            _ => {
                format!("stat {name}")
            }
        };
        let what = format!("{what} via {via}");
        history.push(what.clone());
        let what = history[history.len().saturating_sub(12)..].join("; ");
        model.clear();
        for (n, id) in &links {
            model.insert(n.clone(), data[id].clone());
        }
        // One name through NFS (each command is a new client: nothing cached), then every
        // name through the other mount (close-to-open), then this one.
        if let Some(port) = nfs_port {
            let n = names[step % names.len()];
            let got = nfs_try_cat(port, &format!("/{n}"));
            nfs_reads += usize::from(got.is_some());
            match (model.get(n), got) {
                (Some(want), Some(got)) => assert!(
                    got == *want,
                    "step {step} ({what}): contents of {n} through NFS differ (len {} vs {})",
                    got.len(),
                    want.len()
                ),
                (Some(want), None) => panic!(
                    "step {step} ({what}): {n} ({} bytes) not readable through NFS",
                    want.len()
                ),
                (None, Some(got)) => assert!(
                    model.values().any(|d| *d == got),
                    "step {step} ({what}): {n} should be gone through NFS"
                ),
                (None, None) => {}
            }
        }
        for mnt in [other, m] {
            for n in names {
                let path = mnt.join(n);
                match model.get(n) {
                    Some(want) => {
                        let mut f = File::open(&path)
                            .unwrap_or_else(|e| panic!("step {step} ({what}): open {path:?}: {e}"));
                        let len = f.metadata().expect("fstat").len();
                        assert_eq!(
                            len,
                            want.len() as u64,
                            "step {step} ({what}): size of {path:?} (nlink {}, ino {})",
                            f.metadata().map(|m| m.nlink()).unwrap_or(99),
                            f.metadata().map(|m| m.ino()).unwrap_or(0)
                        );
                        let mut got = Vec::new();
                        f.read_to_end(&mut got).expect("read");
                        assert!(
                            got == *want,
                            "step {step} ({what}): contents of {path:?} differ (len {} vs {})",
                            got.len(),
                            want.len()
                        );
                    }
                    None => {
                        // Gone: the other mount may still hold the name in its entry cache
                        // (up to --entry-timeout), but only as the file it was, so an open
                        // either fails with ENOENT or reads a file this model removed.
                        if let Ok(mut f) = File::open(&path) {
                            let nlink = f.metadata().map(|m| m.nlink()).unwrap_or(0);
                            let mut got = Vec::new();
                            f.read_to_end(&mut got).expect("read");
                            assert!(
                                nlink == 0 || model.values().any(|d| *d == got),
                                "step {step} ({what}): {path:?} should be gone, or be a file \
                                 that another name still links (nlink {nlink})"
                            );
                        }
                    }
                }
            }
        }
    }
    if nfs_port.is_some() {
        println!("{steps} steps; through NFS: {nfs_creates} creates, {nfs_reads} files read");
        assert!(
            nfs_creates > 0 && nfs_reads > 0,
            "the NFS client took no part"
        );
    }
}

/// Drops the data of inode `old` when no name refers to it any more.
fn gc(data: &mut BTreeMap<u32, Vec<u8>>, links: &BTreeMap<String, u32>, old: Option<u32>) {
    if let Some(id) = old
        && !links.values().any(|&v| v == id)
    {
        data.remove(&id);
    }
}

/// Two files renamed over one name at once through two mounts (`mv a c` on one, `mv b c` on
/// the other), 20 times, on stripe 2, distribute 3 and distribute 2 x replica 2: both
/// succeed, and the directory then holds `c` alone, listed once through either mount, with
/// the whole contents of `a` or of `b`. Before, stripe left `c` naming one file on one brick
/// and the other on the other (reads EIO; 14 rounds in 30), and distribute left two files
/// named `c` (listed twice) or failed one rename with EEXIST (20 rounds in 30).
#[test]
fn files_renamed_over_one_name_from_two_mounts_leave_one_whole_file() {
    require!();
    for (name, args, bricks) in [
        ("rovers2", &["--stripe", "2"][..], 2),
        ("roverd3", &[][..], 3),
        ("roverd2r2", &["--replica", "2"][..], 4),
    ] {
        let v = Volume::start_layout(name, args, bricks);
        for round in 0..20 {
            let dir = format!("o{round}");
            fs::create_dir(v.a.join(&dir)).expect("mkdir");
            let body = |n: &str| n.repeat(300_000).into_bytes();
            for n in ["a", "b"] {
                fs::write(v.a.join(&dir).join(n), body(n)).expect("write");
            }
            let _ = fs::read_dir(v.bm.join(&dir))
                .expect("list through the other mount")
                .count();
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let renames: Vec<_> = [(v.a.join(&dir), "a"), (v.bm.join(&dir), "b")]
                .into_iter()
                .map(|(d, from)| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        fs::rename(d.join(from), d.join("c"))
                    })
                })
                .collect();
            for (t, from) in renames.into_iter().zip(["a", "b"]) {
                if let Err(e) = t.join().expect("rename") {
                    panic!("{name} round {round}: mv {from} c: {e}");
                }
            }
            for m in [&v.a, &v.bm] {
                let mut names: Vec<String> = fs::read_dir(m.join(&dir))
                    .expect("list")
                    .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                assert_eq!(names, ["c"], "{name} round {round} through {}", m.display());
                let got = fs::read(m.join(&dir).join("c"))
                    .unwrap_or_else(|e| panic!("{name} round {round}: read c: {e}"));
                assert!(
                    got == body("a") || got == body("b"),
                    "{name} round {round}: c is neither file whole ({} bytes)",
                    got.len()
                );
            }
        }
    }
}

/// Two directories moved into each other at once through two mounts (`mv a b/` on one,
/// `mv b a/` on the other), 20 times, on replica 2, distribute 3, distribute 2 x replica 2
/// and stripe 2: one move succeeds and the other fails with EINVAL (a loop) or ENOENT (its
/// path walk found the other directory moved already), as on a local file system,
/// and every brick holds the same tree. Before, both could succeed (the kernel of each mount
/// sees only its own), each brick refusing one of them: `b/a` on some bricks and `a/b` on the
/// others (5 rounds in 30 on distribute 3, 3 in 30 on replica 2).
#[test]
fn directories_moved_into_each_other_from_two_mounts_end_alike_on_every_brick() {
    require!();
    for (name, args, bricks) in [
        ("xmover2", &["--replica", "2"][..], 2),
        ("xmoved3", &[][..], 3),
        ("xmoved2r2", &["--replica", "2"][..], 4),
        ("xmoves2", &["--stripe", "2"][..], 2),
    ] {
        let v = Volume::start_layout(name, args, bricks);
        let mut outcomes = BTreeMap::new();
        for round in 0..20 {
            let top = format!("r{round}");
            fs::create_dir_all(v.a.join(&top).join("a")).expect("mkdir a");
            fs::create_dir_all(v.a.join(&top).join("b")).expect("mkdir b");
            let _ = fs::read_dir(v.bm.join(&top))
                .expect("list through the other mount")
                .count();
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let moves: Vec<_> = [(v.a.join(&top), "a", "b"), (v.bm.join(&top), "b", "a")]
                .into_iter()
                .map(|(dir, from, into)| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        match fs::rename(dir.join(from), dir.join(into).join(from)) {
                            Ok(()) => "ok".to_string(),
                            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => "EINVAL".into(),
                            // Its walk found the other moved already: no such path.
                            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => "ENOENT".into(),
                            Err(e) => e.to_string(),
                        }
                    })
                })
                .collect();
            let r: Vec<String> = moves.into_iter().map(|t| t.join().expect("move")).collect();
            *outcomes.entry(r.clone()).or_insert(0) += 1;
            assert!(
                r.iter().filter(|o| *o == "ok").count() == 1
                    && r.iter().any(|o| o == "EINVAL" || o == "ENOENT"),
                "{name} round {round}: one move succeeds, the other is a loop: {r:?}"
            );
            let trees: Vec<Vec<String>> = (0..bricks)
                .map(|i| {
                    let root = v.dir.path().join(format!("brick{i}")).join(&top);
                    let mut names = Vec::new();
                    let mut todo = vec![root.clone()];
                    while let Some(d) = todo.pop() {
                        for e in fs::read_dir(&d).expect("list brick") {
                            let p = e.expect("entry").path();
                            names.push(p.strip_prefix(&root).expect("under").display().to_string());
                            if p.is_dir() {
                                todo.push(p);
                            }
                        }
                    }
                    names.sort();
                    names
                })
                .collect();
            assert!(
                trees.iter().all(|t| *t == trees[0]),
                "{name} round {round}: the bricks differ: {trees:?}"
            );
        }
        println!("{name}: {outcomes:?}");
    }
}

/// Directories made, renamed over each other and removed under a few names from two mounts
/// of a distribute 3 and a distribute 2 x replica 2 volume at once, each with a file in it
/// now and then: afterwards every name is a directory on every brick with one GFID, or on
/// none, no brick holds a directory of another name, and each directory lists the same files
/// through both mounts. Before, distribute 3 left a name with two GFIDs in 2 runs of 9.
#[test]
fn directories_renamed_over_each_other_from_two_mounts_stay_whole_on_every_brick() {
    require!();
    for (name, args, bricks) in [
        ("dirren", &[][..], 3),
        ("dirrenr", &["--replica", "2"][..], 4),
    ] {
        println!("layout {name} {args:?}");
        renamed_over_each_other(&Volume::start_layout(name, args, bricks), bricks);
    }
}

fn renamed_over_each_other(v: &Volume, nbricks: usize) {
    let ops = race_on_two_mounts(
        v,
        5,
        0x2545_f491,
        &[
            ErrorKind::AlreadyExists,
            ErrorKind::NotFound,
            ErrorKind::DirectoryNotEmpty,
        ],
        |w, x, mnt| {
            let p = mnt.join(format!("d{}", x % 4));
            let q = mnt.join(format!("d{}", (x >> 4) % 4));
            let what = format!("{} {}", p.display(), q.display());
            match (x >> 8) % 5 {
                0 => (format!("mkdir {what}"), fs::create_dir(&p)),
                1 => (format!("rmdir {what}"), fs::remove_dir(&p)),
                2 | 3 => (format!("rename {what}"), fs::rename(&p, &q)),
                _ => (
                    format!("create {what}"),
                    File::create(p.join(format!("f{w}"))).map(drop),
                ),
            }
        },
    );
    println!("operations per worker: {ops:?}");
    let bricks: Vec<PathBuf> = (0..nbricks)
        .map(|i| v.dir.path().join(format!("brick{i}")))
        .collect();
    for b in &bricks {
        for e in fs::read_dir(b).expect("list brick") {
            let name = e.expect("entry").file_name().to_string_lossy().into_owned();
            assert!(
                name == ".xlfs" || ["d0", "d1", "d2", "d3"].contains(&name.as_str()),
                "{} holds {name}",
                b.display()
            );
        }
    }
    for n in 0..4 {
        let name = format!("d{n}");
        let copies = dir_gfids(&bricks, &name);
        let present = copies.iter().filter(|c| c.is_some()).count();
        assert!(
            present == 0 || (present == nbricks && copies.iter().all(|c| *c == copies[0])),
            "{name} on the bricks: {copies:?}"
        );
        if present == nbricks {
            let list = |m: &Path| {
                let mut l: Vec<String> = fs::read_dir(m.join(&name))
                    .expect("list through a mount")
                    .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect();
                l.sort();
                l
            };
            assert_eq!(
                list(&v.a),
                list(&v.bm),
                "{name} lists alike through both mounts"
            );
        }
    }
}

/// Four workers, two on each of `v`'s mounts, for `secs` seconds: each calls `step(worker,
/// x, mount)` with a new xorshift value `x` (seeded from `seed`) and panics on an error whose
/// kind is not in `allowed`, naming what `step` said it did. The calls each made.
fn race_on_two_mounts(
    v: &Volume,
    secs: u64,
    seed: u64,
    allowed: &'static [ErrorKind],
    step: fn(usize, u64, &Path) -> (String, std::io::Result<()>),
) -> Vec<u64> {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = [v.a.clone(), v.bm.clone(), v.a.clone(), v.bm.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, mnt)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = seed + 7 * w as u64;
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (what, r) = step(w, x, &mnt);
                    if let Err(e) = r
                        && !allowed.contains(&e.kind())
                    {
                        panic!("{what}: {e}");
                    }
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect()
}

/// The GFID of each brick's directory `name` (`None`: no directory of that name there).
fn dir_gfids(bricks: &[PathBuf], name: &str) -> Vec<Option<Vec<u8>>> {
    bricks
        .iter()
        .map(|b| {
            let p = b.join(name);
            p.is_dir().then(|| {
                xattrs(&p)
                    .into_iter()
                    .find(|(k, _)| k == "trusted.gfid")
                    .map(|(_, v)| v)
                    .unwrap_or_default()
            })
        })
        .collect()
}

/// Directories made and removed under the same names from two mounts of a distribute 3
/// volume, while each mount also looks them up (a lookup that finds a copy missing makes it):
/// afterwards every name is a directory on every brick with one GFID, or on none. Before
/// distribute's directory locks, a lookup could make copies of a directory the other mount
/// was removing (left on some bricks, with none on the first), or a mkdir could fail EEXIST
/// on copies a lookup made ahead of it and remove its own.
#[test]
fn directories_made_and_removed_from_two_mounts_stay_whole_on_every_brick() {
    require!();
    // Every stat a lookup through distribute (the kernel caches nothing).
    let no_cache = [
        "--entry-timeout",
        "0",
        "--attr-timeout",
        "0",
        "--negative-timeout",
        "0",
    ];
    let v = Volume::start_layout_with("dirrace", &[], 3, &no_cache);
    let ops = race_on_two_mounts(
        &v,
        4,
        0x9e37_79b9,
        &[ErrorKind::AlreadyExists, ErrorKind::NotFound],
        |_, x, mnt| {
            let p = mnt.join(format!("d{}", x % 4));
            let what = p.display().to_string();
            match (x >> 8) % 3 {
                0 => (format!("mkdir {what}"), fs::create_dir(&p)),
                1 => (format!("rmdir {what}"), fs::remove_dir(&p)),
                _ => (format!("stat {what}"), fs::metadata(&p).map(drop)),
            }
        },
    );
    println!("operations per mount: {ops:?}");
    // Lookups through a mount settle nothing that is not already whole: read the bricks.
    let bricks: Vec<PathBuf> = (0..3)
        .map(|i| v.dir.path().join(format!("brick{i}")))
        .collect();
    for n in 0..4 {
        let name = format!("d{n}");
        let copies = dir_gfids(&bricks, &name);
        let present = copies.iter().filter(|c| c.is_some()).count();
        assert!(
            present == 0 || (present == 3 && copies.iter().all(|c| *c == copies[0])),
            "{name} on the bricks: {copies:?}"
        );
    }
}
