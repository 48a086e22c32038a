//! The binary over real bricks (storage/posix directories, features/locks on each for the
//! migration barrier): a distribute 2 volume filled
//! with 3,000 files in 30 directories gets a third brick; `xlfs-rebalance` is stopped with
//! SIGTERM mid-run (exit 0, state stopped), started again and killed with SIGKILL halfway
//! (state running, a dead pid), started again (it resumes and completes), and
//! then every file is readable with its bytes, on the brick its name hashes to, with no link
//! file left. Prints the rate the run reported.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xlator_api::{Buf, Ctx, Errno, Fd, FdId, Gfid, Loc, Subvol, XattrReq};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_core::volume::Volume;
use xlfs_dht::{LAYOUT_XATTR, LINKTO_XATTR, Layout, Slice};
use xlfs_rebalance::status::{self, State};
// Built in, so this test's graphs need no plugin path.
use xlfs_dht as _;
use xlfs_locks as _;
use xlfs_posix as _;

const BIN: &str = env!("CARGO_BIN_EXE_xlfs-rebalance");
const DIRS: usize = 30;
const FILES: usize = 100;

static NEXT_FD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        gfid,
        flags,
    }
}

fn volfile(root: &Path, bricks: usize) -> String {
    let mut v = String::from("(volumes: [\n");
    for i in 0..bricks {
        let d = root.join(format!("b{i}"));
        std::fs::create_dir_all(&d).expect("brick dir");
        // features/locks over each brick, as volgen builds them: the migration barrier.
        v.push_str(&format!(
            "(name: \"v-{i}-posix\", type: \"storage/posix\", options: {{\"directory\": \"{}\"}}),\n\
             (name: \"v-{i}\", type: \"features/locks\", subvolumes: [\"v-{i}-posix\"]),\n",
            d.display()
        ));
    }
    let kids: Vec<String> = (0..bricks).map(|i| format!("\"v-{i}\"")).collect();
    v.push_str(&format!(
        "(name: \"v-dht\", type: \"cluster/distribute\", subvolumes: [{}], options: {{\"min-free-disk\": \"0\"}}),\n])\n",
        kids.join(", ")
    ));
    v
}

fn volume(text: &str) -> Volume {
    let vf = Volfile::parse(text, "test").expect("volfile");
    let v = Volume::new(vf, Arc::new(Registry::new())).expect("graph");
    let silent = v.graph().wait_ready(Duration::from_secs(10));
    assert!(silent.is_empty(), "{silent:?}");
    v
}

fn data_of(d: usize, k: usize) -> Vec<u8> {
    (0..(k * 41 + d * 7) % 3000 + 1)
        .map(|b| (b ^ k ^ d) as u8)
        .collect()
}

async fn read_all(top: &Subvol, gfid: Gfid) -> Vec<u8> {
    let cx = Ctx::root();
    let f = fd(gfid, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    let mut out = Vec::new();
    loop {
        let r = top
            .readv(&cx, f, out.len() as u64, 1 << 16)
            .await
            .expect("read");
        if r.data.is_empty() {
            break;
        }
        out.extend_from_slice(&r.data);
    }
    top.release(&cx, f).await.expect("release");
    out
}

/// None: no such name; Some(true): a link file; Some(false): the data.
async fn held(brick: &Subvol, parent: Gfid, name: &str) -> Option<bool> {
    let req = XattrReq {
        names: vec![LINKTO_XATTR.into()],
        prefixes: vec![],
    };
    let cx = Ctx::builder(0, 0).ext(&req).build();
    match brick.lookup(&cx, Loc::new(parent, name)).await {
        Err(Errno::ENOENT) => None,
        Err(e) => panic!("lookup {name}: {e}"),
        Ok(e) => Some(e.xattr(LINKTO_XATTR).is_some()),
    }
}

async fn dir_names(brick: &Subvol, dir: Gfid) -> Vec<String> {
    let cx = Ctx::root();
    let f = fd(dir, libc::O_RDONLY | libc::O_DIRECTORY);
    brick.opendir(&cx, f).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let page = brick
            .readdirp(&cx, f, off, 1 << 16)
            .await
            .expect("readdirp");
        let Some(last) = page.last() else { break };
        off = last.next_offset;
        out.extend(
            page.iter()
                .map(|e| e.name.to_string())
                .filter(|n| n != "." && n != ".."),
        );
    }
    brick.releasedir(&cx, f).await.expect("releasedir");
    out
}

/// Runs the binary; kills it on drop (a failing test leaves no process behind).
struct Runner(std::process::Child);

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(vol: &Path, status: &Path, log: &Path) -> Runner {
    let log = std::fs::File::create(log).expect("log");
    Runner(
        Command::new(BIN)
            .args(["--volfile", vol.to_str().expect("utf8")])
            .args(["--status", status.to_str().expect("utf8")])
            .args(["--parallel", "2"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn xlfs-rebalance"),
    )
}

fn wait(r: &mut Runner, limit: Duration) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(s) = r.0.try_wait().expect("wait") {
            return s.code().unwrap_or(-1);
        }
        assert!(
            t.elapsed() < limit,
            "xlfs-rebalance still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stopped_by_sigterm_resumed_and_completed_over_posix_bricks() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();

    // Fill a distribute 2 volume.
    let mut files: BTreeMap<(Gfid, String), Gfid> = BTreeMap::new();
    let mut dirs = vec![Gfid::ROOT];
    {
        let _g = rt.enter();
        let v2 = volume(&volfile(root, 2));
        let top = v2.graph().top().clone();
        rt.block_on(async {
            let cx = Ctx::root();
            for d in 0..DIRS {
                let dir = top
                    .mkdir(&cx, Loc::new(Gfid::ROOT, format!("d{d}")), 0o755, 0)
                    .await
                    .expect("mkdir")
                    .attr
                    .gfid;
                dirs.push(dir);
                for k in 0..FILES {
                    let name = format!("f{k}");
                    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
                    let e = top
                        .create(&cx, Loc::new(dir, name.as_str()), f, 0o644, 0)
                        .await
                        .expect("create");
                    let f = Fd {
                        gfid: e.attr.gfid,
                        ..f
                    };
                    top.writev(&cx, f, 0, Buf::from_vec(data_of(d, k)), 0)
                        .await
                        .expect("write");
                    top.release(&cx, f).await.expect("release");
                    files.insert((dir, name), e.attr.gfid);
                }
            }
        });
    }

    // add-brick: the volfile with a third brick; a run stopped by SIGTERM.
    let vol3 = root.join("v3.vol");
    std::fs::write(&vol3, volfile(root, 3)).expect("volfile");
    let status_path = root.join("rebalance.json");
    let mut r = start(&vol3, &status_path, &root.join("run1.log"));
    let t = Instant::now();
    loop {
        if let Ok(Some(s)) = status::load(&status_path)
            && s.state == State::Running
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no running status file"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(r.0.id() as i32, libc::SIGTERM) }, 0);
    let code = wait(&mut r, Duration::from_secs(30));
    let log1 = std::fs::read_to_string(root.join("run1.log")).expect("log");
    assert_eq!(code, 0, "{log1}");
    let stopped = status::load(&status_path).expect("load").expect("status");
    assert_eq!(stopped.state, State::Stopped, "{log1}");
    assert!(stopped.done_dirs.len() < DIRS + 1, "{stopped:?}");
    assert!(log1.contains("SIGTERM"), "{log1}");

    // Started again, then killed with SIGKILL halfway: the file says running, pid dead.
    let mut r = start(&vol3, &status_path, &root.join("run2.log"));
    let t = Instant::now();
    loop {
        if let Ok(Some(s)) = status::load(&status_path)
            && s.state == State::Running
            && s.files_scanned > stopped.files_scanned + 300
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no progress to kill");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = r.0.id();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    wait(&mut r, Duration::from_secs(10));
    let crashed = status::load(&status_path).expect("load").expect("status");
    assert_eq!((crashed.state, crashed.pid), (State::Running, pid));
    assert!(crashed.done_dirs.len() < DIRS + 1, "{crashed:?}");
    assert!(crashed.done_dirs.len() >= stopped.done_dirs.len());

    // Started again: resumes and completes.
    let mut r = start(&vol3, &status_path, &root.join("run3.log"));
    let code = wait(&mut r, Duration::from_secs(300));
    let log3 = std::fs::read_to_string(root.join("run3.log")).expect("log");
    assert_eq!(code, 0, "{log3}");
    assert!(log3.contains("resumed (it was Running)"), "{log3}");
    let end = status::load(&status_path).expect("load").expect("status");
    assert_eq!(end.state, State::Completed, "{log3}");
    assert_eq!((end.failures, end.files_skipped), (0, 0), "{end:?}");
    assert_eq!(end.done_dirs.len(), DIRS + 1);
    assert!(end.files_scanned >= (DIRS * FILES) as u64, "{end:?}");
    assert!(end.files_moved > 0 && end.bytes_moved > 0, "{end:?}");
    assert_eq!(end.started, stopped.started);
    println!(
        "rebalance over posix bricks (debug build, --parallel 2): {} files scanned, {} moved, \
         {} bytes; last run {:.1} files/s, {:.3} MB/s; stopped at {} files, {} dirs; killed at \
         {} files, {} dirs",
        end.files_scanned,
        end.files_moved,
        end.bytes_moved,
        end.rate_files_per_s,
        end.rate_bytes_per_s / 1e6,
        stopped.files_scanned,
        stopped.done_dirs.len(),
        crashed.files_scanned,
        crashed.done_dirs.len()
    );

    // Every file on its hashed brick with its bytes, no link file.
    let _g = rt.enter();
    let v3 = volume(&volfile(root, 3));
    let graph = v3.graph();
    let top = graph.top().clone();
    let bricks: Vec<Subvol> = (0..3)
        .map(|i| graph.get(&format!("v-{i}")).expect("brick").clone())
        .collect();
    rt.block_on(async {
        for ((dir, name), gfid) in &files {
            let mut slices = Vec::new();
            for b in &bricks {
                let v = b
                    .getxattr(&Ctx::root(), *dir, LAYOUT_XATTR.into())
                    .await
                    .ok();
                slices.push(v.and_then(|x| Slice::decode(x.as_slice())));
            }
            let layout = Layout::merge(&slices).expect("complete layout");
            let want = layout.hashed(name);
            for (i, b) in bricks.iter().enumerate() {
                let h = held(b, *dir, name).await;
                assert_eq!(
                    h,
                    (i == want).then_some(false),
                    "{name} on brick {i}, hashed {want}"
                );
            }
            let d = dirs.iter().position(|g| g == dir).expect("dir") - 1;
            let k: usize = name[1..].parse().expect("k");
            assert_eq!(read_all(&top, *gfid).await, data_of(d, k), "{name}");
        }
        for (i, b) in bricks.iter().enumerate() {
            for dir in &dirs {
                for n in dir_names(b, *dir).await {
                    if let Some(true) = held(b, *dir, &n).await {
                        panic!("link file {n} left on brick {i}");
                    }
                }
            }
        }
    });
}
