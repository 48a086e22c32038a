//! Who a request runs as on the brick. A client sends the uid, gid and groups of each call
//! (its user's, as a FUSE or NFS host learnt them), and storage/posix runs the call as them.
//! This module decides how much of that to believe:
//!
//! - A peer on the brick's **Unix socket** is known to the kernel (`SO_PEERCRED`,
//!   `SO_PEERGROUPS`). If it is root on this machine (it could read the brick directory
//!   anyway), its calls run as sent: it is a mount or NFS server speaking for its own users.
//!   Any other local peer acts only as itself: the ids it sends are replaced by its own.
//! - A **TCP** peer is *trusted* if it proved it holds the brick's secret (the handshake's
//!   challenge-response, [`crate::creds`]): it is a mount, NFS server, self-heal or rebalance
//!   of the volume, and its ids are believed. Any other TCP peer (every one, on a brick
//!   without a secret) is root-squashed by default.
//!
//! `root-squash` maps uid 0 (and gid 0, and group 0) to `anonuid`/`anongid`: `auto` (the
//! default) for untrusted TCP peers, `on` for every peer but local root, `off` for none.
//! `all-squash` maps every caller to `anonuid`/`anongid` with no groups. Both also apply to
//! non-root Unix-socket peers (after their ids were replaced), never to a root one.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};

use crate::wire::WireCtx;

/// What the kernel says of a connection's peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A TCP peer; `trusted` when it proved it holds the brick's secret.
    Remote { trusted: bool },
    /// Root on this machine, through the Unix socket.
    LocalRoot,
    /// Another local user, through the Unix socket: it acts only as itself.
    LocalUser {
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
    },
}

impl Peer {
    /// The peer of a connected Unix socket, from `SO_PEERCRED` (fixed at its `connect`) and
    /// `SO_PEERGROUPS`; an error if the kernel will not say who it is (the connection is then
    /// refused: a peer whose ids are unknown must not be believed).
    pub fn of_unix(sock: BorrowedFd<'_>) -> std::io::Result<Peer> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: a valid socket fd, a ucred buffer and its size.
        let r = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&raw mut cred).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if cred.uid == 0 {
            return Ok(Peer::LocalRoot);
        }
        // Without SO_PEERGROUPS (before Linux 4.13) the peer gets no supplementary groups:
        // less than it has, never more.
        let groups = peer_groups(sock).unwrap_or_else(|e| {
            tracing::debug!(
                "no SO_PEERGROUPS for local uid {} ({e}): no groups",
                cred.uid
            );
            Vec::new()
        });
        Ok(Peer::LocalUser {
            uid: cred.uid,
            gid: cred.gid,
            groups,
        })
    }

    /// Whether the peer is root on this machine (it may be handed backing files: fds of brick
    /// files opened read-write as root).
    pub fn is_local_root(&self) -> bool {
        matches!(self, Peer::LocalRoot)
    }

    /// For logs.
    pub fn describe(&self) -> String {
        match self {
            Peer::Remote { trusted: true } => "a network peer holding the secret".into(),
            Peer::Remote { trusted: false } => "an unauthenticated network peer".into(),
            Peer::LocalRoot => "root on this machine".into(),
            Peer::LocalUser { uid, gid, .. } => format!("local uid {uid} gid {gid}"),
        }
    }
}

/// The supplementary groups of a Unix socket's peer (`SO_PEERGROUPS`, Linux 4.13).
fn peer_groups(sock: BorrowedFd<'_>) -> std::io::Result<Vec<u32>> {
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<u32>()) as libc::socklen_t;
        // SAFETY: a valid socket fd, a buffer of `len` writable bytes and its size.
        let r = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<u32>();
        if r == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let e = std::io::Error::last_os_error();
        // ERANGE: the buffer was short; `len` says how long it must be.
        if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() {
            groups.resize(n, 0);
            continue;
        }
        return Err(e);
    }
}

/// `root-squash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootSquash {
    /// Untrusted peers only.
    Auto = 0,
    On = 1,
    Off = 2,
}

impl RootSquash {
    /// The option's value (`auto`, `on`, `off`; the schema allows no other).
    pub fn parse(v: &str) -> RootSquash {
        match v {
            "on" => RootSquash::On,
            "off" => RootSquash::Off,
            _ => RootSquash::Auto,
        }
    }

    fn name(self) -> &'static str {
        match self {
            RootSquash::Auto => "auto",
            RootSquash::On => "on",
            RootSquash::Off => "off",
        }
    }
}

/// The squash options (reconfigurable, read at every request).
pub struct Squash {
    root: AtomicU8,
    all: AtomicBool,
    anonuid: AtomicU32,
    anongid: AtomicU32,
}

impl Squash {
    pub fn new(root: RootSquash, all: bool, anonuid: u32, anongid: u32) -> Squash {
        let s = Squash {
            root: AtomicU8::new(RootSquash::Off as u8),
            all: AtomicBool::new(false),
            anonuid: AtomicU32::new(0),
            anongid: AtomicU32::new(0),
        };
        s.set(root, all, anonuid, anongid);
        s
    }

    pub fn set(&self, root: RootSquash, all: bool, anonuid: u32, anongid: u32) {
        self.anonuid.store(anonuid, Ordering::Relaxed);
        self.anongid.store(anongid, Ordering::Relaxed);
        self.root.store(root as u8, Ordering::Relaxed);
        self.all.store(all, Ordering::Relaxed);
    }

    /// For the statedump: `root-squash`, `all-squash`, `anonuid`, `anongid`.
    pub fn dump(&self) -> serde_json::Value {
        serde_json::json!({
            "root-squash": self.root_mode().name(),
            "all-squash": self.all.load(Ordering::Relaxed),
            "anonuid": self.anonuid.load(Ordering::Relaxed),
            "anongid": self.anongid.load(Ordering::Relaxed),
        })
    }

    fn root_mode(&self) -> RootSquash {
        match self.root.load(Ordering::Relaxed) {
            0 => RootSquash::Auto,
            1 => RootSquash::On,
            _ => RootSquash::Off,
        }
    }
}

/// Rewrites the ids of a call from `peer` as the module docs say.
pub fn apply(ctx: &mut WireCtx, peer: &Peer, squash: &Squash) {
    let trusted = match peer {
        Peer::LocalRoot => return,
        Peer::LocalUser { uid, gid, groups } => {
            ctx.uid = *uid;
            ctx.gid = *gid;
            ctx.groups.clone_from(groups);
            false
        }
        Peer::Remote { trusted } => *trusted,
    };
    let squash_root = match squash.root_mode() {
        RootSquash::On => true,
        RootSquash::Auto => !trusted,
        RootSquash::Off => false,
    };
    let (anonuid, anongid) = (
        squash.anonuid.load(Ordering::Relaxed),
        squash.anongid.load(Ordering::Relaxed),
    );
    if squash.all.load(Ordering::Relaxed) {
        ctx.uid = anonuid;
        ctx.gid = anongid;
        ctx.groups.clear();
    } else if squash_root {
        if ctx.uid == 0 {
            ctx.uid = anonuid;
        }
        if ctx.gid == 0 {
            ctx.gid = anongid;
        }
        for g in &mut ctx.groups {
            if *g == 0 {
                *g = anongid;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::Ctx;

    fn call(uid: u32, gid: u32, groups: &[u32]) -> WireCtx {
        WireCtx::from_ctx(&Ctx::builder(uid, gid).groups(groups).build()).expect("ctx")
    }

    fn ids(c: &WireCtx) -> (u32, u32, Vec<u32>) {
        (c.uid, c.gid, c.groups.clone())
    }

    #[test]
    fn squashing() {
        let off = Squash::new(RootSquash::Off, false, 65534, 65534);
        let root = Squash::new(RootSquash::On, false, 99, 98);
        let all = Squash::new(RootSquash::Off, true, 99, 98);
        let auto = Squash::new(RootSquash::Auto, false, 99, 98);
        const UNTRUSTED: Peer = Peer::Remote { trusted: false };
        const TRUSTED: Peer = Peer::Remote { trusted: true };
        let mut c = call(0, 0, &[0, 5]);
        apply(&mut c, &UNTRUSTED, &off);
        assert_eq!(ids(&c), (0, 0, vec![0, 5]), "off: believed");
        apply(&mut c, &TRUSTED, &auto);
        assert_eq!(
            ids(&c),
            (0, 0, vec![0, 5]),
            "auto: a peer with the secret is believed"
        );
        apply(&mut c, &UNTRUSTED, &auto);
        assert_eq!(ids(&c), (99, 98, vec![98, 5]), "auto: others are squashed");
        let mut c = call(0, 0, &[0, 5]);
        apply(&mut c, &TRUSTED, &root);
        assert_eq!(ids(&c), (99, 98, vec![98, 5]));
        let mut c = call(1000, 0, &[]);
        apply(&mut c, &UNTRUSTED, &root);
        assert_eq!(
            ids(&c),
            (1000, 98, vec![]),
            "gid 0 of a user is squashed too"
        );
        let mut c = call(1000, 1000, &[7]);
        apply(&mut c, &UNTRUSTED, &root);
        assert_eq!(ids(&c), (1000, 1000, vec![7]), "a user keeps its ids");
        apply(&mut c, &UNTRUSTED, &all);
        assert_eq!(ids(&c), (99, 98, vec![]));
        // Local root is never squashed; a local user is itself, then squashed.
        let mut c = call(0, 0, &[]);
        apply(&mut c, &Peer::LocalRoot, &all);
        assert_eq!(ids(&c), (0, 0, vec![]));
        let me = Peer::LocalUser {
            uid: 1000,
            gid: 100,
            groups: vec![100, 27],
        };
        let mut c = call(0, 0, &[0]);
        apply(&mut c, &me, &off);
        assert_eq!(
            ids(&c),
            (1000, 100, vec![100, 27]),
            "the ids it sent are dropped"
        );
        apply(&mut c, &me, &all);
        assert_eq!(ids(&c), (99, 98, vec![]));
    }

    #[test]
    fn a_unix_peer_is_who_the_kernel_says() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        use std::os::fd::AsFd;
        let p = Peer::of_unix(a.as_fd()).expect("peer");
        // SAFETY: no arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid == 0 {
            assert_eq!(p, Peer::LocalRoot);
        } else {
            match p {
                Peer::LocalUser { uid: u, gid: g, .. } => assert_eq!((u, g), (uid, gid)),
                other => panic!("{other:?}"),
            }
        }
    }
}
