//! Model-based random test: seeded random sequences of writes (cached, O_SYNC, anonymous,
//! bursts of concurrent writes), reads, truncates, fsyncs, flushes and stats on a few files,
//! through write-behind over a jitter layer (replies delayed at random, so background writes
//! finish out of order) over the in-memory leaf, compared after every step with plain byte
//! vectors. At the end the leaf itself, read without write-behind, must hold the model.

mod common;

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, Loc, SetAttr, Subvol};
use xlfs_testkit::MemLeaf;

use common::{Jitter, Rng, wb_over};

const FILES: usize = 3;
const SPAN: u64 = 48 * 1024;

struct File {
    gfid: Gfid,
    fds: Vec<Fd>,
    model: Vec<u8>,
}

fn pattern(rng: &mut Rng, len: usize) -> Vec<u8> {
    let base = rng.next();
    (0..len)
        .map(|i| (base.wrapping_add(i as u64 * 31) >> 3) as u8)
        .collect()
}

fn apply(model: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(data);
}

fn configs(rng: &mut Rng) -> Vec<(&'static str, &'static str)> {
    let window = ["4KiB", "64KiB", "1MiB"][rng.below(3) as usize];
    let aggregate = ["4KiB", "16KiB", "128KiB"][rng.below(3) as usize];
    let on_off = |r: &mut Rng| if r.below(2) == 0 { "on" } else { "off" };
    vec![
        ("window-size", window),
        ("aggregate-size", aggregate),
        ("trickling-writes", on_off(rng)),
        ("flush-behind", on_off(rng)),
        ("strict-o-direct", on_off(rng)),
    ]
}

async fn read_all(sv: &Subvol, fd: Fd) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = sv
            .readv(&Ctx::root(), fd, out.len() as u64, 7000)
            .await
            .expect("readv")
            .data;
        if b.is_empty() {
            return out;
        }
        out.extend_from_slice(&b);
    }
}

async fn run(seed: u64, steps: usize) {
    let mut rng = Rng::new(seed);
    let config = configs(&mut rng);
    let leaf = MemLeaf::new();
    let wb = wb_over(&config, Jitter::over(leaf.clone(), seed, 200));
    let cx = Ctx::root();
    let mut files = Vec::new();
    for f in 0..FILES {
        let id = 100 * (f as u64 + 1);
        let fd = Fd {
            id: FdId(id),
            gfid: Gfid::NULL,
            flags: libc::O_RDWR | libc::O_CREAT,
        };
        let e = wb
            .create(&cx, Loc::new(Gfid::ROOT, format!("f{f}")), fd, 0o644, 0)
            .await;
        let gfid = e.expect("create").attr.gfid;
        let second = Fd {
            id: FdId(id + 1),
            gfid,
            flags: libc::O_RDWR,
        };
        let sync = Fd {
            id: FdId(id + 2),
            gfid,
            flags: libc::O_RDWR | libc::O_SYNC,
        };
        let direct = Fd {
            id: FdId(id + 3),
            gfid,
            flags: libc::O_RDWR | libc::O_DIRECT,
        };
        for extra in [second, sync, direct] {
            wb.open(&cx, extra).await.expect("open");
        }
        let fds = vec![
            Fd { gfid, ..fd },
            second,
            sync,
            direct,
            Fd::anonymous(gfid, libc::O_RDWR),
        ];
        files.push(File {
            gfid,
            fds,
            model: Vec::new(),
        });
    }
    let ctx =
        |step: usize, what: &str| format!("seed {seed} config {config:?} step {step}: {what}");

    for step in 0..steps {
        let f = rng.below(FILES as u64) as usize;
        let file = &mut files[f];
        let fd = file.fds[rng.below(file.fds.len() as u64) as usize];
        match rng.below(100) {
            0..=44 => {
                let offset = rng.below(SPAN);
                let max = if rng.below(4) == 0 { 20_000 } else { 3000 };
                let len = 1 + rng.below(max) as usize;
                let data = pattern(&mut rng, len);
                let n = wb
                    .writev(&cx, fd, offset, Buf::from_vec(data.clone()), 0)
                    .await;
                assert_eq!(
                    n.map(|r| r.written),
                    Ok(len as u64),
                    "{}",
                    ctx(step, "write")
                );
                apply(&mut file.model, offset, &data);
            }
            45..=54 => {
                // A burst of contiguous and overlapping writes in flight together; they take
                // effect in the order they are acknowledged.
                let mut burst = FuturesUnordered::new();
                let mut datas = Vec::new();
                let mut offset = rng.below(SPAN);
                for i in 0..(2 + rng.below(10)) as usize {
                    let len = 1 + rng.below(2000) as usize;
                    let data = pattern(&mut rng, len);
                    let fd = file.fds[rng.below(2) as usize];
                    datas.push((offset, data.clone()));
                    let wb = wb.clone();
                    let cx = cx.clone();
                    burst.push(async move {
                        (i, wb.writev(&cx, fd, offset, Buf::from_vec(data), 0).await)
                    });
                    offset = if rng.below(3) == 0 {
                        rng.below(SPAN)
                    } else {
                        offset + len as u64
                    };
                }
                while let Some((i, r)) = burst.next().await {
                    let (offset, data) = &datas[i];
                    assert_eq!(
                        r.map(|r| r.written),
                        Ok(data.len() as u64),
                        "{}",
                        ctx(step, "burst write")
                    );
                    apply(&mut file.model, *offset, data);
                }
            }
            55..=69 => {
                let offset = rng.below(SPAN + 4096);
                let size = 1 + rng.below(10_000) as u32;
                let got = wb.readv(&cx, fd, offset, size).await.expect("readv");
                let start = (offset as usize).min(file.model.len());
                let end = (offset as usize + size as usize).min(file.model.len());
                assert!(
                    got.data.as_slice() == &file.model[start..end],
                    "{}",
                    ctx(step, "readv")
                );
            }
            70..=75 => {
                let size = rng.below(SPAN);
                let attr = SetAttr {
                    size: ROption::RSome(size),
                    ..SetAttr::default()
                };
                let a = if rng.below(2) == 0 {
                    wb.setattr(&cx, file.gfid, attr).await
                } else {
                    wb.fsetattr(&cx, fd, attr).await
                };
                assert_eq!(a.expect("truncate").size, size, "{}", ctx(step, "truncate"));
                file.model.resize(size as usize, 0);
            }
            76..=81 => {
                let r = wb.fsync(&cx, fd, rng.below(2) == 0).await;
                assert_eq!(r, Ok(()), "{}", ctx(step, "fsync"));
            }
            82..=85 => {
                let r = wb.flush(&cx, file.fds[0]).await;
                assert_eq!(r, Ok(()), "{}", ctx(step, "flush"));
            }
            86..=92 => {
                let a = wb.fstat(&cx, fd).await.expect("fstat");
                assert_eq!(
                    a.size,
                    file.model.len() as u64,
                    "{}",
                    ctx(step, "fstat size")
                );
            }
            _ => {
                let a = wb.stat(&cx, file.gfid).await.expect("stat");
                assert_eq!(
                    a.size,
                    file.model.len() as u64,
                    "{}",
                    ctx(step, "stat size")
                );
            }
        }
        // After every step: one file, observed through write-behind, matches its model.
        let check = &files[rng.below(FILES as u64) as usize];
        if rng.below(2) == 0 {
            let all = read_all(&wb, check.fds[1]).await;
            assert!(all == check.model, "{}", ctx(step, "content check"));
        } else {
            let size = wb.stat(&cx, check.gfid).await.expect("stat").size;
            assert_eq!(
                size,
                check.model.len() as u64,
                "{}",
                ctx(step, "size check")
            );
        }
    }

    // Close everything; then the leaf alone must hold the model.
    for file in &files {
        for fd in file.fds.iter().filter(|fd| !fd.is_anonymous()) {
            assert_eq!(wb.flush(&cx, *fd).await, Ok(()), "seed {seed}: final flush");
            assert_eq!(wb.release(&cx, *fd).await, Ok(()), "seed {seed}: release");
        }
    }
    for file in &files {
        let mut on_leaf = Vec::new();
        for _ in 0..500 {
            let fd = Fd::anonymous(file.gfid, libc::O_RDONLY);
            on_leaf = read_all(&leaf, fd).await;
            if on_leaf == file.model {
                break;
            }
            // Flush-behind: the last deferred flushes may still be on their way.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(
            on_leaf == file.model,
            "seed {seed}: the leaf differs from the model"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_fop_sequences_match_a_plain_model() {
    let seeds: u64 = std::env::var("WB_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let first: u64 = std::env::var("WB_MODEL_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for seed in first..first + seeds {
        let done = tokio::time::timeout(Duration::from_secs(60), run(seed, 250)).await;
        assert!(done.is_ok(), "seed {seed} hung");
    }
}
