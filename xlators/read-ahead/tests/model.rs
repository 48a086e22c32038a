//! Model-based random test: read-ahead over io-cache over the in-memory leaf, as in a client
//! graph. Seeded random writes, reads (sequential runs and random), truncates, zero-fills,
//! hole punches, appends, reopens with O_TRUNC and anonymous-fd I/O, from several fds on two
//! files, each checked against a plain `Vec<u8>` per file; after every step the touched file
//! is read back whole through the stack and compared. Every so often, concurrent readers race
//! with a writer, and the file must match the model once they are done.

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Ctx, Fd, FdId, Gfid, Loc, SetAttr, Subvol};
use xlfs_io_cache::IoCache;
use xlfs_read_ahead::ReadAhead;
use xlfs_testkit::build::build;
use xlfs_testkit::memfs::MemLeaf;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// Between 1 and `max` random-ish bytes.
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = 1 + self.below(max) as usize;
        let tag = self.next() as u8;
        (0..n)
            .map(|i| tag.wrapping_add((i % 251) as u8) ^ 0x5a)
            .collect()
    }
}

struct OpenFd {
    fd: Fd,
    file: usize,
    /// End of this fd's last read, to continue sequential runs.
    next: u64,
}

struct World {
    top: Subvol,
    cx: Ctx,
    gfids: Vec<Gfid>,
    model: Vec<Vec<u8>>,
    fds: Vec<OpenFd>,
    next_id: u64,
    log: Vec<String>,
}

const MAX_OFFSET: u64 = 96 << 10;

impl World {
    async fn new(top: Subvol) -> World {
        let cx = Ctx::root();
        let mut w = World {
            top,
            cx,
            gfids: Vec::new(),
            model: Vec::new(),
            fds: Vec::new(),
            next_id: 100,
            log: Vec::new(),
        };
        for name in ["a", "b"] {
            let fd = w.new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
            let e = w
                .top
                .create(&w.cx, Loc::new(Gfid::ROOT, name), fd, 0o644, 0)
                .await
                .expect("create");
            w.gfids.push(e.attr.gfid);
            w.model.push(Vec::new());
            let file = w.gfids.len() - 1;
            w.fds.push(OpenFd {
                fd: Fd {
                    gfid: e.attr.gfid,
                    ..fd
                },
                file,
                next: 0,
            });
        }
        for file in [0, 0, 1, 1] {
            let flags = if file == 0 {
                libc::O_RDONLY
            } else {
                libc::O_RDWR
            };
            w.open(file, flags).await;
        }
        w
    }

    fn new_fd(&mut self, gfid: Gfid, flags: i32) -> Fd {
        self.next_id += 1;
        Fd {
            id: FdId(self.next_id),
            gfid,
            flags,
        }
    }

    async fn open(&mut self, file: usize, flags: i32) {
        let fd = self.new_fd(self.gfids[file], flags);
        self.top.open(&self.cx, fd).await.expect("open");
        if flags & libc::O_TRUNC != 0 {
            self.model[file].clear();
        }
        self.fds.push(OpenFd { fd, file, next: 0 });
    }

    fn fail(&self, what: String) -> ! {
        let tail: Vec<&String> = self.log.iter().rev().take(12).collect();
        panic!("{what}\nlast steps (newest first):\n  {tail:#?}");
    }

    async fn read_check(&mut self, slot: Option<usize>, fd: Fd, file: usize, off: u64, len: u32) {
        let got = match self.top.readv(&self.cx, fd, off, len).await {
            Ok(b) => b.data.to_vec(),
            Err(e) => self.fail(format!("readv {off}+{len} on {fd:?}: {e:?}")),
        };
        let m = &self.model[file];
        let start = (off as usize).min(m.len());
        let end = (off as usize + len as usize).min(m.len());
        if got != m[start..end] {
            let first = got
                .iter()
                .zip(&m[start..end])
                .position(|(a, b)| a != b)
                .map_or("length".to_owned(), |p| {
                    format!("byte {}", off as usize + p)
                });
            self.fail(format!(
                "readv {off}+{len} of file {file}: got {} bytes, model has {}; first difference at {first}",
                got.len(),
                end - start
            ));
        }
        if let Some(i) = slot {
            self.fds[i].next = off + got.len() as u64;
        }
    }

    /// Reads `file` whole through a random readable fd, sequentially, and compares.
    async fn check_file(&mut self, rng: &mut Rng, file: usize) {
        let readers: Vec<usize> = (0..self.fds.len())
            .filter(|i| self.fds[*i].file == file)
            .collect();
        let i = readers[rng.below(readers.len() as u64) as usize];
        let fd = self.fds[i].fd;
        let chunk = [1000u32, 4096, 5000, 16384][rng.below(4) as usize];
        let mut off = 0;
        let mut all = Vec::new();
        loop {
            match self.top.readv(&self.cx, fd, off, chunk).await {
                Ok(b) if b.data.is_empty() => break,
                Ok(b) => {
                    off += b.data.len() as u64;
                    all.extend_from_slice(&b.data);
                }
                Err(e) => self.fail(format!("check read at {off}: {e:?}")),
            }
        }
        if all != self.model[file] {
            let first = all.iter().zip(&self.model[file]).position(|(a, b)| a != b);
            self.fail(format!(
                "file {file} differs from the model after the step: {} bytes read, {} in the model, first difference at {first:?}",
                all.len(),
                self.model[file].len()
            ));
        }
        self.fds[i].next = off;
        let st = self.top.fstat(&self.cx, fd).await.expect("fstat");
        if st.size != self.model[file].len() as u64 {
            self.fail(format!(
                "fstat size {} != model {}",
                st.size,
                self.model[file].len()
            ));
        }
    }

    fn model_write(&mut self, file: usize, off: u64, data: &[u8]) {
        let m = &mut self.model[file];
        let end = off as usize + data.len();
        if m.len() < end {
            m.resize(end, 0);
        }
        m[off as usize..end].copy_from_slice(data);
    }

    /// One random step; returns the file it touched.
    async fn step(&mut self, rng: &mut Rng) -> usize {
        let i = rng.below(self.fds.len() as u64) as usize;
        let (fd, file) = (self.fds[i].fd, self.fds[i].file);
        let writable = fd.flags & libc::O_ACCMODE != libc::O_RDONLY;
        let size = self.model[file].len() as u64;
        let roll = rng.below(100);
        match roll {
            0..=29 if writable => {
                let append = rng.chance(10);
                let off = rng.below((size + 8192).min(MAX_OFFSET));
                let data = rng.bytes(12_000);
                let flags = if append { libc::O_APPEND } else { 0 };
                self.log.push(format!(
                    "write fd {} off {off} len {} append {append}",
                    fd.id.0,
                    data.len()
                ));
                let n = self
                    .top
                    .writev(&self.cx, fd, off, Buf::from_vec(data.clone()), flags)
                    .await;
                if n.map(|r| r.written) != Ok(data.len() as u64) {
                    self.fail(format!("writev: {n:?}"));
                }
                let at = if append { size } else { off };
                self.model_write(file, at, &data);
            }
            0..=54 => {
                let len = [512u32, 1000, 4096, 8192][rng.below(4) as usize];
                let off = self.fds[i].next;
                self.log
                    .push(format!("seq read fd {} off {off} len {len}", fd.id.0));
                self.read_check(Some(i), fd, file, off, len).await;
            }
            55..=69 => {
                let off = rng.below(size + 5000);
                let len = 1 + rng.below(20_000) as u32;
                self.log
                    .push(format!("read fd {} off {off} len {len}", fd.id.0));
                self.read_check(Some(i), fd, file, off, len).await;
            }
            70..=76 => {
                let new = rng.below(size + size / 2 + 100);
                let set = SetAttr {
                    size: ROption::RSome(new),
                    ..SetAttr::default()
                };
                let through_fd = writable && rng.chance(50);
                self.log
                    .push(format!("truncate to {new} (fd: {through_fd})"));
                let r = if through_fd {
                    self.top.fsetattr(&self.cx, fd, set).await
                } else {
                    self.top.setattr(&self.cx, self.gfids[file], set).await
                };
                if r.map(|a| a.size) != Ok(new) {
                    self.fail(format!("truncate: {r:?}"));
                }
                self.model[file].resize(new as usize, 0);
            }
            77..=84 if writable => {
                let off = rng.below(size + 4096);
                let len = 1 + rng.below(10_000);
                let zero = rng.chance(50);
                self.log.push(format!(
                    "{} {off}+{len}",
                    if zero { "zerofill" } else { "discard" }
                ));
                let r = if zero {
                    self.top.zerofill(&self.cx, fd, off, len).await
                } else {
                    self.top.discard(&self.cx, fd, off, len).await
                };
                if r.is_err() {
                    self.fail(format!("zerofill/discard: {r:?}"));
                }
                let end = if zero {
                    off + len
                } else {
                    (off + len).min(size)
                };
                if end > off {
                    let zeros = vec![0; (end - off) as usize];
                    self.model_write(file, off, &zeros);
                }
            }
            85..=91 => {
                self.log.push(format!("reopen fd {}", fd.id.0));
                self.top.release(&self.cx, fd).await.expect("release");
                self.fds.swap_remove(i);
                let flags = match rng.below(10) {
                    0 => libc::O_RDWR | libc::O_TRUNC,
                    1..=4 => libc::O_RDONLY,
                    _ => libc::O_RDWR,
                };
                self.open(file, flags).await;
            }
            _ => {
                let anon = Fd::anonymous(self.gfids[file], libc::O_RDWR);
                if rng.chance(50) {
                    let off = rng.below(size + 100);
                    let data = rng.bytes(3000);
                    self.log
                        .push(format!("anonymous write {off}+{}", data.len()));
                    let n = self
                        .top
                        .writev(&self.cx, anon, off, Buf::from_vec(data.clone()), 0)
                        .await;
                    if n.map(|r| r.written) != Ok(data.len() as u64) {
                        self.fail(format!("anonymous writev: {n:?}"));
                    }
                    self.model_write(file, off, &data);
                } else {
                    let off = rng.below(size + 100);
                    self.log.push(format!("anonymous read {off}+3000"));
                    self.read_check(None, anon, file, off, 3000).await;
                }
            }
        }
        file
    }

    /// Readers stream through file 1 while a writer rewrites parts of it; then compare.
    async fn race(&mut self, rng: &mut Rng) {
        let file = 1;
        let readers: Vec<Fd> = self
            .fds
            .iter()
            .filter(|f| f.file == file)
            .map(|f| f.fd)
            .collect();
        let writer = self.new_fd(self.gfids[file], libc::O_RDWR);
        self.top.open(&self.cx, writer).await.expect("open");
        let mut writes = Vec::new();
        for _ in 0..20 {
            let off = rng.below(MAX_OFFSET / 2);
            let data = rng.bytes(6000);
            writes.push((off, data));
        }
        let mut tasks = Vec::new();
        for fd in readers {
            let (top, cx) = (self.top.clone(), self.cx.clone());
            tasks.push(tokio::spawn(async move {
                let mut off = 0;
                for _ in 0..30 {
                    match top.readv(&cx, fd, off, 4096).await {
                        Ok(b) if b.data.is_empty() => off = 0,
                        Ok(b) => off += b.data.len() as u64,
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }));
        }
        {
            let (top, cx, w) = (self.top.clone(), self.cx.clone(), writes.clone());
            tasks.push(tokio::spawn(async move {
                for (off, data) in w {
                    top.writev(&cx, writer, off, Buf::from_vec(data), 0).await?;
                    tokio::task::yield_now().await;
                }
                Ok(())
            }));
        }
        for t in tasks {
            if let Err(e) = t.await.expect("task") {
                self.fail(format!("racing fop failed: {e:?}"));
            }
        }
        for (off, data) in writes {
            self.model_write(file, off, &data);
        }
        self.top.release(&self.cx, writer).await.expect("release");
        self.log.push("race".to_owned());
        self.check_file(rng, file).await;
    }
}

async fn run(seed: u64, steps: usize, top: Subvol) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut w = World::new(top).await;
    for step in 0..steps {
        let file = w.step(&mut rng).await;
        w.log.push(format!("-- step {step} done (seed {seed})"));
        w.check_file(&mut rng, file).await;
        if step % 50 == 49 {
            w.race(&mut rng).await;
        }
    }
}

fn stack(ra: &[(&str, &str)], ioc: &[(&str, &str)]) -> Subvol {
    let ioc = build::<IoCache>(ioc, vec![MemLeaf::new()]);
    build::<ReadAhead>(ra, vec![ioc])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aligned_pages_tight_cache() {
    for seed in 1..=3 {
        let top = stack(
            &[("page-size", "4KiB"), ("page-count", "4")],
            &[("page-size", "4KiB"), ("cache-size", "64KiB")],
        );
        run(seed, 300, top).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn misaligned_pages_and_no_cache_timeout() {
    for seed in 11..=13 {
        let top = stack(
            &[("page-size", "1536"), ("page-count", "3")],
            &[
                ("page-size", "4KiB"),
                ("cache-size", "1MiB"),
                ("cache-timeout", "0"),
            ],
        );
        run(seed, 300, top).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn default_options() {
    for seed in 21..=22 {
        run(seed, 300, stack(&[], &[])).await;
    }
}
