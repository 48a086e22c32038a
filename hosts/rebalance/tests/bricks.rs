//! The binary's production path: `--server HOST:PORT --volume VOL` against a volume of two
//! real bricks (`xlfs volume create` + `start`: one xlfsd each), whose client graph puts
//! write-behind, read-ahead and io-stats above cluster/distribute (the virtual xattrs must
//! pass them, uncached). The files are written through a client graph that knows only brick
//! 0 (every file and directory there, one-child layouts); the rebalance must fix the layouts
//! over both bricks (making the missing directory copies), move the files whose names hash
//! to brick 1 there, and leave every file readable with its bytes; a second run moves
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, Loc, Subvol};
use xlfs_core::registry::Registry;
use xlfs_core::volfile::Volfile;
use xlfs_core::volume::Volume;
use xlfs_rebalance::status::{self, State};
// protocol/client, built in for this test's own graphs.
use xlfs_protocol as _;

const BIN: &str = env!("CARGO_BIN_EXE_xlfs-rebalance");

/// `target/debug/<name>` (next to this crate's binary).
fn sibling(name: &str) -> PathBuf {
    Path::new(BIN).with_file_name(name)
}

/// A volume made and started by the CLI in a private state directory; stopped on drop.
struct Vol {
    state: PathBuf,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Vol {
    fn xlfs(&self, args: &[&str]) -> Output {
        Command::new(sibling("xlfs"))
            .args(args)
            .env("XLFS_STATE_DIR", &self.state)
            .stdin(Stdio::null())
            .output()
            .expect("run xlfs (cargo build --workspace first)")
    }
    fn ok(&self, args: &[&str]) {
        let o = self.xlfs(args);
        assert!(
            o.status.success(),
            "xlfs {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    fn pids(&self) -> Vec<u32> {
        let o = self.xlfs(&["volume", "status", "dv", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        v["bricks"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter_map(|b| b["pid"].as_u64())
                    .map(|p| p as u32)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Vol {
    fn drop(&mut self) {
        let pids = self.pids();
        let _ = self.xlfs(&["volume", "stop", "dv"]);
        for pid in pids {
            // SAFETY: kill(2) with the pid of a brick this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

static NEXT_FD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        gfid,
        flags,
    }
}

fn graph(text: &str) -> Volume {
    let vf = Volfile::parse(text, "test client volfile").expect("volfile");
    let v = Volume::new(vf, Arc::new(Registry::new())).expect("graph");
    let silent = v.graph().wait_ready(Duration::from_secs(10));
    assert!(silent.is_empty(), "not up: {silent:?}");
    v
}

fn data_of(d: usize, k: usize) -> Vec<u8> {
    (0..(k * 131 + d * 17) % 20000 + 1)
        .map(|b| ((b * 3) ^ k) as u8)
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

fn rebalance(v: &Vol, status: &Path) -> (i32, String) {
    let o = Command::new(BIN)
        .args([
            "--server",
            &format!("127.0.0.1:{}", v.port),
            "--volume",
            "dv",
        ])
        .args(["--status", status.to_str().expect("utf8")])
        // The volume's secret, which `xlfs volume create` made and its bricks require.
        .arg("--secret-file")
        .arg(v.state.join("volumes/dv/secret"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run xlfs-rebalance");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn rebalance_through_a_fetched_client_graph_over_two_xlfsd_bricks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let port = xlfs_testkit::ports::free_ports(2);
    let v = Vol {
        state: root.join("state"),
        _dir: dir,
        port,
    };
    let (b0, b1) = (root.join("b0"), root.join("b1"));
    v.ok(&[
        "volume",
        "create",
        "dv",
        b0.to_str().expect("utf8"),
        b1.to_str().expect("utf8"),
        "--port",
        &port.to_string(),
    ]);
    v.ok(&["volume", "start", "dv"]);
    let client =
        std::fs::read_to_string(v.state.join("volumes/dv/client.vol")).expect("client.vol");
    // The same graph over brick 0 only.
    let two = r#"subvolumes: ["dv-client-0", "dv-client-1"]"#;
    assert!(client.contains(two), "{client}");
    let start = client.find(r#"name: "dv-client-1""#).expect("client 1");
    let open = client[..start].rfind('(').expect("(");
    let close = open + client[open..].find("),").expect("),") + 2;
    let one = format!(
        "{}{}",
        &client[..open],
        &client[close..].replace(two, r#"subvolumes: ["dv-client-0"]"#)
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    xlfs_core::services::set_fallback_runtime(rt.handle().clone());
    let mut files = Vec::new();
    {
        let _g = rt.enter();
        let vol = graph(&one);
        let top = vol.graph().top().clone();
        rt.block_on(async {
            let cx = Ctx::root();
            for d in 0..4 {
                let dg = top
                    .mkdir(&cx, Loc::new(Gfid::ROOT, format!("d{d}")), 0o755, 0)
                    .await
                    .expect("mkdir")
                    .attr
                    .gfid;
                for k in 0..50 {
                    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
                    let e = top
                        .create(&cx, Loc::new(dg, format!("f{k}")), f, 0o644, 0)
                        .await
                        .expect("create");
                    let f = Fd {
                        gfid: e.attr.gfid,
                        ..f
                    };
                    top.writev(&cx, f, 0, Buf::from_vec(data_of(d, k)), 0)
                        .await
                        .expect("write");
                    top.flush(&cx, f).await.expect("flush");
                    top.release(&cx, f).await.expect("release");
                    files.push((d, k, e.attr.gfid));
                }
            }
        });
    }
    assert!(b0.join("d3/f49").exists(), "the bricks keep files by path");
    assert!(!b1.join("d0").exists());

    let status_path = root.join("rebalance.json");
    let (code, log) = rebalance(&v, &status_path);
    assert_eq!(code, 0, "{log}");
    let end = status::load(&status_path).expect("load").expect("status");
    assert_eq!(end.state, State::Completed, "{log}");
    assert_eq!((end.failures, end.files_skipped), (0, 0), "{log}");
    assert_eq!((end.files_scanned, end.dirs_done), (200, 5), "{end:?}");
    assert!(end.files_moved > 20, "{end:?}");
    assert!(
        end.topology
            .as_deref()
            .is_some_and(|t| t.contains("dv-client-1"))
    );
    println!(
        "over two xlfsd bricks: {} moved of {}, {} bytes, {:.1} files/s, {:.3} MB/s",
        end.files_moved,
        end.files_scanned,
        end.bytes_moved,
        end.rate_files_per_s,
        end.rate_bytes_per_s / 1e6
    );
    // Moved files are on brick 1 only (the directories were made there).
    let mut on1 = 0;
    for (d, k, _) in &files {
        let (p0, p1) = (b0.join(format!("d{d}/f{k}")), b1.join(format!("d{d}/f{k}")));
        let data = |p: &Path| std::fs::read(p).ok();
        match (data(&p0), data(&p1)) {
            (Some(x), None) => assert_eq!(x, data_of(*d, *k)),
            (None, Some(x)) => {
                assert_eq!(x, data_of(*d, *k));
                on1 += 1;
            }
            other => panic!(
                "d{d}/f{k} on the bricks: {:?}",
                (other.0.is_some(), other.1.is_some())
            ),
        }
    }
    assert_eq!(on1, end.files_moved, "every move went to the new brick");

    // Through the whole volume: every file with its bytes.
    {
        let _g = rt.enter();
        let vol = graph(&client);
        let top = vol.graph().top().clone();
        rt.block_on(async {
            for (d, k, g) in &files {
                assert_eq!(read_all(&top, *g).await, data_of(*d, *k), "d{d}/f{k}");
            }
        });
    }
    // Again: nothing to move.
    let (code, log) = rebalance(&v, &status_path);
    assert_eq!(code, 0, "{log}");
    let end = status::load(&status_path).expect("load").expect("status");
    assert_eq!(
        (end.state, end.files_moved, end.files_scanned),
        (State::Completed, 0, 200)
    );
    drop(v);
}
