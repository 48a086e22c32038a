//! Test support: building write-behind over a mock or the in-memory leaf (options and
//! instances come from `xlfs_testkit::build`), a mock scripted to succeed, a jitter
//! translator that delays replies at random, and small helpers.
#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{
    Buf, Ctx, Entry, Errno, Fd, Fop, Gfid, HostServices, Iatt, Init, ReadReply, Subvol, Translator,
    WriteReply,
};
use xlfs_testkit::build::build;
use xlfs_testkit::fixtures::fd;
use xlfs_testkit::mock::{FopCall, FopReply, MockChild, MockHandle};
use xlfs_write_behind::WriteBehind;

/// write-behind with options `set` over `child`.
pub fn wb_over(set: &[(&str, &str)], child: Subvol) -> Subvol {
    build::<WriteBehind>(set, vec![child])
}

/// write-behind over a mock that answers every fop used here with success.
pub fn wb_mock(set: &[(&str, &str)]) -> (Subvol, MockHandle) {
    let (child, h) = MockChild::new();
    script_success(&h);
    (wb_over(set, child), h)
}

/// A file attribute with `gfid` and `size`.
pub fn attr(gfid: Gfid, size: u64) -> Iatt {
    Iatt {
        gfid,
        size,
        nlink: 1,
        ..Iatt::default()
    }
}

/// Handlers answering success: writev writes everything, readv returns 4 zero bytes, stat-like
/// fops return a 42-byte file, everything else `Ok`.
pub fn script_success(h: &MockHandle) {
    h.on(Fop::Writev, |c| match c {
        FopCall::Writev { data, .. } => {
            FopReply::Writev(Ok(WriteReply::written(data.len() as u64)))
        }
        _ => FopReply::Writev(Err(Errno::EINVAL)),
    });
    h.on(Fop::Readv, |_| {
        FopReply::Readv(Ok(ReadReply::data(Buf::zeroed(4))))
    });
    h.on(Fop::Seek, |_| FopReply::Seek(Ok(0)));
    h.on(Fop::Stat, |c| match c {
        FopCall::Stat { gfid } => FopReply::Stat(Ok(attr(*gfid, 42))),
        _ => FopReply::Stat(Err(Errno::EINVAL)),
    });
    h.on(Fop::Fstat, |c| match c {
        FopCall::Fstat { fd } => FopReply::Fstat(Ok(attr(fd.gfid, 42))),
        _ => FopReply::Fstat(Err(Errno::EINVAL)),
    });
    h.on(Fop::Setattr, |_| FopReply::Setattr(Ok(Iatt::default())));
    h.on(Fop::Fsetattr, |_| FopReply::Fsetattr(Ok(Iatt::default())));
    h.on(Fop::Link, |_| FopReply::Link(Ok(Entry::default())));
    h.on(Fop::Lookup, |_| FopReply::Lookup(Ok(Entry::default())));
    h.on(Fop::Create, |_| FopReply::Create(Ok(Entry::default())));
    h.on(Fop::Readdirp, |_| FopReply::Readdirp(Ok(RVec::new())));
    h.on(Fop::Lk, |c| match c {
        FopCall::Lk { lock, .. } => FopReply::Lk(Ok(*lock)),
        _ => FopReply::Lk(Err(Errno::EINVAL)),
    });
    h.on(Fop::Open, |_| {
        FopReply::Open(Ok(xlator_api::Opened::plain()))
    });
    h.on(Fop::Flush, |_| FopReply::Flush(Ok(())));
    h.on(Fop::Fsync, |_| FopReply::Fsync(Ok(())));
    h.on(Fop::Release, |_| FopReply::Release(Ok(())));
    h.on(Fop::Rename, |_| FopReply::Rename(Ok(())));
    h.on(Fop::Unlink, |_| FopReply::Unlink(Ok(Default::default())));
    h.on(Fop::Fallocate, |_| FopReply::Fallocate(Ok(())));
    h.on(Fop::Discard, |_| FopReply::Discard(Ok(())));
    h.on(Fop::Zerofill, |_| FopReply::Zerofill(Ok(())));
}

pub const FILE: Gfid = Gfid([0xaa; 16]);
pub const OTHER: Gfid = Gfid([0xbb; 16]);

/// An fd on `gfid` opened with `flags`.
pub fn fd_on(gfid: Gfid, id: u64, flags: i32) -> Fd {
    fd(id, gfid, flags)
}

/// A read-write fd on [`FILE`].
pub fn rw() -> Fd {
    fd_on(FILE, 1, libc::O_RDWR)
}

pub fn cx() -> Ctx {
    Ctx::root()
}

/// `n` bytes of `fill`.
pub fn bytes(n: usize, fill: u8) -> Buf {
    Buf::from_vec(vec![fill; n])
}

/// Lets spawned tasks and background writes run for a moment.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(30)).await;
}

/// Panics unless `fut` completes within 5 s.
pub async fn soon<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not complete"))
}

/// Whether `fut` is still pending after a moment (then it is dropped).
pub async fn stays_pending<T>(fut: impl Future<Output = T>) -> bool {
    tokio::time::timeout(Duration::from_millis(50), fut)
        .await
        .is_err()
}

/// Data written by the mock's writev calls, as (offset, length).
pub fn writes(h: &MockHandle) -> Vec<(u64, usize)> {
    h.calls_of(Fop::Writev)
        .into_iter()
        .filter_map(|c| match c {
            FopCall::Writev { offset, data, .. } => Some((offset, data.len())),
            _ => None,
        })
        .collect()
}

/// A translator delaying `writev`, `readv` and `fstat` replies by a random 0–`max_us` µs
/// (a seeded xorshift), so background writes finish out of order.
pub struct Jitter {
    children: Vec<Subvol>,
    services: HostServices,
    state: AtomicU64,
    max_us: u64,
}

xlator_api::options! {
    /// Options of the jitter layer.
    pub struct JitterOptions {
        /// Seed of the delays.
        pub seed: u64 = OptionSpec::int("seed", "1"),
        /// Longest delay, in microseconds.
        pub max_us: u64 = OptionSpec::int("max-us", "300"),
    }
}

impl Jitter {
    /// A jitter layer over `child`, seeded with `seed`, delaying up to `max_us`.
    pub fn over(child: Subvol, seed: u64, max_us: u64) -> Subvol {
        let (seed, max_us) = (seed.to_string(), max_us.to_string());
        build::<Jitter>(&[("seed", &seed), ("max-us", &max_us)], vec![child])
    }

    async fn pause(&self) {
        let mut x = self.state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.store(x, Ordering::Relaxed);
        // Timers tick in milliseconds: sleep one time in four, otherwise just yield.
        let us = x % (self.max_us + 1);
        if us.is_multiple_of(4) {
            self.services.sleep(Duration::from_micros(us)).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

impl Translator for Jitter {
    const TYPE: &'static str = "test/jitter";
    type Options = JitterOptions;

    fn init(init: Init<JitterOptions>) -> Result<Self, String> {
        Ok(Jitter {
            children: init.children,
            services: init.services,
            state: AtomicU64::new(init.options.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            max_us: init.options.max_us,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    async fn writev(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        self.pause().await;
        let r = self.children[0].writev(cx, fd, offset, data, flags).await;
        self.pause().await;
        r
    }

    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        self.pause().await;
        self.children[0].readv(cx, fd, offset, size).await
    }

    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.pause().await;
        self.children[0].fstat(cx, fd).await
    }
}

/// A tiny deterministic RNG for the model tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
