//! Volume statistics, space management, seeking and locks.

use xlator_api::{Errno, Flock, Gfid, LkCmd, LkOwner, LockKind, SeekWhat};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure, ensure_eq, expect_err, pattern};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("misc", statfs_is_sane),
        case!("misc", fallocate_extends_unless_keep_size, Fallocate),
        case!("misc", discard_and_zerofill_zero_ranges, Fallocate),
        case!("misc", seek_data_and_hole, Seek),
        case!("misc", posix_locks_conflict_between_owners, Locks),
        case!("misc", flush_releases_owner_locks, Locks),
    ]
}

async fn statfs_is_sane(e: Env) -> CaseResult {
    let s = e
        .top
        .statfs(&e.cx, Gfid::ROOT)
        .await
        .or_fail("statfs of the root")?;
    ensure!(
        s.bsize > 0 && s.frsize > 0,
        "block sizes {}/{}",
        s.bsize,
        s.frsize
    );
    ensure!(s.blocks > 0, "zero blocks");
    ensure!(
        s.blocks >= s.bfree && s.bfree >= s.bavail,
        "blocks {} >= bfree {} >= bavail {} violated",
        s.blocks,
        s.bfree,
        s.bavail
    );
    ensure!(s.files >= s.ffree, "files {} < ffree {}", s.files, s.ffree);
    ensure!(s.namemax >= 255, "namemax {}", s.namemax);
    let sub = e
        .top
        .statfs(&e.cx, e.dir)
        .await
        .or_fail("statfs of a subdirectory")?;
    ensure_eq!(sub.blocks, s.blocks, "blocks seen from a subdirectory");
    Ok(())
}

const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;

async fn fallocate_extends_unless_keep_size(e: Env) -> CaseResult {
    let (a, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, b"abc").await?;
    e.top
        .fallocate(&e.cx, fd, 0, 0, 65536)
        .await
        .or_fail("fallocate")?;
    ensure_eq!(e.stat(a.gfid).await?.size, 65536, "size after fallocate");
    ensure_eq!(
        e.read(fd, 0, 4).await?,
        b"abc\0".to_vec(),
        "data after fallocate"
    );
    e.top
        .fallocate(&e.cx, fd, KEEP_SIZE, 65536, 65536)
        .await
        .or_fail("fallocate KEEP_SIZE")?;
    ensure_eq!(
        e.stat(a.gfid).await?.size,
        65536,
        "size after fallocate KEEP_SIZE"
    );
    ensure_eq!(
        e.read(fd, 65536, 10).await?,
        Vec::<u8>::new(),
        "read past EOF after KEEP_SIZE"
    );
    e.close(fd).await
}

async fn discard_and_zerofill_zero_ranges(e: Env) -> CaseResult {
    let (a, fd) = e.create(e.dir, "f", 0o644).await?;
    let data = pattern(64 * 1024, 9);
    e.write(fd, 0, &data).await?;
    e.top
        .discard(&e.cx, fd, 8192, 16384)
        .await
        .or_fail("discard")?;
    ensure_eq!(
        e.stat(a.gfid).await?.size,
        65536,
        "discard changed the size"
    );
    let all = e.read_to_end(fd, 0, 65536).await?;
    ensure!(
        all[8192..24576].iter().all(|b| *b == 0),
        "discarded range not zero"
    );
    ensure!(
        all[..8192] == data[..8192] && all[24576..] == data[24576..],
        "discard touched bytes outside its range"
    );
    e.top
        .zerofill(&e.cx, fd, 30000, 100)
        .await
        .or_fail("zerofill")?;
    let z = e.read(fd, 29999, 102).await?;
    ensure!(
        z[0] == data[29999] && z[1..101].iter().all(|b| *b == 0) && z[101] == data[30100],
        "zerofill range wrong"
    );
    e.close(fd).await
}

async fn seek_data_and_hole(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    e.write(fd, 0, &[1u8; 5000]).await?;
    let data = e
        .top
        .seek(&e.cx, fd, 0, SeekWhat::Data)
        .await
        .or_fail("SEEK_DATA at 0")?;
    ensure_eq!(data, 0, "SEEK_DATA from 0 in a file starting with data");
    let hole = e
        .top
        .seek(&e.cx, fd, 0, SeekWhat::Hole)
        .await
        .or_fail("SEEK_HOLE at 0")?;
    ensure!(
        hole > 0 && hole <= 5000,
        "SEEK_HOLE from 0 gave {hole} for 5000 data bytes"
    );
    let r = e.top.seek(&e.cx, fd, 5000, SeekWhat::Data).await;
    expect_err(r, &[Errno::ENXIO], "SEEK_DATA at EOF")?;
    let r = e.top.seek(&e.cx, fd, 1 << 30, SeekWhat::Hole).await;
    expect_err(r, &[Errno::ENXIO], "SEEK_HOLE past EOF")?;
    e.close(fd).await
}

fn lock(kind: LockKind, start: u64, len: u64, owner: u64) -> Flock {
    Flock {
        kind,
        start,
        len,
        pid: owner as u32,
        owner: LkOwner(owner),
    }
}

async fn posix_locks_conflict_between_owners(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    let lk = |cmd, l| e.top.lk(&e.cx, fd, cmd, l);
    lk(LkCmd::Set, lock(LockKind::Write, 0, 100, 1))
        .await
        .or_fail("owner 1 write lock")?;
    let r = lk(LkCmd::Set, lock(LockKind::Write, 50, 10, 2)).await;
    expect_err(r, &[Errno::EAGAIN, Errno::EACCES], "conflicting write lock")?;
    let r = lk(LkCmd::Set, lock(LockKind::Read, 99, 1, 2)).await;
    expect_err(r, &[Errno::EAGAIN, Errno::EACCES], "conflicting read lock")?;
    let got = lk(LkCmd::Get, lock(LockKind::Write, 10, 1, 2))
        .await
        .or_fail("F_GETLK")?;
    ensure_eq!(
        (got.kind, got.owner),
        (LockKind::Write, LkOwner(1)),
        "F_GETLK reports the holder"
    );
    lk(LkCmd::Set, lock(LockKind::Write, 100, 10, 2))
        .await
        .or_fail("adjacent lock")?;
    lk(LkCmd::Set, lock(LockKind::Unlock, 0, 100, 1))
        .await
        .or_fail("unlock")?;
    lk(LkCmd::Set, lock(LockKind::Write, 50, 10, 2))
        .await
        .or_fail("lock after unlock")?;
    let free = lk(LkCmd::Get, lock(LockKind::Write, 0, 10, 1))
        .await
        .or_fail("F_GETLK on a free range")?;
    ensure_eq!(free.kind, LockKind::Unlock, "F_GETLK on a free range");
    e.close(fd).await
}

async fn flush_releases_owner_locks(e: Env) -> CaseResult {
    let (_, fd) = e.create(e.dir, "f", 0o644).await?;
    let holder = e.cx.to_builder().lk_owner(LkOwner(7)).build();
    e.top
        .lk(&holder, fd, LkCmd::Set, lock(LockKind::Write, 0, 0, 7))
        .await
        .or_fail("lock whole file")?;
    let r = e
        .top
        .lk(&e.cx, fd, LkCmd::Set, lock(LockKind::Read, 5, 1, 8))
        .await;
    expect_err(
        r,
        &[Errno::EAGAIN, Errno::EACCES],
        "read lock under a whole-file write lock",
    )?;
    e.top
        .flush(&holder, fd)
        .await
        .or_fail("flush by the holder")?;
    e.top
        .lk(&e.cx, fd, LkCmd::Set, lock(LockKind::Read, 5, 1, 8))
        .await
        .or_fail("lock after the holder's flush")?;
    e.close(fd).await
}
