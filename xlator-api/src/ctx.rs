//! [`Ctx`]: who is calling and on behalf of what, passed to every fop.

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, RString, RVec};

use crate::buf::Buf;
use crate::types::LkOwner;

/// The call context. Cheap to clone (one reference count); immutable once built.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct Ctx(RArc<CtxInner>);

#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default)]
struct CtxInner {
    uid: u32,
    gid: u32,
    groups: RVec<u32>,
    pid: u32,
    lk_owner: LkOwner,
    request_id: u64,
    ext: RVec<ExtEntry>,
}

#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
struct ExtEntry {
    key: RString,
    value: Buf,
}

/// Typed extension data carried by a [`Ctx`] (GlusterFS's xdata, but typed at both ends).
/// The key names the type; the bytes are its stable encoding.
pub trait CtxExtension: Sized {
    const KEY: &'static str;
    fn encode(&self) -> Vec<u8>;
    fn decode(bytes: &[u8]) -> Option<Self>;
}

impl Ctx {
    /// A context for `uid`/`gid` with no supplementary groups.
    pub fn new(uid: u32, gid: u32) -> Ctx {
        CtxBuilder::new(uid, gid).build()
    }
    /// Root, pid 0: for internal fops (heal, rebalance, tests).
    pub fn root() -> Ctx {
        Ctx::new(0, 0)
    }
    pub fn builder(uid: u32, gid: u32) -> CtxBuilder {
        CtxBuilder::new(uid, gid)
    }
    /// A builder starting from this context, to derive a changed copy.
    pub fn to_builder(&self) -> CtxBuilder {
        CtxBuilder((*self.0).clone())
    }
    pub fn uid(&self) -> u32 {
        self.0.uid
    }
    pub fn gid(&self) -> u32 {
        self.0.gid
    }
    pub fn groups(&self) -> &[u32] {
        &self.0.groups
    }
    pub fn pid(&self) -> u32 {
        self.0.pid
    }
    pub fn lk_owner(&self) -> LkOwner {
        self.0.lk_owner
    }
    pub fn request_id(&self) -> u64 {
        self.0.request_id
    }
    /// Whether the caller is in group `gid` (primary or supplementary).
    pub fn in_group(&self, gid: u32) -> bool {
        self.0.gid == gid || self.0.groups.contains(&gid)
    }
    /// The extension value of type `T`, if set and decodable.
    pub fn ext<T: CtxExtension>(&self) -> Option<T> {
        self.0
            .ext
            .iter()
            .find(|e| e.key.as_str() == T::KEY)
            .and_then(|e| T::decode(&e.value))
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = &*self.0;
        write!(
            f,
            "Ctx(uid={} gid={} pid={} req={})",
            i.uid, i.gid, i.pid, i.request_id
        )
    }
}

/// Builds a [`Ctx`].
pub struct CtxBuilder(CtxInner);

impl CtxBuilder {
    pub fn new(uid: u32, gid: u32) -> CtxBuilder {
        CtxBuilder(CtxInner {
            uid,
            gid,
            ..CtxInner::default()
        })
    }
    pub fn groups(mut self, groups: &[u32]) -> Self {
        self.0.groups = groups.to_vec().into();
        self
    }
    pub fn pid(mut self, pid: u32) -> Self {
        self.0.pid = pid;
        self
    }
    pub fn lk_owner(mut self, owner: LkOwner) -> Self {
        self.0.lk_owner = owner;
        self
    }
    pub fn request_id(mut self, id: u64) -> Self {
        self.0.request_id = id;
        self
    }
    /// Sets (or replaces) the extension value of type `T`.
    pub fn ext<T: CtxExtension>(mut self, value: &T) -> Self {
        self.0.ext.retain(|e| e.key.as_str() != T::KEY);
        self.0.ext.push(ExtEntry {
            key: T::KEY.into(),
            value: Buf::from_vec(value.encode()),
        });
        self
    }
    pub fn build(self) -> Ctx {
        Ctx(RArc::new(self.0))
    }
}

/// Asks the leaf to give the object created by `create`/`mkdir`/`mknod`/`symlink` this GFID
/// (GlusterFS's `gfid-req`): replicas and distribute use it so an object has the same GFID on
/// every brick.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GfidReq(pub crate::types::Gfid);

impl CtxExtension for GfidReq {
    const KEY: &'static str = "xlfs/gfid-req";
    fn encode(&self) -> Vec<u8> {
        self.0.0.to_vec()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(GfidReq(crate::types::Gfid(bytes.try_into().ok()?)))
    }
}

/// Tells the leaf that whoever asked for this read can send its data straight out of a pipe
/// ([`crate::Buf::from_pipe`]): protocol/server sets it on large reads, and storage/posix
/// then fills a pipe with `splice` instead of copying the data into memory. Any translator
/// in between still sees ordinary bytes if it looks (the pipe is drained on first look).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PipePayloadOk;

impl CtxExtension for PipePayloadOk {
    const KEY: &'static str = "xlfs/pipe-payload-ok";
    fn encode(&self) -> Vec<u8> {
        Vec::new()
    }
    fn decode(_: &[u8]) -> Option<Self> {
        Some(PipePayloadOk)
    }
}

/// Which client connection a request came from: protocol/server numbers its connections
/// (unique for the life of the server process; a reconnecting client gets a new number) and
/// sets this on every request it passes down. Absent on requests that did not come through
/// a server (a local graph). storage/posix uses it to tell a file read by several clients,
/// which it caches, from one client's read, which that client's own kernel caches.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct ClientId(pub u64);

impl CtxExtension for ClientId {
    const KEY: &'static str = "xlfs/client-id";
    fn encode(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(ClientId(u64::from_le_bytes(bytes.try_into().ok()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tag(u32);
    impl CtxExtension for Tag {
        const KEY: &'static str = "test/tag";
        fn encode(&self) -> Vec<u8> {
            self.0.to_be_bytes().to_vec()
        }
        fn decode(b: &[u8]) -> Option<Self> {
            Some(Tag(u32::from_be_bytes(b.try_into().ok()?)))
        }
    }

    #[test]
    fn typed_extension_round_trips() {
        let cx = Ctx::builder(5, 6).groups(&[7]).ext(&Tag(42)).build();
        assert_eq!(cx.ext::<Tag>().map(|t| t.0), Some(42));
        assert!(cx.in_group(7) && cx.in_group(6) && !cx.in_group(8));
        let cx2 = cx.to_builder().ext(&Tag(1)).build();
        assert_eq!(cx2.ext::<Tag>().map(|t| t.0), Some(1));
        assert_eq!(cx.ext::<Tag>().map(|t| t.0), Some(42));
        let cx3 = cx.to_builder().ext(&ClientId(u64::MAX - 1)).build();
        assert_eq!(cx3.ext::<ClientId>(), Some(ClientId(u64::MAX - 1)));
        assert_eq!(cx.ext::<ClientId>(), None);
    }
}
