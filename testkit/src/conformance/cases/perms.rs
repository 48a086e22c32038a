//! Permission checks for non-root callers (uid/gid/groups from the `Ctx`).

use abi_stable::std_types::ROption;
use xlator_api::{Errno, Gfid, Loc, SetAttr};

use crate::conformance::env::{CaseResult, Env, OrFail, ensure_eq, expect_err, new_fd};
use crate::conformance::{Case, case};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case!("perms", nonroot_create_needs_dir_write, Permissions),
        case!("perms", nonroot_open_respects_mode, Permissions),
        case!("perms", nonroot_lookup_needs_search, Permissions),
        case!("perms", owner_class_then_group_class, Permissions),
        case!("perms", sticky_dir_protects_others_files, Permissions),
        case!("perms", nonroot_chmod_chown_rules, Permissions),
        case!("perms", access_checks_mode_bits, Permissions),
        case!("perms", nonroot_unlink_needs_dir_write, Permissions),
    ]
}

const USER: u32 = 1000;
const OTHER: u32 = 1001;
const GROUP: u32 = 2000;

impl Env {
    /// A root-owned file with `perm` (set after creation, so no umask applies).
    async fn root_file(&self, parent: Gfid, name: &str, perm: u32) -> Result<Gfid, String> {
        let a = self.file_with(parent, name, b"secret").await?;
        self.setattr(
            a.gfid,
            SetAttr {
                perm: ROption::RSome(perm),
                ..SetAttr::default()
            },
        )
        .await?;
        Ok(a.gfid)
    }

    async fn try_open(&self, gfid: Gfid, flags: i32) -> Result<(), Errno> {
        let fd = new_fd(gfid, flags);
        self.top.open(&self.cx, fd).await?;
        self.top.release(&self.cx, fd).await
    }
}

async fn nonroot_create_needs_dir_write(e: Env) -> CaseResult {
    let ro = e.mkdir(e.dir, "ro", 0o755).await?;
    let user = e.as_user(USER, USER, &[]);
    let fd = new_fd(Gfid::NULL, libc::O_RDWR | libc::O_CREAT);
    let r = user
        .top
        .create(&user.cx, Loc::new(ro.gfid, "f"), fd, 0o644, 0)
        .await;
    expect_err(r, &[Errno::EACCES], "create in a 0755 root-owned dir")?;
    let r = user
        .top
        .mkdir(&user.cx, Loc::new(ro.gfid, "d"), 0o755, 0)
        .await;
    expect_err(r, &[Errno::EACCES], "mkdir in a 0755 root-owned dir")?;
    let (mine, fd) = user.create(e.dir, "mine", 0o644).await?;
    user.close(fd).await?;
    ensure_eq!(
        (mine.uid, mine.gid),
        (USER, USER),
        "owner of a file created by uid {USER}"
    );
    Ok(())
}

async fn nonroot_open_respects_mode(e: Env) -> CaseResult {
    let private = e.root_file(e.dir, "private", 0o600).await?;
    let public = e.root_file(e.dir, "public", 0o644).await?;
    let none = e.root_file(e.dir, "none", 0o000).await?;
    let user = e.as_user(USER, USER, &[]);
    expect_err(
        user.try_open(private, libc::O_RDONLY).await,
        &[Errno::EACCES],
        "read-open of 0600 root file",
    )?;
    user.try_open(public, libc::O_RDONLY)
        .await
        .or_fail("read-open of 0644 root file")?;
    expect_err(
        user.try_open(public, libc::O_WRONLY).await,
        &[Errno::EACCES],
        "write-open of 0644 root file",
    )?;
    expect_err(
        user.try_open(public, libc::O_RDONLY | libc::O_TRUNC).await,
        &[Errno::EACCES],
        "O_TRUNC of 0644 root file",
    )?;
    e.try_open(none, libc::O_RDWR)
        .await
        .or_fail("root opening a 0000 file")
}

async fn nonroot_lookup_needs_search(e: Env) -> CaseResult {
    let closed = e.mkdir(e.dir, "closed", 0o700).await?;
    e.file_with(closed.gfid, "f", b"").await?;
    let user = e.as_user(USER, USER, &[]);
    let r = user.top.lookup(&user.cx, Loc::new(closed.gfid, "f")).await;
    expect_err(r, &[Errno::EACCES], "lookup in a 0700 root-owned dir")?;
    let open = e.mkdir(e.dir, "searchable", 0o711).await?;
    e.file_with(open.gfid, "f", b"").await?;
    user.lookup(open.gfid, "f").await.map(drop)
}

async fn owner_class_then_group_class(e: Env) -> CaseResult {
    let f = e.root_file(e.dir, "f", 0o460).await?;
    let set = SetAttr {
        uid: ROption::RSome(USER),
        gid: ROption::RSome(GROUP),
        ..SetAttr::default()
    };
    e.setattr(f, set).await?;
    let owner = e.as_user(USER, USER, &[GROUP]);
    owner
        .try_open(f, libc::O_RDONLY)
        .await
        .or_fail("owner read with r-- owner bits")?;
    let r = owner.try_open(f, libc::O_WRONLY).await;
    expect_err(
        r,
        &[Errno::EACCES],
        "owner write when only the group may write",
    )?;
    let member = e.as_user(OTHER, OTHER, &[GROUP]);
    member
        .try_open(f, libc::O_RDWR)
        .await
        .or_fail("supplementary-group member read-write")?;
    let outsider = e.as_user(OTHER + 1, OTHER + 1, &[]);
    expect_err(
        outsider.try_open(f, libc::O_RDONLY).await,
        &[Errno::EACCES],
        "other read with --- bits",
    )
}

async fn sticky_dir_protects_others_files(e: Env) -> CaseResult {
    let tmp = e.mkdir(e.dir, "tmp", 0o1777).await?;
    let alice = e.as_user(USER, USER, &[]);
    let bob = e.as_user(OTHER, OTHER, &[]);
    alice.file_with(tmp.gfid, "alices", b"").await?;
    let r = bob.top.unlink(&bob.cx, Loc::new(tmp.gfid, "alices")).await;
    expect_err(
        r,
        &[Errno::EPERM, Errno::EACCES],
        "unlink of another user's file in a sticky dir",
    )?;
    let r = bob
        .top
        .rename(
            &bob.cx,
            Loc::new(tmp.gfid, "alices"),
            Loc::new(tmp.gfid, "bobs"),
            0,
        )
        .await;
    expect_err(
        r,
        &[Errno::EPERM, Errno::EACCES],
        "rename of another user's file in a sticky dir",
    )?;
    alice
        .top
        .unlink(&alice.cx, Loc::new(tmp.gfid, "alices"))
        .await
        .or_fail("owner unlink in a sticky dir")?;
    e.absent(tmp.gfid, "alices").await
}

async fn nonroot_chmod_chown_rules(e: Env) -> CaseResult {
    let f = e.root_file(e.dir, "f", 0o644).await?;
    let user = e.as_user(USER, USER, &[GROUP]);
    let chmod = SetAttr {
        perm: ROption::RSome(0o666),
        ..SetAttr::default()
    };
    expect_err(
        user.top.setattr(&user.cx, f, chmod).await,
        &[Errno::EPERM],
        "chmod of root's file",
    )?;
    let chown = SetAttr {
        uid: ROption::RSome(USER),
        ..SetAttr::default()
    };
    expect_err(
        user.top.setattr(&user.cx, f, chown).await,
        &[Errno::EPERM],
        "chown of root's file",
    )?;
    e.setattr(
        f,
        SetAttr {
            uid: ROption::RSome(USER),
            gid: ROption::RSome(USER),
            ..SetAttr::default()
        },
    )
    .await?;
    let r = user.setattr(f, chmod).await?;
    ensure_eq!(r.perm, 0o666, "owner chmod");
    let give = SetAttr {
        uid: ROption::RSome(0),
        ..SetAttr::default()
    };
    expect_err(
        user.top.setattr(&user.cx, f, give).await,
        &[Errno::EPERM],
        "owner giving the file away",
    )?;
    let r = user
        .setattr(
            f,
            SetAttr {
                gid: ROption::RSome(GROUP),
                ..SetAttr::default()
            },
        )
        .await?;
    ensure_eq!(r.gid, GROUP, "owner chgrp to a group it is in");
    let bad = SetAttr {
        gid: ROption::RSome(GROUP + 1),
        ..SetAttr::default()
    };
    expect_err(
        user.top.setattr(&user.cx, f, bad).await,
        &[Errno::EPERM],
        "owner chgrp to a foreign group",
    )
}

async fn access_checks_mode_bits(e: Env) -> CaseResult {
    let f = e.root_file(e.dir, "f", 0o640).await?;
    let (r, w, x) = (libc::R_OK as u32, libc::W_OK as u32, libc::X_OK as u32);
    e.top
        .access(&e.cx, f, r | w)
        .await
        .or_fail("root access R|W")?;
    let user = e.as_user(USER, USER, &[]);
    user.top
        .access(&user.cx, f, 0)
        .await
        .or_fail("F_OK as another user")?;
    expect_err(
        user.top.access(&user.cx, f, r).await,
        &[Errno::EACCES],
        "R_OK on 0640 as other",
    )?;
    let member = e.as_user(USER, USER, &[0]);
    member
        .top
        .access(&member.cx, f, r)
        .await
        .or_fail("R_OK as a member of gid 0")?;
    expect_err(
        member.top.access(&member.cx, f, w).await,
        &[Errno::EACCES],
        "W_OK on 0640 as group",
    )?;
    expect_err(
        e.top.access(&e.cx, f, x).await,
        &[Errno::EACCES],
        "X_OK for root on a file with no x bit",
    )
}

async fn nonroot_unlink_needs_dir_write(e: Env) -> CaseResult {
    let ro = e.mkdir(e.dir, "ro", 0o755).await?;
    e.root_file(ro.gfid, "f", 0o666).await?;
    let user = e.as_user(USER, USER, &[]);
    let r = user.top.unlink(&user.cx, Loc::new(ro.gfid, "f")).await;
    expect_err(r, &[Errno::EACCES], "unlink in a 0755 root-owned dir")?;
    let r = user
        .top
        .rename(
            &user.cx,
            Loc::new(ro.gfid, "f"),
            Loc::new(e.dir, "moved"),
            0,
        )
        .await;
    expect_err(r, &[Errno::EACCES], "rename out of a 0755 root-owned dir")?;
    user.lookup(ro.gfid, "f").await.map(drop)
}
