//! Shared fixtures: features/locks over a recording spy on the in-memory leaf.

#![allow(dead_code)] // each test file uses a part

use xlator_api::abi_stable::std_types::RVec;
use xlator_api::{
    ClientId, Ctx, Fd, FdId, Flock, Gfid, InitArgs, LkOwner, LockKind, Options, Subvol,
};
use xlfs_locks::Locks;
use xlfs_testkit::{MemLeaf, MockChild, MockHandle};

pub fn stack() -> (Subvol, MockHandle) {
    let (spy, h) = MockChild::spy(MemLeaf::new());
    let top = xlator_api::sdk::instantiate::<Locks>(InitArgs {
        name: "locks".into(),
        options: Options::new(),
        children: RVec::from(vec![spy]),
        services: xlfs_core::services::host_services(),
    })
    .expect("locks init");
    (top, h)
}

pub fn fl(kind: LockKind, start: u64, len: u64, owner: u64) -> Flock {
    Flock {
        kind,
        start,
        len,
        pid: owner as u32,
        owner: LkOwner(owner),
    }
}

pub fn fd(id: u64, gfid: Gfid) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags: libc::O_RDWR,
    }
}

/// A local caller (no client id) with lock owner `owner`.
pub fn cx(owner: u64) -> Ctx {
    Ctx::builder(0, 0).lk_owner(LkOwner(owner)).build()
}

/// A request from client connection `client` with lock owner `owner`.
pub fn client(client: u64, owner: u64) -> Ctx {
    Ctx::builder(0, 0)
        .lk_owner(LkOwner(owner))
        .ext(&ClientId(client))
        .build()
}
