//! The measurement behind the `block-size` default (run with `--ignored --nocapture`): a
//! sequential reader and writer over stripe 4, each child a brick modelled as one serial
//! device (`LATENCY` per request plus `BANDWIDTH`), for several unit sizes; reads by 1 MiB
//! requests (a `dd bs=1M` with FUSE's 1 MiB max_read), by 128 KiB requests with and
//! without performance/read-ahead above (defaults: 4 pages of 128 KiB).

use std::sync::Arc;
use std::time::{Duration, Instant};

use xlator_api::{Buf, Ctx, Errno, Fd, Init, ReadReply, Subvol, Translator, WriteReply};
use xlfs_read_ahead::ReadAhead;
use xlfs_stripe::Stripe;
use xlfs_testkit::{MemLeaf, MockCluster};

const LATENCY: Duration = Duration::from_micros(200);
const BANDWIDTH: f64 = 1e9;
const FILE: u64 = 32 << 20;

/// A brick: requests one at a time, each `LATENCY` plus its bytes at `BANDWIDTH`.
struct Brick {
    children: Vec<Subvol>,
    device: Arc<tokio::sync::Mutex<()>>,
}

impl Brick {
    async fn busy(&self, bytes: usize) {
        let _one_at_a_time = self.device.lock().await;
        tokio::time::sleep(LATENCY + Duration::from_secs_f64(bytes as f64 / BANDWIDTH)).await;
    }
}

impl Translator for Brick {
    const TYPE: &'static str = "test/brick";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Brick {
            children: init.children,
            device: Arc::default(),
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn readv(&self, cx: &Ctx, fd: Fd, off: u64, size: u32) -> Result<ReadReply, Errno> {
        self.busy(size as usize).await;
        self.children[0].readv(cx, fd, off, size).await
    }
    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        off: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.busy(data.len()).await;
        self.children[0].writev(cx, fd, off, data, flags).await
    }
}

fn mbps(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e6
}

async fn one(block: &str) -> [f64; 4] {
    let bricks = (0..4)
        .map(|_| xlfs_testkit::build::build::<Brick>(&[], vec![MemLeaf::new()]))
        .collect();
    let cluster = MockCluster::with_leaves(bricks);
    let top = cluster.build::<Stripe>(&[("block-size", block)]);
    let cx = Ctx::root();
    let loc = xlator_api::Loc::new(xlator_api::Gfid::ROOT, "f");
    let e = top
        .create(
            &cx,
            loc,
            Fd {
                id: xlator_api::FdId(1),
                gfid: xlator_api::Gfid::NULL,
                flags: libc::O_RDWR,
            },
            0o644,
            0,
        )
        .await
        .expect("create");
    let fd = Fd {
        id: xlator_api::FdId(1),
        gfid: e.attr.gfid,
        flags: libc::O_RDWR,
    };
    let chunk = Buf::from_vec(vec![1u8; 1 << 20]);
    let t = Instant::now();
    for off in (0..FILE).step_by(1 << 20) {
        top.writev(&cx, fd, off, chunk.clone(), 0)
            .await
            .expect("write");
    }
    let w = mbps(FILE, t.elapsed());
    let read_all = |top: Subvol, id: u64, req: u32| async move {
        let fd = Fd {
            id: xlator_api::FdId(id),
            ..fd
        };
        top.open(&Ctx::root(), fd).await.expect("open");
        let t = Instant::now();
        let mut off = 0;
        while off < FILE {
            let r = top.readv(&Ctx::root(), fd, off, req).await.expect("read");
            assert!(!r.data.is_empty());
            off += r.data.len() as u64;
        }
        mbps(FILE, t.elapsed())
    };
    let r1m = read_all(top.clone(), 2, 1 << 20).await;
    let r128 = read_all(top.clone(), 3, 128 << 10).await;
    let ra = xlfs_testkit::build::build::<ReadAhead>(&[], vec![top.clone()]);
    let r128ra = read_all(ra, 4, 128 << 10).await;
    [w, r1m, r128, r128ra]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
async fn measure_block_sizes() {
    println!("stripe 4, brick = {LATENCY:?} + 1 GB/s serial; MB/s");
    println!("| block-size | write 1M | read 1M | read 128K | read 128K + read-ahead |");
    for block in ["64KiB", "128KiB", "256KiB", "1MiB"] {
        let [w, r1, r128, ra] = one(block).await;
        println!("| {block} | {w:.0} | {r1:.0} | {r128:.0} | {ra:.0} |");
    }
}
