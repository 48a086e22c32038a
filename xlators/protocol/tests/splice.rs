//! Reads whose data the leaf hands back in a pipe (`Buf::from_pipe`, as storage/posix does
//! when protocol/server asks with `PipePayloadOk`) are spliced into the socket and arrive
//! intact, over the Unix socket and over TCP; `splice-read-min` (off by default) decides
//! which reads ask.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use xlator_api::{
    Buf, Ctx, Errno, Fd, FdId, Gfid, Init, Loc, PipePayloadOk, ReadReply, Subvol, Translator,
};
use xlfs_testkit::build::try_build;
use xlfs_testkit::memfs::MemLeaf;

/// Reads that came with `PipePayloadOk`, per test (each test uses its own counter slot).
static ASKED: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Over an in-memory leaf: answers a read that may come back in a pipe with a pipe.
struct PipeLeaf {
    children: Vec<Subvol>,
    slot: usize,
}

impl Translator for PipeLeaf {
    const TYPE: &'static str = "test/pipe-leaf";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        let slot = if init.name.as_str() == "pipe-1" { 1 } else { 0 };
        Ok(PipeLeaf {
            children: init.children,
            slot,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn readv(&self, cx: &Ctx, fd: Fd, offset: u64, size: u32) -> Result<ReadReply, Errno> {
        let mut r = self.children[0].readv(cx, fd, offset, size).await?;
        if cx.ext::<PipePayloadOk>().is_some() {
            ASKED[self.slot].fetch_add(1, Ordering::Relaxed);
            r.data = Buf::copy_into_pipe(&r.data).expect("pipe");
        }
        Ok(r)
    }
}

fn fd(id: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDWR,
    }
}

/// A file of `data` behind a server over PipeLeaf (named `name`), and two clients of it:
/// one over the Unix socket, one over TCP.
async fn setup(
    name: &str,
    server_opts: &[(&str, &str)],
    data: &[u8],
) -> (tempfile::TempDir, Subvol, Subvol, Subvol, Gfid) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8").to_string();
    let leaf = try_build::<PipeLeaf>(name, &[], vec![MemLeaf::new()]).expect("pipe leaf");
    let mut opts: Vec<(&str, &str)> = vec![("unix-socket-dir", &d)];
    opts.extend_from_slice(server_opts);
    let (server, addr) = common::server(&leaf, &opts);
    let unix = common::client(addr, &[("unix-socket-dir", &d), ("remote-subvolume", name)]);
    let tcp = common::client(addr, &[("unix-socket-dir", ""), ("remote-subvolume", name)]);
    common::wait_up(&unix).await;
    common::wait_up(&tcp).await;
    assert_eq!(common::json_field(&unix, "transport"), "unix");
    assert_eq!(common::json_field(&tcp, "transport"), "tcp");
    let cx = Ctx::root();
    let e = unix
        .create(&cx, Loc::new(Gfid::ROOT, "f"), fd(1, Gfid::NULL), 0o644, 0)
        .await
        .expect("create");
    let g = e.attr.gfid;
    for (i, chunk) in data.chunks(512 << 10).enumerate() {
        let off = (i * (512 << 10)) as u64;
        unix.writev(&cx, fd(1, g), off, Buf::copy_from_slice(chunk), 0)
            .await
            .expect("write");
    }
    tcp.open(&cx, fd(2, g)).await.expect("open over tcp");
    // The file is open as fd 1 over the Unix socket (create) and fd 2 over TCP.
    (dir, server, unix, tcp, g)
}

const READS: [(u64, u32); 5] = [
    (0, 1 << 20),
    (4000, 70_000),
    (1_000_000, 200_000),
    (12_288, 4096),
    (5_000_000, 65_536),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_reads_come_through_a_pipe_intact_over_both_transports() {
    let data: Vec<u8> = (0..1_100_000u32).map(|i| (i % 251) as u8).collect();
    let (_dir, _server, unix, tcp, g) =
        setup("pipe-0", &[("splice-read-min", "64KiB")], &data).await;
    let cx = Ctx::root();
    for (client, id) in [(&unix, 1), (&tcp, 2)] {
        for (off, len) in READS {
            let r = client.readv(&cx, fd(id, g), off, len).await.expect("read");
            let end = (off as usize + len as usize).min(data.len());
            let want = data.get(off as usize..end).unwrap_or(&[]);
            assert_eq!(r.data.len(), want.len(), "{len} bytes at {off}");
            assert!(&*r.data == want, "{len} bytes at {off} differ");
        }
    }
    // Reads of 64 KiB and up asked for a pipe; the 4 KiB one did not.
    assert_eq!(ASKED[0].load(Ordering::Relaxed), 2 * 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splice_read_min_zero_never_asks_for_a_pipe() {
    let data = vec![7u8; 300_000];
    let (_dir, _server, unix, _tcp, g) = setup("pipe-1", &[("splice-read-min", "0")], &data).await;
    let cx = Ctx::root();
    let r = unix.readv(&cx, fd(1, g), 0, 300_000).await.expect("read");
    assert!(r.data.iter().all(|&b| b == 7) && r.data.len() == 300_000);
    assert_eq!(ASKED[1].load(Ordering::Relaxed), 0);
}
