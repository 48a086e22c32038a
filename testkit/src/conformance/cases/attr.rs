//! Attribute changes and time stamps.

use abi_stable::std_types::ROption;
use xlator_api::{SetAttr, TimeSet, Timespec};

use crate::conformance::env::{CaseResult, Env, ensure, ensure_eq};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("attr", setattr_mode),
        case!("attr", setattr_owner),
        case!("attr", setattr_times_at),
        case!("attr", setattr_time_now),
        case!("attr", chmod_updates_ctime),
        case!("attr", write_updates_mtime),
    ]
}

/// A time well in the past, so "updated" is unambiguous on any clock granularity.
const OLD: Timespec = Timespec {
    sec: 1_000_000,
    nsec: 500,
};

fn times(atime: TimeSet, mtime: TimeSet) -> SetAttr {
    SetAttr {
        atime,
        mtime,
        ..SetAttr::default()
    }
}

async fn setattr_mode(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let r = e
        .setattr(
            a.gfid,
            SetAttr {
                perm: ROption::RSome(0o4751),
                ..SetAttr::default()
            },
        )
        .await?;
    ensure_eq!(r.perm, 0o4751, "perm in the reply");
    ensure_eq!(e.stat(a.gfid).await?.perm, 0o4751, "perm from stat");
    let d = e.mkdir(e.dir, "d", 0o755).await?;
    let r = e
        .setattr(
            d.gfid,
            SetAttr {
                perm: ROption::RSome(0o1700),
                ..SetAttr::default()
            },
        )
        .await?;
    ensure_eq!(r.perm, 0o1700, "directory perm with the sticky bit");
    ensure!(r.is_dir(), "chmod changed the kind");
    Ok(())
}

async fn setattr_owner(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let set = SetAttr {
        uid: ROption::RSome(1234),
        gid: ROption::RSome(5678),
        ..SetAttr::default()
    };
    let r = e.setattr(a.gfid, set).await?;
    ensure_eq!((r.uid, r.gid), (1234, 5678), "owner in the reply");
    let s = e.stat(a.gfid).await?;
    ensure_eq!((s.uid, s.gid), (1234, 5678), "owner from stat");
    let r = e
        .setattr(
            a.gfid,
            SetAttr {
                gid: ROption::RSome(42),
                ..SetAttr::default()
            },
        )
        .await?;
    ensure_eq!((r.uid, r.gid), (1234, 42), "gid-only change keeps the uid");
    Ok(())
}

async fn setattr_times_at(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    let later = Timespec {
        sec: 2_000_000,
        nsec: 7,
    };
    let r = e
        .setattr(a.gfid, times(TimeSet::At(OLD), TimeSet::At(later)))
        .await?;
    ensure_eq!((r.atime, r.mtime), (OLD, later), "times in the reply");
    let s = e.stat(a.gfid).await?;
    ensure_eq!((s.atime, s.mtime), (OLD, later), "times from stat");
    ensure!(
        s.ctime > later,
        "ctime {:?} not updated by setattr",
        s.ctime
    );
    let r = e
        .setattr(a.gfid, times(TimeSet::Omit, TimeSet::At(OLD)))
        .await?;
    ensure_eq!((r.atime, r.mtime), (OLD, OLD), "Omit keeps atime");
    Ok(())
}

async fn setattr_time_now(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    e.setattr(a.gfid, times(TimeSet::At(OLD), TimeSet::At(OLD)))
        .await?;
    let before = Timespec::now();
    let r = e.setattr(a.gfid, times(TimeSet::Now, TimeSet::Now)).await?;
    // The graph may run on another host's clock; allow generous skew.
    let floor = Timespec {
        sec: before.sec - 300,
        nsec: 0,
    };
    ensure!(
        r.atime > floor && r.mtime > floor,
        "Now set {:?}/{:?}, before {before:?}",
        r.atime,
        r.mtime
    );
    Ok(())
}

async fn chmod_updates_ctime(e: Env) -> CaseResult {
    let a = e.file_with(e.dir, "f", b"").await?;
    e.setattr(a.gfid, times(TimeSet::At(OLD), TimeSet::At(OLD)))
        .await?;
    let r = e
        .setattr(
            a.gfid,
            SetAttr {
                perm: ROption::RSome(0o600),
                ..SetAttr::default()
            },
        )
        .await?;
    ensure!(r.ctime > OLD, "ctime {:?}", r.ctime);
    ensure_eq!(r.mtime, OLD, "chmod changed mtime");
    Ok(())
}

async fn write_updates_mtime(e: Env) -> CaseResult {
    let (a, fd) = e.create(e.dir, "f", 0o644).await?;
    e.setattr(a.gfid, times(TimeSet::At(OLD), TimeSet::At(OLD)))
        .await?;
    e.write(fd, 0, b"touch").await?;
    e.close(fd).await?;
    let s = e.stat(a.gfid).await?;
    ensure!(s.mtime > OLD, "mtime {:?} not updated by a write", s.mtime);
    ensure!(s.ctime > OLD, "ctime {:?} not updated by a write", s.ctime);
    e.setattr(e.dir, times(TimeSet::Omit, TimeSet::At(OLD)))
        .await?;
    e.file_with(e.dir, "g", b"").await?;
    ensure!(
        e.stat(e.dir).await?.mtime > OLD,
        "creating a name did not update the parent's mtime"
    );
    Ok(())
}
