//! Reading and writing file data.

use abi_stable::std_types::ROption;
use xlator_api::{Buf, Errno, Fd, Loc, SetAttr};

use crate::conformance::env::{
    CaseResult, Env, OrFail, ensure, ensure_eq, expect_err, new_fd, pattern,
};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("data", write_read_round_trip),
        case!("data", write_past_eof_leaves_zeroed_hole),
        case!("data", short_read_at_eof),
        case!("data", overwrite_in_the_middle),
        case!("data", truncate_shrinks),
        case!("data", extend_reads_zeroes),
        case!("data", ftruncate_through_fd),
        case!("data", open_trunc_empties),
        case!("data", append_writes_at_eof),
        case!("data", large_write_1mib),
        case!("data", concurrent_writers_distinct_offsets),
        case!("data", data_survives_close_and_reopen),
        case!("data", anonymous_fd_io, AnonymousFds),
        case!("data", open_unlinked_file_readable, OpenUnlinked),
        case!("data", fsync_and_flush),
        case!("data", open_directory_for_write_is_eisdir),
    ]
}

async fn write_read_round_trip(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    let data = pattern(10_000, 1);
    e.write(fd, 0, &data).await?;
    ensure_eq!(e.read(fd, 0, 10_000).await?, data, "read back");
    ensure_eq!(
        e.read(fd, 1234, 100).await?,
        data[1234..1334].to_vec(),
        "read at an offset"
    );
    ensure_eq!(
        e.top.fstat(&e.cx, fd).await.or_fail("fstat")?.size,
        10_000,
        "size"
    );
    e.close(fd).await
}

async fn write_past_eof_leaves_zeroed_hole(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, b"head").await?;
    e.write(fd, 100_000, b"tail").await?;
    let all = e.read_to_end(fd, 0, 32 * 1024).await?;
    ensure_eq!(all.len(), 100_004, "size after writing past EOF");
    ensure_eq!(&all[..4], b"head", "head");
    ensure!(
        all[4..100_000].iter().all(|b| *b == 0),
        "the hole reads non-zero bytes"
    );
    ensure_eq!(&all[100_000..], b"tail", "tail");
    e.close(fd).await
}

async fn short_read_at_eof(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, b"0123456789").await?;
    ensure_eq!(
        e.read(fd, 6, 100).await?,
        b"6789".to_vec(),
        "read across EOF"
    );
    ensure_eq!(e.read(fd, 10, 100).await?, Vec::<u8>::new(), "read at EOF");
    ensure_eq!(
        e.read(fd, 1 << 30, 100).await?,
        Vec::<u8>::new(),
        "read far past EOF"
    );
    e.close(fd).await
}

async fn overwrite_in_the_middle(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, &[b'a'; 8192]).await?;
    e.write(fd, 4000, &[b'b'; 200]).await?;
    let all = e.read_to_end(fd, 0, 4096).await?;
    ensure_eq!(all.len(), 8192, "size after an overwrite");
    let want: Vec<u8> = (0..8192)
        .map(|i| {
            if (4000..4200).contains(&i) {
                b'b'
            } else {
                b'a'
            }
        })
        .collect();
    ensure!(all == want, "overwrite in the middle corrupted the file");
    e.close(fd).await
}

fn size(n: u64) -> SetAttr {
    SetAttr {
        size: ROption::RSome(n),
        ..SetAttr::default()
    }
}

async fn truncate_shrinks(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", &pattern(5000, 2)).await?;
    let after = e.setattr(a.gfid, size(1000)).await?;
    ensure_eq!(after.size, 1000, "size in the setattr reply");
    ensure_eq!(e.stat(a.gfid).await?.size, 1000, "size from stat");
    let fd = e.open(a.gfid, libc::O_RDONLY).await?;
    ensure_eq!(
        e.read_to_end(fd, 0, 4096).await?,
        pattern(5000, 2)[..1000].to_vec(),
        "data after truncate"
    );
    e.close(fd).await
}

async fn extend_reads_zeroes(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", &[7u8; 3000]).await?;
    e.setattr(a.gfid, size(1000)).await?;
    e.setattr(a.gfid, size(6000)).await?;
    ensure_eq!(e.stat(a.gfid).await?.size, 6000, "size after extend");
    let fd = e.open(a.gfid, libc::O_RDONLY).await?;
    let all = e.read_to_end(fd, 0, 4096).await?;
    ensure_eq!(all.len(), 6000, "bytes read after extend");
    ensure!(all[..1000].iter().all(|b| *b == 7), "kept data changed");
    ensure!(
        all[1000..].iter().all(|b| *b == 0),
        "truncated data came back after extending"
    );
    e.close(fd).await
}

async fn ftruncate_through_fd(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, &[1u8; 100]).await?;
    let a = e
        .top
        .fsetattr(&e.cx, fd, size(10))
        .await
        .or_fail("fsetattr size")?;
    ensure_eq!(a.size, 10, "size after ftruncate");
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        vec![1u8; 10],
        "data after ftruncate"
    );
    e.close(fd).await
}

async fn open_trunc_empties(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"old contents").await?;
    let fd = e.open(a.gfid, libc::O_RDWR | libc::O_TRUNC).await?;
    ensure_eq!(
        e.top.fstat(&e.cx, fd).await.or_fail("fstat")?.size,
        0,
        "size after O_TRUNC"
    );
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        Vec::<u8>::new(),
        "read after O_TRUNC"
    );
    e.close(fd).await
}

async fn append_writes_at_eof(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"first").await?;
    let fd = e.open(a.gfid, libc::O_WRONLY | libc::O_APPEND).await?;
    e.write(fd, 0, b"+second").await?;
    e.write(fd, 2, b"+third").await?;
    e.close(fd).await?;
    let fd = e.open(a.gfid, libc::O_RDONLY).await?;
    ensure_eq!(
        e.read_to_end(fd, 0, 4096).await?,
        b"first+second+third".to_vec(),
        "O_APPEND content"
    );
    e.close(fd).await
}

async fn large_write_1mib(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    let data = pattern(1 << 20, 3);
    let n = e
        .top
        .writev(&e.cx, fd, 0, Buf::from_vec(data.clone()), 0)
        .await
        .or_fail("writev 1 MiB")?
        .written;
    ensure_eq!(n, 1 << 20, "bytes written");
    ensure_eq!(
        e.top.fstat(&e.cx, fd).await.or_fail("fstat")?.size,
        1 << 20,
        "size"
    );
    let back = e.read_to_end(fd, 0, 128 * 1024).await?;
    ensure!(
        back == data,
        "1 MiB read back differs (got {} bytes)",
        back.len()
    );
    e.close(fd).await
}

async fn concurrent_writers_distinct_offsets(e: Env) -> CaseResult {
    const WRITERS: usize = 16;
    const PIECE: usize = 64 * 1024;
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    let mut tasks = Vec::new();
    for i in 0..WRITERS {
        let (top, cx) = (e.top.clone(), e.cx.clone());
        tasks.push(tokio::spawn(async move {
            let data = Buf::from_vec(pattern(PIECE, i as u8));
            top.writev(&cx, fd, (i * PIECE) as u64, data, 0).await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let n = t
            .await
            .map_err(|j| format!("writer {i} died: {j}"))?
            .or_fail(&format!("writer {i}"))?
            .written;
        ensure_eq!(n, PIECE as u64, "bytes written by writer {i}");
    }
    let all = e.read_to_end(fd, 0, 128 * 1024).await?;
    ensure_eq!(all.len(), WRITERS * PIECE, "size after concurrent writes");
    for i in 0..WRITERS {
        ensure!(
            all[i * PIECE..(i + 1) * PIECE] == pattern(PIECE, i as u8)[..],
            "piece {i} corrupted"
        );
    }
    e.close(fd).await
}

async fn data_survives_close_and_reopen(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"persistent").await?;
    let again = e.lookup(e.dir, "f").await?;
    ensure_eq!(again.gfid, a.gfid, "gfid");
    let fd = e.open(again.gfid, libc::O_RDONLY).await?;
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        b"persistent".to_vec(),
        "data after reopen"
    );
    e.close(fd).await
}

async fn anonymous_fd_io(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let fd = Fd::anonymous(a.gfid, libc::O_RDWR);
    let n = e
        .top
        .writev(&e.cx, fd, 0, Buf::from("anon"), 0)
        .await
        .or_fail("writev on an anonymous fd")?
        .written;
    ensure_eq!(n, 4, "bytes written");
    let b = e
        .top
        .readv(&e.cx, fd, 0, 100)
        .await
        .or_fail("readv on an anonymous fd")?;
    ensure_eq!(
        b.data.to_vec(),
        b"anon".to_vec(),
        "read through an anonymous fd"
    );
    let opened = e.open(a.gfid, libc::O_RDONLY).await?;
    ensure_eq!(
        e.read(opened, 0, 100).await?,
        b"anon".to_vec(),
        "read through an opened fd"
    );
    e.close(opened).await
}

async fn open_unlinked_file_readable(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"still here").await?;
    let fd = e.open(a.gfid, libc::O_RDWR).await?;
    e.top
        .unlink(&e.cx, Loc::new(e.dir, "f"))
        .await
        .or_fail("unlink")?;
    e.absent(e.dir, "f").await?;
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        b"still here".to_vec(),
        "read after unlink"
    );
    e.write(fd, 10, b"!").await?;
    ensure_eq!(
        e.read(fd, 0, 100).await?,
        b"still here!".to_vec(),
        "write after unlink"
    );
    let st = e.top.fstat(&e.cx, fd).await.or_fail("fstat after unlink")?;
    ensure_eq!(st.nlink, 0, "nlink of an unlinked open file");
    e.close(fd).await
}

async fn fsync_and_flush(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, b"x").await?;
    e.top.fsync(&e.cx, fd, false).await.or_fail("fsync")?;
    e.top.fsync(&e.cx, fd, true).await.or_fail("fdatasync")?;
    e.top.flush(&e.cx, fd).await.or_fail("flush")?;
    e.close(fd).await?;
    let dfd = new_fd(e.dir, libc::O_RDONLY | libc::O_DIRECTORY);
    e.top.opendir(&e.cx, dfd).await.or_fail("opendir")?;
    e.top
        .fsyncdir(&e.cx, dfd, false)
        .await
        .or_fail("fsyncdir")?;
    e.top.releasedir(&e.cx, dfd).await.or_fail("releasedir")
}

async fn open_directory_for_write_is_eisdir(e: Env) -> CaseResult {
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    let r = e.top.open(&e.cx, new_fd(d.gfid, libc::O_WRONLY)).await;
    expect_err(r, &[Errno::EISDIR], "open of a directory for writing")?;
    let f = e.file_with(e.dir, "f", b"").await?;
    let r = e
        .top
        .opendir(&e.cx, new_fd(f.gfid, libc::O_RDONLY | libc::O_DIRECTORY))
        .await;
    expect_err(r, &[Errno::ENOTDIR], "opendir of a file")
}
