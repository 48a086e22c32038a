//! [`call_every_fop`]: one call of each fop in the table, with plausible arguments — to check
//! that a pass-through translator answers every fop exactly as its child does.
//!
//! Generated from the fop table ([`xlator_api::for_each_fop!`]); a new fop whose arguments
//! are all of known types needs no edit here, one with a new argument type needs a
//! [`Sample`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlator_api::{Ctx, Errno, Fop};
//! use xlfs_testkit::{MockChild, every_fop::call_every_fop};
//!
//! let (mock, _h) = MockChild::new();
//! let replies = call_every_fop(&mock, &Ctx::root()).await;
//! assert_eq!(replies[0], (Fop::Lookup, Err(Errno::ENOSYS)));
//! # }
//! ```

use abi_stable::std_types::{RString, RVec};
use xlator_api::{
    Buf, ClientId, Ctx, EntrylkCmd, Errno, Fd, Flock, Fop, Gfid, LkCmd, LkOwner, Loc, LockKind,
    SeekWhat, SetAttr, Subvol, Xattr, XattropOp,
};

use crate::fixtures::fd;

/// A plausible value of a fop argument type.
pub trait Sample {
    /// The value.
    fn sample() -> Self;
}

macro_rules! sample_default {
    ($($t:ty),*) => { $(impl Sample for $t { fn sample() -> Self { <$t>::default() } })* };
}
sample_default!(
    Loc,
    Gfid,
    SetAttr,
    u32,
    u64,
    i32,
    bool,
    RString,
    Buf,
    RVec<Xattr>,
    RVec<RString>,
    ClientId
);

/// A read-write fd (id 7) on the root, like [`crate::stub_leaf::rw_fd`].
impl Sample for Fd {
    fn sample() -> Self {
        fd(7, Gfid::ROOT, libc::O_RDWR)
    }
}
impl Sample for SeekWhat {
    fn sample() -> Self {
        SeekWhat::Data
    }
}
impl Sample for LkCmd {
    fn sample() -> Self {
        LkCmd::Get
    }
}
impl Sample for EntrylkCmd {
    fn sample() -> Self {
        EntrylkCmd::Lock
    }
}
impl Sample for XattropOp {
    fn sample() -> Self {
        XattropOp::AddArray32
    }
}
/// A read lock of the whole file by pid 1, owner 1.
impl Sample for Flock {
    fn sample() -> Self {
        Flock {
            kind: LockKind::Read,
            start: 0,
            len: 0,
            pid: 1,
            owner: LkOwner(1),
        }
    }
}
/// `user.test` = `value`.
impl Sample for Xattr {
    fn sample() -> Self {
        Xattr {
            name: "user.test".into(),
            value: Buf::from("value"),
        }
    }
}

macro_rules! gen_call_every_fop {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// Calls each fop of the table once, in table order, with [`Sample`] arguments, and
        /// returns each fop with its outcome (the reply's value dropped).
        pub async fn call_every_fop(sv: &Subvol, cx: &Ctx) -> Vec<(Fop, Result<(), Errno>)> {
            let mut out = Vec::new();
            $(
                let r = sv.$name(cx $(, <$ty as Sample>::sample())*).await.map(|_| ());
                out.push((Fop::$Variant, r));
            )*
            out
        }
    };
}
xlator_api::for_each_fop!(gen_call_every_fop);
