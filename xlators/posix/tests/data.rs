//! Data fops: open, readv/writev, anonymous fds, O_APPEND, O_DIRECT, fsync, fallocate,
//! discard + SEEK_HOLE, zerofill, truncate.

mod common;

use common::*;
use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Errno, Fd, Gfid, SeekWhat, SetAttr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_short_read_at_eof() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"").await;
    let f = fd(e.attr.gfid, libc::O_RDWR);
    top.open(&cx, f).await.expect("open");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let w = top
        .writev(&cx, f, 10, Buf::from_vec(data.clone()), 0)
        .await
        .expect("write");
    assert_eq!(w.written, 200_000);
    assert_eq!(
        w.attr.map(|a| a.size),
        ROption::RSome(200_010),
        "post-write size"
    );
    let r = top.readv(&cx, f, 10, 200_000).await.expect("read");
    assert_eq!(&*r.data, &data[..]);
    assert_eq!(
        r.attr.map(|a| a.size),
        ROption::RSome(200_010),
        "post-read size"
    );
    let r = top.readv(&cx, f, 199_000, 4096).await.expect("short read");
    assert_eq!(r.data.len(), 200_010 - 199_000);
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(200_010));
    let r = top.readv(&cx, f, 1 << 30, 10).await.expect("past eof");
    assert_eq!(r.data.len(), 0);
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(200_010));
    assert_eq!(
        top.readv(&cx, f, 0, 10)
            .await
            .expect("hole")
            .data
            .as_slice(),
        &[0u8; 10]
    );
    let st = top.fstat(&cx, f).await.expect("fstat");
    assert_eq!(st.size, 200_010);
    assert!(st.blocks > 0);
    top.fsync(&cx, f, false).await.expect("fsync");
    top.fsync(&cx, f, true).await.expect("fdatasync");
    top.flush(&cx, f).await.expect("flush");
    top.release(&cx, f).await.expect("release");
    assert_eq!(top.readv(&cx, f, 0, 1).await.err(), Some(Errno::EBADF));
    // Reading a write-only fd fails the way the kernel says.
    let w = fd(e.attr.gfid, libc::O_WRONLY);
    top.open(&cx, w).await.expect("open wo");
    assert_eq!(top.readv(&cx, w, 0, 1).await.err(), Some(Errno::EBADF));
    let ro = fd(e.attr.gfid, libc::O_RDONLY);
    top.open(&cx, ro).await.expect("open ro");
    assert_eq!(
        top.writev(&cx, ro, 0, "x".into(), 0).await.err(),
        Some(Errno::EBADF)
    );
    // O_TRUNC on open.
    let t = fd(e.attr.gfid, libc::O_WRONLY | libc::O_TRUNC);
    top.open(&cx, t).await.expect("open trunc");
    assert_eq!(top.stat(&cx, e.attr.gfid).await.expect("stat").size, 0);
    // A directory opens read-only only.
    let d = mkdir(&top, &cx, Gfid::ROOT, "d").await;
    assert_eq!(
        top.open(&cx, fd(d.attr.gfid, libc::O_RDWR)).await.err(),
        Some(Errno::EISDIR)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_fd_io() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"0123456789").await;
    let anon = Fd::anonymous(e.attr.gfid, libc::O_RDWR);
    let w = top
        .writev(&cx, anon, 2, "ab".into(), 0)
        .await
        .expect("anon write");
    assert_eq!(w.written, 2);
    assert_eq!(w.attr.map(|a| a.size), ROption::RSome(10));
    let r = top.readv(&cx, anon, 0, 100).await.expect("anon read");
    assert_eq!(r.data.as_slice(), b"01ab456789");
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(10));
    assert_eq!(top.fstat(&cx, anon).await.expect("anon fstat").size, 10);
    top.fsync(&cx, anon, false).await.expect("anon fsync");
    let a = SetAttr {
        size: ROption::RSome(4),
        ..SetAttr::default()
    };
    assert_eq!(
        top.fsetattr(&cx, anon, a)
            .await
            .expect("anon ftruncate")
            .size,
        4
    );
    let stale = Fd::anonymous(Gfid::random(), libc::O_RDONLY);
    assert_eq!(top.readv(&cx, stale, 0, 1).await.err(), Some(Errno::ESTALE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_goes_to_eof() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "log", b"start").await;
    let f = fd(e.attr.gfid, libc::O_WRONLY | libc::O_APPEND);
    top.open(&cx, f).await.expect("open append");
    let w = top
        .writev(&cx, f, 0, "-one".into(), 0)
        .await
        .expect("append");
    assert_eq!(w.attr.map(|a| a.size), ROption::RSome(9), "appended at EOF");
    top.writev(&cx, f, 1, "-two".into(), 0)
        .await
        .expect("append");
    // Per-write O_APPEND on a plain fd.
    let g = fd(e.attr.gfid, libc::O_WRONLY);
    top.open(&cx, g).await.expect("open");
    top.writev(&cx, g, 0, "-three".into(), libc::O_APPEND)
        .await
        .expect("append flag");
    let anon = Fd::anonymous(e.attr.gfid, libc::O_RDONLY);
    let r = top.readv(&cx, anon, 0, 100).await.expect("read");
    assert_eq!(r.data.as_slice(), b"start-one-two-three");
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(19));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_and_sync_io() {
    let (_d, top) = new_brick();
    let cx = root();
    let f = fd(Gfid::NULL, libc::O_RDWR | libc::O_DIRECT | libc::O_SYNC);
    let e = top
        .create(&cx, loc(Gfid::ROOT, "direct"), f, 0o644, 0)
        .await
        .expect("create direct");
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    let block: Vec<u8> = (0..8192u32).map(|i| i as u8).collect();
    top.writev(&cx, f, 0, Buf::from_vec(block.clone()), 0)
        .await
        .expect("aligned write");
    top.writev(&cx, f, 8192, "unaligned tail".into(), 0)
        .await
        .expect("unaligned write");
    let r = top.readv(&cx, f, 0, 8192).await.expect("aligned read");
    assert_eq!(&*r.data, &block[..]);
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(8192 + 14));
    let r = top.readv(&cx, f, 8190, 100).await.expect("unaligned read");
    assert_eq!(&r.data[2..], b"unaligned tail");
    let s = fd(e.attr.gfid, libc::O_WRONLY | libc::O_DSYNC);
    top.open(&cx, s).await.expect("open dsync");
    top.writev(&cx, s, 0, "sync".into(), libc::O_SYNC)
        .await
        .expect("sync write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn punch_hole_seek_zerofill_fallocate() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "sparse", b"").await;
    let f = fd(e.attr.gfid, libc::O_RDWR);
    top.open(&cx, f).await.expect("open");
    let mb = 1 << 20;
    top.writev(&cx, f, 0, Buf::from_vec(vec![7u8; 3 * mb]), 0)
        .await
        .expect("write");
    top.discard(&cx, f, mb as u64, mb as u64)
        .await
        .expect("punch");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 3 * mb as u64);
    assert_eq!(
        top.seek(&cx, f, 0, SeekWhat::Hole).await.expect("hole"),
        mb as u64
    );
    assert_eq!(
        top.seek(&cx, f, mb as u64, SeekWhat::Data)
            .await
            .expect("data"),
        2 * mb as u64
    );
    assert_eq!(
        top.readv(&cx, f, mb as u64, 16)
            .await
            .expect("read hole")
            .data
            .as_slice(),
        &[0u8; 16]
    );
    assert_eq!(
        top.seek(&cx, f, 10 * mb as u64, SeekWhat::Data).await.err(),
        Some(Errno::ENXIO)
    );
    top.zerofill(&cx, f, 10, 20).await.expect("zerofill");
    let r = top.readv(&cx, f, 0, 40).await.expect("read");
    assert_eq!(&r.data[..10], &[7u8; 10]);
    assert_eq!(&r.data[10..30], &[0u8; 20]);
    assert_eq!(&r.data[30..], &[7u8; 10]);
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(3 * mb as u64));
    top.zerofill(&cx, f, 3 * mb as u64, 100)
        .await
        .expect("zerofill extends");
    assert_eq!(
        top.fstat(&cx, f).await.expect("fstat").size,
        3 * mb as u64 + 100
    );
    top.fallocate(&cx, f, libc::FALLOC_FL_KEEP_SIZE, 0, 8 * mb as u64)
        .await
        .expect("prealloc");
    let st = top.fstat(&cx, f).await.expect("fstat");
    assert_eq!(st.size, 3 * mb as u64 + 100);
    assert!(st.blocks * 512 >= 8 * mb as u64);
    top.fallocate(&cx, f, 0, 0, 9 * mb as u64)
        .await
        .expect("extend");
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").size, 9 * mb as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlinked_open_file_stays_readable() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "tmp", b"keep me").await;
    let f = fd(e.attr.gfid, libc::O_RDONLY);
    top.open(&cx, f).await.expect("open");
    top.unlink(&cx, loc(Gfid::ROOT, "tmp"))
        .await
        .expect("unlink");
    let r = top.readv(&cx, f, 0, 100).await.expect("read");
    assert_eq!(r.data.as_slice(), b"keep me");
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(7));
    assert_eq!(top.fstat(&cx, f).await.expect("fstat").nlink, 0);
    top.release(&cx, f).await.expect("release");
}

/// Reads of cached data are answered without the blocking pool; data the page cache does not
/// hold (evicted here, all of it or every other page) comes back the same through the
/// blocking read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_the_same_cached_or_not() {
    reads_come_back_the_same(false).await;
}

/// The same reads by a caller that takes pipes ([`xlator_api::PipePayloadOk`], as
/// protocol/server is): uncached data comes back in a pipe, and everything reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spliced_reads_are_the_same_cached_or_not() {
    reads_come_back_the_same(true).await;
}

async fn reads_come_back_the_same(spliced: bool) {
    use std::os::fd::AsRawFd;
    let (d, top) = new_brick();
    let cx = root();
    let rcx = if spliced {
        cx.to_builder().ext(&xlator_api::PipePayloadOk).build()
    } else {
        cx.clone()
    };
    let (_, f, data) = synced_file(&top, &cx, libc::O_RDWR, 253).await;
    let file = std::fs::File::open(d.path().join("f")).expect("brick file");
    let evict = |off: i64, len: i64| {
        // SAFETY: plain fd and integer arguments.
        let r =
            unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0, "fadvise");
    };
    for pass in 0..3 {
        match pass {
            0 => {}           // all cached
            1 => evict(0, 0), // nothing cached
            _ => {
                // every other 4 KiB page cached
                for p in (0..1_000_000i64).step_by(8192) {
                    evict(p, 4096);
                }
            }
        }
        for (off, len) in [
            (0u64, 1_000_000u32),
            (4000, 70_000),
            (999_000, 4096),
            (2_000_000, 10),
        ] {
            let r = top.readv(&rcx, f, off, len).await.expect("read");
            let end = (off as usize + len as usize).min(data.len());
            if spliced && pass == 1 && !r.data.is_empty() {
                // Nothing cached: the read splices from the disk into a pipe. (Cached data
                // is copied: that is cheaper than a pipe.)
                assert!(r.data.in_pipe(), "{len} bytes at {off} not in a pipe");
            }
            if pass == 0 {
                assert!(
                    !r.data.in_pipe(),
                    "cached {len} bytes at {off} came in a pipe"
                );
            }
            let want = data.get(off as usize..end).unwrap_or(&[]);
            assert_eq!(&*r.data, want, "pass {pass}, {len} bytes at {off}");
            assert_eq!(r.attr.map(|a| a.size), ROption::RSome(1_000_000));
            if pass > 0 {
                evict(0, 0);
            }
        }
    }
}

/// How many pages of `file` the page cache holds (cachestat(2), Linux 6.5).
fn cached_pages(file: &std::fs::File) -> u64 {
    use std::os::fd::AsRawFd;
    let range = [0u64, 0]; // offset 0, length 0: to the end of the file
    let mut st = [0u64; 5];
    // SAFETY: the kernel's struct cachestat_range and struct cachestat layouts (all u64).
    let r = unsafe {
        libc::syscall(
            451,
            file.as_raw_fd(),
            range.as_ptr(),
            st.as_mut_ptr(),
            0 as libc::c_uint,
        )
    };
    assert_eq!(r, 0, "cachestat: {}", std::io::Error::last_os_error());
    st[0]
}

/// Drops every cached page of `file` (it must be clean: written back).
fn evict_all(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain fd and integer arguments.
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "fadvise");
}

/// Whether reads of `path` can go around the page cache here: its pages can be dropped
/// (not tmpfs) and it opens with O_DIRECT. Evicts `file` on the way.
fn direct_reads_bypass_the_cache(file: &std::fs::File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    evict_all(file);
    cached_pages(file) == 0
        && std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .is_ok()
}

/// Creates "f" in the root holding 1,000,000 bytes of a pattern (`i % modulus`), written
/// through an fd opened with `flags` (left open) and synced. Returns its entry, that fd and
/// the bytes.
async fn synced_file(
    top: &xlator_api::Subvol,
    cx: &xlator_api::Ctx,
    flags: i32,
    modulus: u32,
) -> (xlator_api::Entry, Fd, Vec<u8>) {
    let e = mkfile(top, cx, Gfid::ROOT, "f", b"").await;
    let f = fd(e.attr.gfid, flags);
    top.open(cx, f).await.expect("open");
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % modulus) as u8).collect();
    top.writev(cx, f, 0, Buf::from_vec(data.clone()), 0)
        .await
        .expect("write");
    top.fsync(cx, f, false).await.expect("fsync");
    (e, f, data)
}

/// Large reads of data the brick's page cache holds none of go around it (O_DIRECT,
/// `direct-read-min`): the same bytes, nothing left in the page cache. Partly cached,
/// dirty, small and unaligned reads use the page cache; a write-only fd still cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_large_reads_go_around_the_page_cache() {
    // Not /tmp: it may be tmpfs, whose pages are the file.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let top = common::brick_at(d.path());
    let cx = root();
    let (e, f, mut data) = synced_file(&top, &cx, libc::O_RDWR, 251).await;
    let path = d.path().join("f");
    let file = std::fs::File::open(&path).expect("brick file");
    let evict = || evict_all(&file);
    let direct_works = direct_reads_bypass_the_cache(&file, &path);

    let r = top.readv(&cx, f, 0, 1_000_000).await.expect("cold read");
    assert_eq!(&*r.data, &data[..]);
    assert_eq!(r.attr.map(|a| a.size), ROption::RSome(1_000_000));
    if direct_works {
        assert_eq!(
            cached_pages(&file),
            0,
            "a cold 1 MB read filled the page cache"
        );
    } else {
        eprintln!("this file system keeps its pages or refuses O_DIRECT: cache not checked");
    }
    // Past the end of the file, and a short tail, read direct as well.
    let r = top.readv(&cx, f, 999_424, 65536).await.expect("tail");
    assert_eq!(&*r.data, &data[999_424..]);
    let r = top.readv(&cx, f, 2 << 20, 65536).await.expect("past eof");
    assert!(r.data.is_empty());

    // Small and unaligned reads go through the page cache; a large read of a range that
    // is then partly cached does too, and reads the same.
    let r = top.readv(&cx, f, 4096, 4096).await.expect("small");
    assert_eq!(&*r.data, &data[4096..8192]);
    let r = top.readv(&cx, f, 100, 100_000).await.expect("unaligned");
    assert_eq!(&*r.data, &data[100..100_100]);
    if direct_works {
        assert!(
            cached_pages(&file) > 0,
            "small reads did not use the page cache"
        );
    }
    let r = top
        .readv(&cx, f, 0, 1_000_000)
        .await
        .expect("partly cached");
    assert_eq!(&*r.data, &data[..]);

    // Data written but not yet on the disk (dirty pages) is what a read returns.
    evict();
    data[..70_000].fill(7);
    top.writev(&cx, f, 0, Buf::from_vec(vec![7; 70_000]), 0)
        .await
        .expect("rewrite");
    let r = top.readv(&cx, f, 0, 1_000_000).await.expect("dirty read");
    assert_eq!(&*r.data, &data[..]);

    // The O_DIRECT twin reads whatever the fd's mode: a write-only fd still cannot.
    top.fsync(&cx, f, false).await.expect("fsync");
    let w = fd(e.attr.gfid, libc::O_WRONLY);
    top.open(&cx, w).await.expect("open wo");
    evict();
    assert_eq!(
        top.readv(&cx, w, 0, 1 << 20).await.err(),
        Some(Errno::EBADF)
    );
    for x in [f, w] {
        top.release(&cx, x).await.expect("release");
    }
}

/// A file read cold by a second client while the first one reads it direct counts as shared:
/// its reads then fill the brick's page cache, so many clients reading one file cost one disk
/// read, not one each (`direct-read-share-window`; 0 turns that off). Two fds of one client
/// (its kernel caches for all its processes) do not make a file shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_two_clients_read_is_cached_on_the_brick() {
    use xlator_api::ClientId;
    for window in ["30s", "0"] {
        let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let top =
            common::try_brick(d.path(), &[("direct-read-share-window", window)]).expect("brick");
        let cx = root();
        let client = |n| cx.to_builder().ext(&ClientId(n)).build();
        let (e, w, data) = synced_file(&top, &cx, libc::O_WRONLY, 249).await;
        let path = d.path().join("f");
        let file = std::fs::File::open(&path).expect("brick file");
        let evict = || evict_all(&file);
        if !direct_reads_bypass_the_cache(&file, &path) {
            eprintln!("this file system keeps its pages or refuses O_DIRECT: nothing to check");
            return;
        }
        let shared = window != "0";
        // (client, fd, whether the read leaves pages cached)
        let (a1, a2, b) = (
            fd(e.attr.gfid, libc::O_RDONLY),
            fd(e.attr.gfid, libc::O_RDONLY),
            fd(e.attr.gfid, libc::O_RDONLY),
        );
        let reads = [
            (1, a1, false),
            (1, a2, false), // the same client through another fd
            (2, b, shared), // a second client
            (1, a1, shared),
        ];
        for (i, (n, x, want_cached)) in reads.into_iter().enumerate() {
            let cx = client(n);
            if i < 3 {
                top.open(&cx, x).await.expect("open");
            }
            evict();
            let r = top.readv(&cx, x, 0, 1_000_000).await.expect("read");
            assert_eq!(&*r.data, &data[..]);
            assert_eq!(
                cached_pages(&file) > 0,
                want_cached,
                "window {window}, read {i} by client {n}"
            );
        }
        for x in [a1, a2, b, w] {
            top.release(&cx, x).await.expect("release");
        }
    }
}

/// O_NOFOLLOW was about the client's last path component: a file or directory opened by
/// GFID opens; a symlink object is still refused with ELOOP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o_nofollow_opens_files_and_directories_but_not_symlinks() {
    let (_d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"data").await;
    let f = fd(e.attr.gfid, libc::O_RDONLY | libc::O_NOFOLLOW);
    top.open(&cx, f).await.expect("open file with O_NOFOLLOW");
    assert_eq!(
        &*top.readv(&cx, f, 0, 10).await.expect("read").data,
        b"data"
    );
    let d = mkdir(&top, &cx, Gfid::ROOT, "d").await.attr.gfid;
    let dfd = fd(d, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW);
    top.opendir(&cx, dfd)
        .await
        .expect("opendir with O_NOFOLLOW");
    let l = top
        .symlink(&cx, loc(Gfid::ROOT, "l"), "f".into())
        .await
        .expect("symlink")
        .attr
        .gfid;
    assert_eq!(
        top.open(&cx, fd(l, libc::O_RDONLY | libc::O_NOFOLLOW))
            .await
            .err(),
        Some(Errno::ELOOP)
    );
}

/// A read-only open that asks for a backing file gets the file itself, opened for reading and
/// writing (passthrough writers use the same one) even for a caller who may not write it;
/// other opens, and a brick with `backing-files` off, give none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_opens_that_ask_get_a_writable_backing_file() {
    use std::os::unix::fs::MetadataExt;
    use xlator_api::BackingWanted;
    let (d, top) = new_brick();
    let cx = root();
    let e = mkfile(&top, &cx, Gfid::ROOT, "f", b"bytes").await;
    let g = e.attr.gfid;
    let ro = SetAttr {
        perm: ROption::RSome(0o444),
        ..SetAttr::default()
    };
    top.setattr(&cx, g, ro)
        .await
        .expect("read-only for everyone");
    let bob = user(1000).to_builder().ext(&BackingWanted).build();
    let f = fd(g, libc::O_RDONLY);
    let b = top
        .open(&bob, f)
        .await
        .expect("open")
        .backing
        .into_option()
        .expect("a backing file");
    let st = std::fs::metadata(d.path().join("f")).expect("stat");
    assert_eq!((b.dev(), b.ino()), (st.dev(), st.ino()));
    // SAFETY: F_GETFL on an open descriptor.
    let mode = unsafe { libc::fcntl(b.raw_fd(), libc::F_GETFL) } & libc::O_ACCMODE;
    assert_eq!(mode, libc::O_RDWR);
    top.release(&cx, f).await.expect("release");
    // Not asked, or not read-only: none.
    let f = fd(g, libc::O_RDONLY);
    assert!(top.open(&cx, f).await.expect("open").backing.is_none());
    top.release(&cx, f).await.expect("release");
    let want = cx.to_builder().ext(&BackingWanted).build();
    let f = fd(g, libc::O_RDWR);
    assert!(top.open(&want, f).await.expect("open").backing.is_none());
    top.release(&cx, f).await.expect("release");
    // Switched off.
    let off = try_brick(d.path(), &[("backing-files", "off")]).expect("brick");
    drop(top);
    let f = fd(g, libc::O_RDONLY);
    assert!(off.open(&want, f).await.expect("open").backing.is_none());
    off.release(&cx, f).await.expect("release");
}
