//! Test support: a tiny in-memory leaf translator, builders that fill option defaults from the
//! schema, and a call of every fop in the table.
#![allow(dead_code)]

use std::time::Duration;

use abi_stable::std_types::{RString, RVec};
use xlator_api::sdk::instantiate;
use xlator_api::{
    Buf, Ctx, Entry, EntrylkCmd, Errno, Fd, FdId, Flock, Fop, Gfid, HostServices, Init, InitArgs,
    LkCmd, LkOwner, Loc, LockKind, Options, SeekWhat, SetAttr, Subvol, Translator, Xattr,
    XattropOp, XlatorOptions,
};
use xlfs_core::services::host_services;

/// Size of the one file the leaf pretends to hold.
pub const FILE_SIZE: u64 = 10_000;
/// How long the leaf's `fsync` takes.
pub const FSYNC_DELAY: Duration = Duration::from_millis(2);

/// A leaf: `lookup` fails for the names "missing" (ENOENT) and "forbidden" (EACCES); `readv`
/// returns zeroes from a `FILE_SIZE`-byte file; `writev` accepts everything except on an fd
/// opened read-only (flags 0: EBADF); `fsync` takes `FSYNC_DELAY`. Every other fop is the
/// SDK default, which answers ENOSYS for a translator without children.
pub struct Leaf {
    services: HostServices,
}

impl Translator for Leaf {
    const TYPE: &'static str = "test/leaf";
    const MIN_CHILDREN: u32 = 0;
    const MAX_CHILDREN: u32 = 0;
    type Options = ();

    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Leaf {
            services: init.services,
        })
    }

    fn children(&self) -> &[Subvol] {
        &[]
    }

    async fn lookup(&self, _cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        match loc.name.as_str() {
            "missing" => Err(Errno::ENOENT),
            "forbidden" => Err(Errno::EACCES),
            _ => Ok(Entry::default()),
        }
    }

    async fn readv(&self, _cx: &Ctx, _fd: Fd, offset: u64, size: u32) -> Result<Buf, Errno> {
        let n = FILE_SIZE.saturating_sub(offset).min(u64::from(size));
        Ok(Buf::zeroed(n as usize))
    }

    async fn writev(
        &self,
        _cx: &Ctx,
        fd: Fd,
        _offset: u64,
        data: Buf,
        _flags: i32,
    ) -> Result<u64, Errno> {
        if fd.flags == 0 {
            Err(Errno::EBADF)
        } else {
            Ok(data.len() as u64)
        }
    }

    async fn fsync(&self, _cx: &Ctx, _fd: Fd, _datasync: bool) -> Result<(), Errno> {
        self.services.sleep(FSYNC_DELAY).await;
        Ok(())
    }
}

/// The options of `T`: every declared key at its default, then `set` (checked against the
/// schema, as the core would).
pub fn options_for<T: Translator>(set: &[(&str, &str)]) -> Result<Options, String> {
    let schema = T::Options::schema();
    let mut o = Options::new();
    for s in &schema {
        o.set(&s.key, &s.default);
    }
    for (k, v) in set {
        let spec = schema
            .iter()
            .find(|s| s.key.as_str() == *k)
            .ok_or_else(|| format!("{} has no option {k:?}", T::TYPE))?;
        spec.check(v).map_err(|e| format!("option {k:?}: {e}"))?;
        o.set(k, v);
    }
    Ok(o)
}

/// An instance of `T` named `name` over `children`.
pub fn build<T: Translator>(
    name: &str,
    set: &[(&str, &str)],
    children: Vec<Subvol>,
) -> Result<Subvol, String> {
    instantiate::<T>(InitArgs {
        name: name.into(),
        options: options_for::<T>(set)?,
        children: children.into(),
        services: host_services(),
    })
}

pub fn leaf() -> Subvol {
    build::<Leaf>("leaf", &[], Vec::new()).expect("the test leaf builds")
}

pub fn rw_fd() -> Fd {
    Fd {
        id: FdId(7),
        gfid: Gfid::ROOT,
        flags: 2,
    }
}

pub fn ro_fd() -> Fd {
    Fd {
        id: FdId(8),
        gfid: Gfid::ROOT,
        flags: 0,
    }
}

/// A plausible value of each fop argument type.
pub trait Sample {
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
    RVec<Xattr>
);

impl Sample for Fd {
    fn sample() -> Self {
        rw_fd()
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
impl Sample for Xattr {
    fn sample() -> Self {
        Xattr {
            name: "user.test".into(),
            value: Buf::from("value"),
        }
    }
}

macro_rules! gen_call_every_fop {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// Calls each fop of the table once, in table order, with sample arguments.
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
