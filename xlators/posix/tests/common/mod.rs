//! Shared helpers: a brick on a temp dir, contexts, fd ids.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{Ctx, Entry, Fd, FdId, Gfid, InitArgs, Loc, Options, Subvol};
use xlfs_posix::Posix;

pub fn try_brick(dir: &Path, extra: &[(&str, &str)]) -> Result<Subvol, String> {
    let mut options = Options::new();
    options.set("directory", dir.to_str().expect("utf-8 path"));
    options.set("gfid-xattr", "auto");
    // instantiate() takes options as given (the graph engine fills schema defaults).
    options.set("background-unlink", "on");
    // Gone for GFID lookups at once: what most tests here check (tests of the grace set it).
    options.set("unlinked-grace", "0");
    options.set("direct-read-min", "64KiB");
    options.set("direct-read-share-window", "30s");
    options.set("backing-files", "on");
    options.set("allow-devices", "off");
    options.set("health-check-interval", "10s");
    options.set("health-check-timeout", "20s");
    for (k, v) in extra {
        options.set(k, v);
    }
    xlator_api::sdk::instantiate::<Posix>(InitArgs {
        name: "brick".into(),
        options,
        children: RVec::new(),
        services: xlfs_core::services::host_services(),
    })
}

pub fn brick_at(dir: &Path) -> Subvol {
    try_brick(dir, &[]).expect("brick init")
}

pub fn new_brick() -> (tempfile::TempDir, Subvol) {
    let dir = tempfile::tempdir().expect("tempdir");
    let top = brick_at(dir.path());
    (dir, top)
}

pub fn root() -> Ctx {
    Ctx::root()
}

pub fn user(uid: u32) -> Ctx {
    Ctx::new(uid, uid)
}

pub fn loc(parent: Gfid, name: &str) -> Loc {
    Loc::new(parent, name)
}

static NEXT_FD: AtomicU64 = AtomicU64::new(1);

pub fn fd(gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(NEXT_FD.fetch_add(1, Ordering::Relaxed)),
        gfid,
        flags,
    }
}

pub async fn mkfile(top: &Subvol, cx: &Ctx, parent: Gfid, name: &str, data: &[u8]) -> Entry {
    let f = fd(Gfid::NULL, libc::O_RDWR);
    let e = top
        .create(cx, loc(parent, name), f, 0o644, 0o022)
        .await
        .expect("create");
    let f = Fd {
        gfid: e.attr.gfid,
        ..f
    };
    if !data.is_empty() {
        top.writev(cx, f, 0, data.into(), 0).await.expect("write");
    }
    top.release(cx, f).await.expect("release");
    e
}

pub async fn mkdir(top: &Subvol, cx: &Ctx, parent: Gfid, name: &str) -> Entry {
    top.mkdir(cx, loc(parent, name), 0o755, 0o022)
        .await
        .expect("mkdir")
}

pub async fn names(top: &Subvol, cx: &Ctx, dir: Gfid) -> Vec<String> {
    let f = fd(dir, libc::O_RDONLY);
    top.opendir(cx, f).await.expect("opendir");
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let batch = top.readdirp(cx, f, off, 4096).await.expect("readdirp");
        if batch.is_empty() {
            break;
        }
        for e in batch.iter() {
            out.push(e.name.to_string());
            off = e.next_offset;
        }
    }
    top.releasedir(cx, f).await.expect("releasedir");
    out.sort();
    out
}
