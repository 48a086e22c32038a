//! Moving files between bricks while another client writes them, over real bricks: a
//! distribute 2 volume made by the `xlfs` CLI and served by two xlfsd processes (each with
//! features/locks, which holds the barrier), and two client graphs built in this process from
//! the volume's client volfile, as two mounts would be: a writer and a mover (the rebalance
//! runner's role), each its own client of the bricks.
//!
//! Brick 1 is decommissioned (`cluster.distribute.decommissioned`), so every file on it must
//! move to brick 0. While the mover moves them one by one through the `xlfs.dht.migrate`
//! virtual xattr, the writer keeps writing records through fds it opened before the moves.
//! Afterwards: every record is in every file (read through the writer's old fds and through a
//! fresh open), brick 1 holds no file and no link file, and brick 0 holds each file once.
//!
//! Needs root and the binaries of `cargo build --workspace`; without root it says why and
//! passes, unless XLFS_E2E_REQUIRE=1 makes that a failure. Bricks are stopped even when it
//! fails.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::cli::profile_dir;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_core::graph::Graph;
use xlfs_core::registry::Registry;
use xlfs_core::source::Source;
use xlfs_core::volume::Volume;
// Linked in for its built-in type protocol/client, as the hosts do.
use xlfs_protocol as _;

struct Bricks {
    state: PathBuf,
    root: PathBuf,
}

impl Bricks {
    fn xlfs(&self, args: &[&str]) -> Output {
        common::cli::xlfs(&self.state, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        common::cli::xlfs_ok(&self.state, args)
    }

    fn brick(&self, i: usize) -> PathBuf {
        self.root.join(format!("b{i}"))
    }
}

impl Drop for Bricks {
    fn drop(&mut self) {
        let _ = self.xlfs(&["volume", "stop", "mv2"]);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A client graph of the volume, as a mount would build it.
fn client(volfile: &Path) -> Arc<Volume> {
    let vf = Source::File(volfile.to_path_buf())
        .load()
        .expect("client volfile");
    let reg = Registry::with_search_path(vec![profile_dir()], true);
    let v = Arc::new(Volume::new(vf, Arc::new(reg)).expect("client graph"));
    let silent = v.graph().wait_ready(std::time::Duration::from_secs(10));
    assert!(silent.is_empty(), "not up: {silent:?}");
    v
}

fn top(v: &Volume) -> (Arc<Graph>, Subvol) {
    let g = v.graph();
    let t = g.top().clone();
    (g, t)
}

fn fd(gfid: Gfid, flags: i32) -> Fd {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);
    Fd {
        id: FdId(NEXT.fetch_add(1, Ordering::Relaxed)),
        gfid,
        flags,
    }
}

/// The record a writer puts at slot `k` of file `f`.
fn record(f: usize, k: usize) -> Vec<u8> {
    debug_assert!(f < 1000 && k < 1_000_000);
    format!("file {f:03} record {k:06}\n").into_bytes()
}

/// The length of every record.
const REC: usize = 23;

async fn read_all(t: &Subvol, f: Fd) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let r = t
            .readv(&Ctx::root(), f, out.len() as u64, 1 << 20)
            .await
            .expect("read");
        if r.data.is_empty() {
            return out;
        }
        out.extend_from_slice(r.data.as_slice());
    }
}

/// Regular files under `dir` on a brick: (name, is a link file).
fn on_brick(dir: &Path) -> Vec<(String, bool)> {
    use std::os::unix::fs::PermissionsExt;
    let mut v: Vec<(String, bool)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| {
                    let mode = e.metadata().map(|m| m.permissions().mode() & 0o7777);
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        mode.is_ok_and(|m| m == 0o1000),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn files_move_off_a_decommissioned_brick_while_another_client_writes_them() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        if std::env::var("XLFS_E2E_REQUIRE").as_deref() == Ok("1") {
            panic!("cannot run: not root");
        }
        println!("SKIPPED: not root (bricks set trusted.* xattrs)");
        return;
    }
    let root = std::env::temp_dir().join(format!("xlfs-dht-move-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("mkdir");
    let b = Bricks {
        state: root.join("state"),
        root: root.clone(),
    };
    let (b0, b1) = (
        b.brick(0).to_string_lossy().into_owned(),
        b.brick(1).to_string_lossy().into_owned(),
    );
    b.ok(&["volume", "create", "mv2", &b0, &b1]);
    b.ok(&["volume", "start", "mv2"]);
    let volfile = b.state.join("volumes/mv2/client.vol");
    let text = std::fs::read_to_string(&volfile).expect("client.vol");
    let child1 = text
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("name: \"")
                .and_then(|r| r.strip_suffix("\","))
                .filter(|n| n.contains("client") && n.ends_with('1'))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no second client volume in {text}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let _enter = rt.enter();
    let writer = client(&volfile);
    let cx = Ctx::root();
    let files = 24;

    // Files over both bricks, each open for writing by the writer with one record.
    let (d, fds) = rt.block_on(async {
        let (_g, w) = top(&writer);
        let d = w
            .mkdir(&cx, Loc::new(Gfid::ROOT, "d"), 0o755, 0)
            .await
            .expect("mkdir")
            .attr
            .gfid;
        let mut fds = Vec::new();
        for f in 0..files {
            let name = format!("f{f:03}");
            let o = fd(Gfid::NULL, libc::O_RDWR);
            let e = w
                .create(&cx, Loc::new(d, name.as_str()), o, 0o640, 0)
                .await
                .expect("create");
            let o = Fd {
                gfid: e.attr.gfid,
                ..o
            };
            w.writev(&cx, o, 0, Buf::from_vec(record(f, 0)), 0)
                .await
                .expect("first record");
            fds.push((name, e.attr.gfid, o));
        }
        (d, fds)
    });
    let before = on_brick(&b.brick(1).join("d"));
    assert!(
        before.len() >= 4 && before.iter().all(|(_, link)| !link),
        "files on brick 1: {before:?}"
    );

    // Brick 1 leaves: the writer applies the option in place, as a mount does.
    b.ok(&[
        "volume",
        "set",
        "mv2",
        "cluster.distribute.decommissioned",
        &child1,
    ]);
    let vf = Source::File(volfile.clone()).load().expect("new volfile");
    writer.reload(vf).expect("reconfigured");
    let mover = client(&volfile);

    let stop = Arc::new(AtomicBool::new(false));
    let written = rt.block_on(async {
        // The writer: records through the fds opened before any move, all files in turn.
        let wtask = {
            let (g, w) = top(&writer);
            let stop = stop.clone();
            let fds = fds.clone();
            tokio::spawn(async move {
                let _g = g;
                let mut k = 1;
                loop {
                    for (f, (_, _, o)) in fds.iter().enumerate() {
                        w.writev(
                            &Ctx::root(),
                            *o,
                            (k * REC) as u64,
                            Buf::from_vec(record(f, k)),
                            0,
                        )
                        .await
                        .unwrap_or_else(|e| panic!("record {k} of file {f}: {e}"));
                    }
                    k += 1;
                    if stop.load(Ordering::Relaxed) && k > 40 {
                        return k;
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        // The mover, as the rebalance runner: list, fix layouts, move each file.
        let (_mg, m) = top(&mover);
        let dir_fd = fd(Gfid::ROOT, libc::O_RDONLY | libc::O_DIRECTORY);
        m.opendir(&cx, dir_fd).await.expect("opendir");
        let _ = m.readdirp(&cx, dir_fd, 0, 65536).await.expect("list root");
        m.releasedir(&cx, dir_fd).await.expect("releasedir");
        for g in [Gfid::ROOT, d] {
            let r = m
                .getxattr(&cx, g, "xlfs.dht.fix-layout".into())
                .await
                .expect("fix-layout");
            assert!(
                matches!(r.as_slice(), b"fixed" | b"unchanged"),
                "{:?}",
                String::from_utf8_lossy(r.as_slice())
            );
        }
        let mut moved = 0;
        for (name, g, _) in &fds {
            let r = m
                .getxattr(&cx, *g, format!("xlfs.dht.migrate:{d}/{name}").into())
                .await
                .unwrap_or_else(|e| panic!("migrate {name}: {e}"));
            let ans = String::from_utf8_lossy(r.as_slice()).into_owned();
            assert!(
                ans == "in-place" || ans.starts_with("moved "),
                "{name}: {ans}"
            );
            if ans.starts_with("moved ") {
                moved += 1;
            }
        }
        assert_eq!(moved, before.len(), "every file of brick 1 moved");
        let r = m
            .getxattr(&cx, d, "xlfs.dht.commit-layout".into())
            .await
            .expect("commit-layout");
        assert_eq!(r.as_slice(), b"trusted");
        stop.store(true, Ordering::Relaxed);
        wtask.await.expect("writer")
    });

    // Every record, through the writer's old fds and through fresh opens by the mover.
    rt.block_on(async {
        let (_g, w) = top(&writer);
        let (_mg, m) = top(&mover);
        for (f, (name, g, o)) in fds.iter().enumerate() {
            let want: Vec<u8> = (0..written).flat_map(|k| record(f, k)).collect();
            let old = read_all(&w, *o).await;
            let bad: Vec<usize> = (0..written)
                .filter(|k| old.get(k * REC..(k + 1) * REC) != Some(&record(f, *k)[..]))
                .collect();
            assert!(
                old.len() == want.len() && bad.is_empty(),
                "{name} through the old fd: {} bytes, want {}; wrong records {bad:?}; first wrong: {:?}",
                old.len(),
                want.len(),
                bad.first().map(|k| String::from_utf8_lossy(&old[k * REC..(k + 1) * REC]).into_owned())
            );
            let e = m.lookup(&cx, Loc::new(d, name.as_str())).await.expect("lookup");
            assert_eq!(e.attr.gfid, *g);
            let n = fd(*g, libc::O_RDONLY);
            m.open(&cx, n).await.expect("open");
            let fresh = read_all(&m, n).await;
            m.release(&cx, n).await.expect("release");
            assert!(fresh == want, "{name} through a new open: {} bytes", fresh.len());
            w.release(&cx, *o).await.expect("release");
        }
    });
    let left = on_brick(&b.brick(1).join("d"));
    assert!(left.is_empty(), "brick 1 still holds {left:?}");
    let on0 = on_brick(&b.brick(0).join("d"));
    assert_eq!(on0.len(), files, "brick 0: {on0:?}");
    assert!(on0.iter().all(|(_, link)| !link), "no link file: {on0:?}");
    drop(writer);
    drop(mover);
}
