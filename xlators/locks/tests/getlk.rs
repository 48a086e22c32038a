//! F_GETLK (and F_OFD_GETLK, which reaches the brick as the same `lk` Get with the open file
//! description as lock owner): the answer names a held lock of another owner only when it
//! conflicts with the type asked about (a read query conflicts only with write locks), and
//! is otherwise F_UNLCK with the rest of the request as given. The matrix is generic/478's
//! (xfstests): a lock on [0,9], queries on [0,9], [5,24] and [20,29]; then what a close does
//! to it (flush with the closing process's owner, release of the last fd).

mod common;

use common::{client, fd, fl, stack};
use xlator_api::{Flock, Gfid, LkCmd, LkOwner, LockKind};

const HOLDER: u64 = 0xa0;
const ASKER: u64 = 0xb0;

/// Sets `held` on [0,9] for one owner, then asks about `asked` on `start..start+len` as
/// another owner of the same client connection (one mount, two processes).
async fn query(held: LockKind, asked: LockKind, start: u64, len: u64) -> Flock {
    let (top, _h) = stack();
    let g = Gfid::random();
    let holder = client(7, HOLDER);
    top.lk(&holder, fd(1, g), LkCmd::Set, fl(held, 0, 10, HOLDER))
        .await
        .expect("setlk");
    let asker = client(7, ASKER);
    let q = fl(asked, start, len, ASKER);
    top.lk(&asker, fd(2, g), LkCmd::Get, q)
        .await
        .expect("getlk")
}

#[tokio::test]
async fn a_query_reports_only_locks_that_conflict_with_its_type() {
    use LockKind::{Read, Unlock, Write};
    // (held, asked, start, len, answer)
    let cases = [
        (Write, Write, 0, 10, Write),
        (Write, Write, 5, 20, Write),
        (Write, Write, 20, 10, Unlock),
        (Write, Read, 0, 10, Write),
        (Write, Read, 5, 20, Write),
        (Write, Read, 20, 10, Unlock),
        (Read, Write, 0, 10, Read),
        (Read, Write, 5, 20, Read),
        (Read, Write, 20, 10, Unlock),
        (Read, Read, 0, 10, Unlock),
        (Read, Read, 5, 20, Unlock),
        (Read, Read, 20, 10, Unlock),
    ];
    for (held, asked, start, len, answer) in cases {
        let got = query(held, asked, start, len).await;
        let what = format!("{held:?} on [0,9], {asked:?} asked on [{start},+{len})");
        assert_eq!(got.kind, answer, "{what}");
        if answer == Unlock {
            // Nothing conflicts: the request comes back as given, only its type changed.
            let mut want = fl(asked, start, len, ASKER);
            want.kind = Unlock;
            assert_eq!(got, want, "{what}");
        } else {
            // The conflicting lock, as held.
            assert_eq!(
                (got.start, got.len, got.owner, got.pid),
                (0, 10, LkOwner(HOLDER), HOLDER as u32),
                "{what}"
            );
        }
    }
}

#[tokio::test]
async fn a_read_query_skips_read_locks_to_find_a_write_lock_behind_them() {
    let (top, _h) = stack();
    let g = Gfid::random();
    // Two read locks of other owners first in the table, then a write lock further on.
    for (owner, start) in [(1, 0), (2, 0)] {
        top.lk(
            &client(7, owner),
            fd(owner, g),
            LkCmd::Set,
            fl(LockKind::Read, start, 10, owner),
        )
        .await
        .expect("read lock");
    }
    top.lk(
        &client(7, 3),
        fd(3, g),
        LkCmd::Set,
        fl(LockKind::Write, 50, 10, 3),
    )
    .await
    .expect("write lock");
    let got = top
        .lk(
            &client(7, 9),
            fd(9, g),
            LkCmd::Get,
            fl(LockKind::Read, 0, 0, 9),
        )
        .await
        .expect("getlk");
    assert_eq!(
        (got.kind, got.start, got.len, got.owner),
        (LockKind::Write, 50, 10, LkOwner(3))
    );
    // The owner's own locks never conflict with its query.
    let own = top
        .lk(
            &client(7, 1),
            fd(1, g),
            LkCmd::Get,
            fl(LockKind::Write, 0, 10, 1),
        )
        .await
        .expect("getlk");
    assert_eq!(
        own.kind,
        LockKind::Read,
        "owner 2's read lock, not owner 1's own"
    );
    assert_eq!(own.owner, LkOwner(2));
}

#[tokio::test]
async fn closing_a_dup_drops_posix_locks_but_not_an_open_file_description_lock() {
    let (top, _h) = stack();
    let g = Gfid::random();
    // A POSIX lock (owner: the process) and an OFD lock (owner: the open file), one fd.
    let (posix, ofd) = (0x100, 0x200);
    let f = fd(1, g);
    top.lk(
        &client(7, posix),
        f,
        LkCmd::Set,
        fl(LockKind::Write, 0, 10, posix),
    )
    .await
    .expect("posix lock");
    top.lk(
        &client(7, ofd),
        f,
        LkCmd::Set,
        fl(LockKind::Write, 20, 10, ofd),
    )
    .await
    .expect("ofd lock");
    // dup + close: the kernel flushes with the process's owner; the file stays open.
    // (The leaf below does not know the file: only what happens here matters.)
    let _ = top.flush(&client(7, posix), f).await;
    let ask = |start| fl(LockKind::Read, start, 10, 0x300);
    let asker = client(7, 0x300);
    let got = top.lk(&asker, fd(2, g), LkCmd::Get, ask(0)).await;
    assert_eq!(
        got.expect("getlk").kind,
        LockKind::Unlock,
        "posix lock gone"
    );
    let got = top.lk(&asker, fd(2, g), LkCmd::Get, ask(20)).await;
    assert_eq!(got.expect("getlk").kind, LockKind::Write, "ofd lock stays");
    // The last close of the file releases the fd, and its OFD lock with it.
    let _ = top.release(&client(7, 0), f).await;
    let got = top.lk(&asker, fd(2, g), LkCmd::Get, ask(20)).await;
    assert_eq!(
        got.expect("getlk").kind,
        LockKind::Unlock,
        "released with the fd"
    );
}
