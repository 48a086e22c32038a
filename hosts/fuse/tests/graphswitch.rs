//! Open files survive a graph switch (issue 23: `xlfs volume add-brick` regenerates the client
//! volfile and every mount follows it by switching to a new graph). A real brick (`xlfsd`)
//! and a mount of it by `--volfile`; the volfile on disk then changes its topology, the mount
//! rereads it (every second) and switches; the fds opened before must keep working: they are
//! unknown to the new graph's protocol/client connections, so the mount moves each to the
//! new graph on its first fop (src/migrate.rs), except fds holding locks.
//!
//! Needs root and /dev/fuse, and `xlfsd` built next to `xlfs-mount` (`cargo build
//! --workspace`). The brick and the mount are killed (and the mount detached) when a test
//! fails.

#[macro_use]
mod common;

use common::*;
use std::ffi::CStr;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SWITCH_TIMEOUT: Duration = Duration::from_secs(20);

/// An `xlfsd` serving a brick directory; killed when dropped.
struct Brick {
    child: Child,
    port: u16,
}

impl Brick {
    fn start(dir: &Path, name: &str, log: &Path) -> Brick {
        let bin = Path::new(BIN).with_file_name("xlfsd");
        assert!(
            bin.is_file(),
            "{} missing: run `cargo build --workspace` first",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .arg("--brick")
            .arg(dir)
            .args(["--volume-name", name, "--print-port", "--log-level", "warn"])
            .stdout(Stdio::piped())
            .stderr(File::create(log).expect("brick log"))
            .spawn()
            .expect("spawn xlfsd");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("port line");
        let port = match line.trim().parse() {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "xlfsd printed {line:?}, not a port:\n{}",
                    fs::read_to_string(log).unwrap_or_default()
                );
            }
        };
        Brick { child, port }
    }
}

impl Drop for Brick {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the volfile becomes at the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// debug/io-stats on top of the one protocol/client (new connections, same brick).
    Stats,
    /// add-brick: a cluster/distribute over the old brick (first child) and a second one,
    /// which runs from the start.
    Distribute,
    /// Only the second brick, which has none of the first one's files: no fd can move.
    Elsewhere,
}

/// Bricks, a mount through `volfile` with a control socket, and the files of both. Field
/// order is drop order: the mount goes before the bricks.
struct Setup {
    mount: Mounted,
    bricks: Vec<Brick>,
    change: Change,
    volfile: PathBuf,
    control: PathBuf,
    dir: tempfile::TempDir,
}

fn client(i: usize, port: u16) -> String {
    format!(
        r#"(name: "vol-client-{i}", type: "protocol/client", options: {{ "remote-host": "127.0.0.1:{port}", "remote-subvolume": "vol{i}" }}),"#
    )
}

/// The client volfile before the switch (`changed` false: one protocol/client to brick 0)
/// and after it.
fn client_volfile(bricks: &[Brick], change: Change, changed: bool) -> String {
    if changed && change == Change::Elsewhere {
        let only = client(1, bricks[1].port);
        return format!("(\n    volumes: [\n        {only}\n    ],\n)\n");
    }
    let mut volumes = vec![client(0, bricks[0].port)];
    if changed {
        match change {
            Change::Elsewhere => {}
            Change::Stats => volumes.push(
                r#"(name: "vol-stats", type: "debug/io-stats", subvolumes: ["vol-client-0"]),"#
                    .into(),
            ),
            Change::Distribute => {
                volumes.push(client(1, bricks[1].port));
                volumes.push(
                    r#"(name: "vol-dht", type: "cluster/distribute", subvolumes: ["vol-client-0", "vol-client-1"]),"#
                        .into(),
                );
            }
        }
    }
    format!(
        "(\n    volumes: [\n        {}\n    ],\n)\n",
        volumes.join("\n        ")
    )
}

impl Setup {
    fn start(change: Change) -> Setup {
        Setup::start_with(change, &[])
    }

    /// [`Setup::start`] with more mount options.
    fn start_with(change: Change, extra: &[&str]) -> Setup {
        let dir = tempdir();
        let mnt = dir.path().join("mnt");
        fs::create_dir_all(&mnt).expect("mkdir mnt");
        let n = if change == Change::Stats { 1 } else { 2 };
        let bricks: Vec<Brick> = (0..n)
            .map(|i| {
                let brick_dir = dir.path().join(format!("brick{i}"));
                fs::create_dir_all(&brick_dir).expect("mkdir brick");
                let log = dir.path().join(format!("brick{i}.log"));
                Brick::start(&brick_dir, &format!("vol{i}"), &log)
            })
            .collect();
        let volfile = dir.path().join("client.vol");
        fs::write(&volfile, client_volfile(&bricks, change, false)).expect("volfile");
        let control = dir.path().join("control.sock");
        let control_arg = control.display().to_string();
        let mount = Mounted::start_volfile(
            &volfile,
            &mnt,
            // The migration's debug line counts how often each fd moved.
            &[
                &[
                    "--control-socket",
                    &control_arg,
                    "--log-level",
                    "info,xlfs_mount::migrate=debug",
                ],
                extra,
            ]
            .concat(),
            &dir.path().join("mount.log"),
        );
        Setup {
            mount,
            bricks,
            change,
            volfile,
            control,
            dir,
        }
    }

    fn mnt(&self) -> &Path {
        &self.mount.mountpoint
    }

    fn statedump(&self) -> String {
        let mut c = UnixStream::connect(&self.control).expect("control socket");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        c.write_all(b"statedump text\n").expect("ask");
        c.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut out = String::new();
        c.read_to_string(&mut out).expect("statedump");
        out
    }

    /// The `graph:` and `older graphs alive:` lines of the mount's own statedump section.
    fn graphs(&self) -> (u64, String) {
        let dump = self.statedump();
        let current = dump
            .lines()
            .find_map(|l| l.strip_prefix("graph: "))
            .and_then(|g| g.trim().parse().ok())
            .unwrap_or_else(|| panic!("no graph line in:\n{dump}"));
        let older = dump
            .lines()
            .find_map(|l| l.strip_prefix("older graphs alive: "))
            .unwrap_or_else(|| panic!("no older-graphs line in:\n{dump}"))
            .to_string();
        (current, older)
    }

    /// Rewrites the volfile on disk (its change) and waits until the mount switched.
    fn switch(&self) -> u64 {
        let (before, _) = self.graphs();
        let tmp = self.dir.path().join("client.vol.tmp");
        fs::write(&tmp, client_volfile(&self.bricks, self.change, true)).expect("new volfile");
        fs::rename(&tmp, &self.volfile).expect("replace volfile");
        let start = Instant::now();
        loop {
            let (now, _) = self.graphs();
            if now != before {
                return now;
            }
            assert!(
                start.elapsed() < SWITCH_TIMEOUT,
                "no graph switch after {SWITCH_TIMEOUT:?}:\n{}",
                self.mount.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the statedump says `older`; panics with the dump otherwise.
    fn wait_older(&self, older: &str) {
        let start = Instant::now();
        loop {
            let (_, now) = self.graphs();
            if now == older {
                return;
            }
            assert!(
                start.elapsed() < SWITCH_TIMEOUT,
                "older graphs alive: {now:?}, want {older:?}:\n{}",
                self.statedump()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A directory stream on an open directory fd (readdir(3) through the mount).
struct Dir(*mut libc::DIR);

impl Dir {
    fn open(path: &Path) -> Dir {
        let f = File::open(path).expect("open directory");
        // SAFETY: fdopendir takes ownership of a valid directory descriptor.
        let d = unsafe { libc::fdopendir(f.into_raw_fd()) };
        assert!(
            !d.is_null(),
            "fdopendir: {}",
            std::io::Error::last_os_error()
        );
        Dir(d)
    }

    /// The next name ("." and ".." skipped), `None` at the end; panics on an error.
    fn next(&mut self) -> Option<String> {
        loop {
            // SAFETY: errno is thread-local; clearing it tells the end from an error.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: self.0 is an open stream; the entry is read before the next call.
            let e = unsafe { libc::readdir(self.0) };
            if e.is_null() {
                let err = std::io::Error::last_os_error();
                assert_eq!(err.raw_os_error(), Some(0), "readdir: {err}");
                return None;
            }
            // SAFETY: d_name is NUL-terminated within the entry.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            if name != "." && name != ".." {
                return Some(name);
            }
        }
    }

    fn rewind(&mut self) {
        // SAFETY: self.0 is an open stream.
        unsafe { libc::rewinddir(self.0) };
    }

    fn rest(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.next()).collect()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: closes the stream (and its fd) once.
        unsafe { libc::closedir(self.0) };
    }
}

/// Drops the kernel's cached pages of `f`, so the next read reaches the mount.
fn drop_pages(f: &File) {
    // SAFETY: a valid descriptor; advice only.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise");
}

/// `got` holds every name of `want` exactly once (says which are missing or doubled).
fn same_names(mut got: Vec<String>, want: &[String], what: &str) {
    got.sort();
    if got == want {
        return;
    }
    let missing: Vec<&String> = want.iter().filter(|n| !got.contains(n)).collect();
    let mut doubled: Vec<&String> = got
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| &w[0])
        .collect();
    doubled.dedup();
    panic!(
        "{what}: {} names, want {}; missing {}: {missing:?}; doubled {}: {doubled:?}",
        got.len(),
        want.len(),
        missing.len(),
        doubled.len()
    );
}

fn names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("an-entry-with-a-rather-long-name-{i:05}"))
        .collect()
}

/// A file open for writing, one open for reading and a directory listing in progress across a
/// switch to a graph with new connections: write, read, fsync, fstat, ftruncate, readdir and
/// close through the old fds all work and the data is right; the old graph lives while they
/// are open and drops once they moved or closed.
#[test]
fn open_files_and_a_listing_keep_working_across_a_graph_switch() {
    require_fuse!();
    open_files_and_a_listing(Change::Stats, &[]);
}

/// The same with the kernel's writeback cache (writes reach the mount later, through any
/// writable fd of the file, and at fsync/close).
#[test]
fn open_files_and_a_listing_keep_working_across_a_switch_with_the_writeback_cache() {
    require_fuse!();
    open_files_and_a_listing(Change::Stats, &["--writeback-cache"]);
}

/// The same across add-brick: one brick, then a distribute over it and a new one.
#[test]
fn open_files_and_a_listing_keep_working_across_add_brick() {
    require_fuse!();
    open_files_and_a_listing(Change::Distribute, &[]);
}

fn open_files_and_a_listing(change: Change, extra: &[&str]) {
    let s = Setup::start_with(change, extra);
    let m = s.mnt().to_path_buf();
    let data = pattern(256 << 10, 23);
    fs::write(m.join("r"), &data).expect("write r");
    fs::create_dir(m.join("d")).expect("mkdir d");
    let want = names(300);
    for n in &want {
        File::create(m.join("d").join(n)).expect("create entry");
    }

    let w = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.join("w"))
        .expect("open w");
    w.write_all_at(b"before-", 0).expect("write before");
    let r = File::open(m.join("r")).expect("open r");
    let mut head = vec![0u8; 4096];
    r.read_exact_at(&mut head, 0).expect("read before");
    assert_eq!(head, data[..4096]);
    let mut d = Dir::open(&m.join("d"));
    // Past the middle of the listing: on ext4 bricks the cookie is a name hash, which then
    // has bit 62 set (which cluster/distribute reads as a child index).
    let mut listed: Vec<String> = (0..200).map(|_| d.next().expect("an entry")).collect();
    let (first, older) = s.graphs();
    assert_eq!(older, "none");

    let second = s.switch();
    assert_ne!(first, second);
    // Nothing moved yet: the old graph lives for its three fds.
    assert_eq!(s.graphs().1, format!("{first} (3 fds)"));

    w.write_all_at(b"after", 7)
        .expect("write through an fd opened before the switch");
    w.sync_all().expect("fsync");
    assert_eq!(w.metadata().expect("fstat").len(), 12);
    w.set_len(10).expect("ftruncate");
    assert_eq!(w.metadata().expect("fstat").len(), 10);
    let mut back = vec![0u8; 10];
    w.read_exact_at(&mut back, 0)
        .expect("read back through the writer");
    assert_eq!(&back, b"before-aft");

    drop_pages(&r);
    let mut all = vec![0u8; data.len()];
    r.read_exact_at(&mut all, 0)
        .expect("read through an fd opened before the switch");
    assert!(all == data, "the reader sees the file's data");

    // The listing goes on from where it was, on the old graph (its cookies are that graph's).
    listed.extend(d.rest());
    same_names(listed, &want, "the listing across the switch");
    assert_eq!(
        s.graphs().1,
        format!("{first} (1 fds)"),
        "the writer and the reader moved; the directory in mid-listing did not"
    );
    // From the start again: the kernel answers from the listing it cached (FOPEN_CACHE_DIR),
    // whose offsets are the old graph's cookies, so the directory stays where they are valid.
    d.rewind();
    same_names(d.rest(), &want, "a listing from offset 0 after the switch");
    assert_eq!(s.graphs().1, format!("{first} (1 fds)"));
    drop(d);
    // A new open drops the cached listing (it came from another graph) and lists on the
    // current graph.
    let mut d = Dir::open(&m.join("d"));
    same_names(
        d.rest(),
        &want,
        "a listing through a directory opened after the switch",
    );

    // Every fd moved or was closed: nothing holds the old graph any more.
    s.wait_older("none");
    drop(w);
    drop(r);
    drop(d);
    s.wait_older("none");
    let (current, _) = s.graphs();
    assert_eq!(current, second);
    assert_eq!(fs::read(m.join("w")).expect("read w"), b"before-aft");
    assert!(
        !s.mount.log_text().contains("could not move"),
        "{}",
        s.mount.log_text()
    );
}

/// Fds that were only opened (no fop since the switch) keep the old graph alive until closed;
/// closing them releases them there, and then the old graph drops.
#[test]
fn the_old_graph_drops_once_its_fds_are_closed() {
    require_fuse!();
    let s = Setup::start(Change::Stats);
    let m = s.mnt().to_path_buf();
    fs::write(m.join("a"), b"a").expect("write a");
    let a = File::open(m.join("a")).expect("open a");
    let b = OpenOptions::new()
        .append(true)
        .open(m.join("a"))
        .expect("open a for appending");
    let (first, _) = s.graphs();
    s.switch();
    assert_eq!(s.graphs().1, format!("{first} (2 fds)"));
    drop(a);
    // The kernel sends the release after close(2) returns.
    s.wait_older(&format!("{first} (1 fds)"));
    drop(b);
    s.wait_older("none");
}

/// A file unlinked while open, then a switch: the fd still reads and writes it (moved if the
/// new graph can still open it by GFID, else kept on the old graph, where the brick holds it).
#[test]
fn an_unlinked_open_file_keeps_working_across_a_switch() {
    require_fuse!();
    let s = Setup::start(Change::Stats);
    let m = s.mnt().to_path_buf();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.join("gone"))
        .expect("create");
    f.write_all_at(b"0123456789", 0).expect("write");
    fs::remove_file(m.join("gone")).expect("unlink");
    s.switch();
    f.write_all_at(b"abc", 10).expect("write after the switch");
    drop_pages(&f);
    let mut back = vec![0u8; 13];
    f.read_exact_at(&mut back, 0)
        .expect("read after the switch");
    assert_eq!(&back, b"0123456789abc");
    assert_eq!(f.metadata().expect("fstat").len(), 13);
    drop(f);
    s.wait_older("none");
}

fn setlk(fd: i32, cmd: i32, typ: i32) -> std::io::Result<()> {
    // SAFETY: a zeroed flock is valid; the fields used are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    // SAFETY: fd is open; fl is a valid flock.
    if unsafe { libc::fcntl(fd, cmd, &mut fl) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether another process can take a write lock on the whole of `path` now: a forked child
/// opens it and tries F_SETLK. 0: refused (EAGAIN/EACCES), 1: granted, 2: another error.
fn other_process_locks(path: &Path) -> i32 {
    let c = cstr(path);
    // SAFETY: the child calls only async-signal-safe functions (open, fcntl, _exit).
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            // SAFETY: in the child: open, fcntl and _exit only.
            unsafe {
                let fd = libc::open(c.as_ptr(), libc::O_RDWR);
                if fd < 0 {
                    libc::_exit(2);
                }
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = libc::F_WRLCK as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                if libc::fcntl(fd, libc::F_SETLK, &mut fl) == 0 {
                    libc::_exit(1);
                }
                let e = *libc::__errno_location();
                libc::_exit(if e == libc::EAGAIN || e == libc::EACCES {
                    0
                } else {
                    2
                });
            }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
            assert!(libc::WIFEXITED(status), "child status {status}");
            libc::WEXITSTATUS(status)
        }
    }
}

/// A POSIX lock taken before a switch is still held after it: another process on the same
/// mount (through the new graph) still cannot lock the file; the locked fd stays on the old
/// graph (its lock lives on that graph's connection) and keeps working; once it is closed
/// the lock is gone and the old graph drops.
#[test]
fn a_lock_taken_before_a_switch_still_excludes_after_it() {
    require_fuse!();
    a_lock_across(Change::Stats);
}

/// The same across add-brick (the new graph reaches the file through distribute).
#[test]
fn a_lock_taken_before_add_brick_still_excludes_after_it() {
    require_fuse!();
    a_lock_across(Change::Distribute);
}

fn a_lock_across(change: Change) {
    let s = Setup::start(change);
    let m = s.mnt().to_path_buf();
    let p = m.join("locked");
    fs::write(&p, b"data").expect("write");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .expect("open");
    setlk(f.as_raw_fd(), libc::F_SETLK, libc::F_WRLCK).expect("lock");
    assert_eq!(other_process_locks(&p), 0, "locked before the switch");
    let (first, _) = s.graphs();
    s.switch();
    assert_eq!(
        other_process_locks(&p),
        0,
        "the lock still excludes another process after the switch"
    );
    f.write_all_at(b"DATA", 0)
        .expect("write through the locked fd");
    f.sync_all().expect("fsync through the locked fd");
    setlk(f.as_raw_fd(), libc::F_SETLK, libc::F_WRLCK).expect("lock again (same owner)");
    assert_eq!(other_process_locks(&p), 0, "still excluded");
    // The locked fd did not move: the old graph holds it.
    assert_eq!(s.graphs().1, format!("{first} (1 fds)"));
    // close(2) of another fd of the file (opened on the new graph) releases the process's
    // locks, also the one on the old graph.
    let f2 = File::open(&p).expect("open again after the switch");
    drop(f2);
    assert_eq!(
        other_process_locks(&p),
        1,
        "closing another fd of the file released the lock"
    );
    setlk(f.as_raw_fd(), libc::F_SETLK, libc::F_WRLCK).expect("lock once more");
    assert_eq!(other_process_locks(&p), 0, "locked again");
    // An unlock through another fd (new graph) unlocks on the old graph too.
    let f3 = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .expect("open a third time");
    setlk(f3.as_raw_fd(), libc::F_SETLK, libc::F_UNLCK).expect("unlock through f3");
    assert_eq!(other_process_locks(&p), 1, "unlocked through another fd");
    drop(f3);
    setlk(f.as_raw_fd(), libc::F_SETLK, libc::F_WRLCK).expect("lock a last time");
    assert_eq!(other_process_locks(&p), 0, "locked again");
    drop(f);
    assert_eq!(
        other_process_locks(&p),
        1,
        "close(2) released the lock on the old graph"
    );
    s.wait_older("none");
    assert_eq!(fs::read(&p).expect("read"), b"DATA");
}

/// Sends SIGCONT to a stopped process when dropped (also when the test fails).
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// Readers busy on one fd while the graph switches: every read succeeds with the right data,
/// fops in flight on the old graph finish there, and the fd moves exactly once however many
/// fops find it on the old graph at the same time. (O_DIRECT reads reach the mount in
/// parallel; writes to one file the kernel sends one at a time.)
#[test]
fn concurrent_readers_on_one_fd_move_it_once() {
    require_fuse!();
    let s = Setup::start(Change::Stats);
    let m = s.mnt().to_path_buf();
    const READERS: usize = 8;
    const BLOCK: usize = 16 << 10;
    let data = std::sync::Arc::new(pattern(READERS * BLOCK, 5));
    fs::write(m.join("busy"), &*data).expect("write");
    let f = std::sync::Arc::new(
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(m.join("busy"))
            .expect("open"),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..READERS)
        .map(|i| {
            let (f, stop, data) = (f.clone(), stop.clone(), data.clone());
            std::thread::spawn(move || {
                let want = &data[i * BLOCK..(i + 1) * BLOCK];
                let mut got = vec![0u8; BLOCK];
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    rounds += 1;
                    f.read_exact_at(&mut got, (i * BLOCK) as u64)
                        .unwrap_or_else(|e| panic!("reader {i} round {rounds}: {e}"));
                    assert!(got == want, "reader {i} round {rounds}: wrong data");
                }
                rounds
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The brick paused across the switch: every reader's read waits on the old graph, and
    // once the brick goes on they all find the fd on the old graph at about the same time.
    let brick = s.bricks[0].child.id() as i32;
    // SAFETY: kill(2) on our own child xlfsd.
    unsafe { libc::kill(brick, libc::SIGSTOP) };
    let resume = Resume(brick);
    // The switch waits for the new graph's brick to answer, so the brick goes on from
    // another thread while `switch` waits for it.
    let waker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(resume);
    });
    s.switch();
    waker.join().expect("waker");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        assert!(t.join().expect("reader thread") > 0);
    }
    drop(f);
    s.wait_older("none");
    let log = s.mount.log_text();
    let moved = log.matches("open fd moved to the current graph").count();
    assert_eq!(moved, 1, "one fd, one migration:\n{log}");
    assert!(
        !log.contains("could not move"),
        "one attempt, which succeeded (a second open of the same fd on the new graph fails):\n{log}"
    );
}

/// An fd that cannot be opened on the new graph (its file is not on the new graph's brick:
/// ENOENT) stays on its old graph for good: its fops keep working there, one attempt only,
/// and the old graph drops once it is closed.
#[test]
fn an_fd_the_new_graph_cannot_open_keeps_its_old_graph() {
    require_fuse!();
    let s = Setup::start(Change::Elsewhere);
    let m = s.mnt().to_path_buf();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.join("only-on-brick0"))
        .expect("create");
    f.write_all_at(b"one", 0).expect("write");
    let (first, _) = s.graphs();
    s.switch();
    assert!(
        !m.join("only-on-brick0").exists(),
        "the new graph does not have it"
    );
    f.write_all_at(b"two", 3).expect("write after the switch");
    f.sync_all().expect("fsync after the switch");
    drop_pages(&f);
    let mut back = vec![0u8; 6];
    f.read_exact_at(&mut back, 0)
        .expect("read after the switch");
    assert_eq!(&back, b"onetwo");
    assert_eq!(f.metadata().expect("fstat").len(), 6);
    assert_eq!(s.graphs().1, format!("{first} (1 fds)"));
    let log = s.mount.log_text();
    assert_eq!(
        log.matches("could not move").count(),
        1,
        "one attempt, then the fd stays:\n{log}"
    );
    assert!(log.contains("ENOENT") || log.contains("ESTALE"), "{log}");
    drop(f);
    s.wait_older("none");
    let brick0 = s.dir.path().join("brick0").join("only-on-brick0");
    assert_eq!(fs::read(&brick0).expect("on brick 0"), b"onetwo");
}

/// `passthrough: ... answered so far: N passing through` of the statedump.
fn passing_through(dump: &str) -> u64 {
    let at = dump
        .find("answered so far: ")
        .unwrap_or_else(|| panic!("no passthrough line:\n{dump}"));
    dump[at + "answered so far: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("passthrough count:\n{dump}"))
}

/// A passthrough open (the kernel reads the brick's file itself) needs nothing at a switch:
/// reads after it return the data (also what another fd writes after the switch), fstat and
/// close work, and the old graph drops once it is closed.
#[test]
fn a_passthrough_reader_keeps_reading_across_a_switch() {
    require_fuse!();
    let s = Setup::start_with(Change::Stats, &["--passthrough"]);
    if !s.mount.log_text().contains("FUSE passthrough on") {
        println!("SKIPPED: the kernel does not offer FUSE passthrough");
        return;
    }
    let m = s.mnt().to_path_buf();
    let data = pattern(1 << 20, 77);
    fs::write(m.join("pt"), &data).expect("write");
    let r = File::open(m.join("pt")).expect("open for reading");
    let mut head = vec![0u8; 4096];
    r.read_exact_at(&mut head, 0).expect("read before");
    assert_eq!(head, data[..4096]);
    assert!(
        passing_through(&s.statedump()) >= 1,
        "the reader passes through (the brick is on this machine, over its Unix socket):\n{}",
        s.statedump()
    );
    let (first, _) = s.graphs();
    s.switch();
    let mut all = vec![0u8; data.len()];
    r.read_exact_at(&mut all, 0).expect("read after the switch");
    assert!(
        all == data,
        "the passthrough reader's data after the switch"
    );
    // A write through a new fd (new graph) is seen by the passthrough reader: one file.
    let w = OpenOptions::new()
        .write(true)
        .open(m.join("pt"))
        .expect("open for writing");
    w.write_all_at(b"NEW", 100).expect("write after the switch");
    drop(w);
    let mut three = [0u8; 3];
    r.read_exact_at(&mut three, 100)
        .expect("read the new bytes");
    assert_eq!(&three, b"NEW");
    assert_eq!(r.metadata().expect("fstat").len(), data.len() as u64);
    drop(r);
    s.wait_older("none");
    assert_ne!(first, s.graphs().0);
}
