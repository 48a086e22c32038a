//! [`Ctx`]: who is calling and on behalf of what, passed to every fop.

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, RString, RVec};

use crate::buf::Buf;
use crate::types::{ClientId, LkOwner};

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
/// The key names the type; the bytes are its stable encoding. The key's prefix says whether
/// the extension crosses the wire ([`ExtScope::of`]).
pub trait CtxExtension: Sized {
    const KEY: &'static str;
    fn encode(&self) -> Vec<u8>;
    fn decode(bytes: &[u8]) -> Option<Self>;
}

/// Whether an extension crosses the wire, by the prefix of its key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExtScope {
    /// Carried from protocol/client to protocol/server and passed down there (every key
    /// without one of the prefixes below: `xlfs/gfid-req`, a plugin's own keys...).
    Wire,
    /// `srv/...`: set by protocol/server from what it knows (the connection a request came
    /// on); a client never sends it and a server drops it from what a client sent.
    ServerSet,
    /// `local/...`: meaningful only inside one process; never sent.
    Local,
}

impl ExtScope {
    pub fn of(key: &str) -> ExtScope {
        if key.starts_with("srv/") {
            ExtScope::ServerSet
        } else if key.starts_with("local/") {
            ExtScope::Local
        } else {
            ExtScope::Wire
        }
    }
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
    /// Every extension as (key, encoded bytes), in the order they were set.
    pub fn extensions(&self) -> impl Iterator<Item = (&str, &Buf)> {
        self.0.ext.iter().map(|e| (e.key.as_str(), &e.value))
    }
    /// Whether an extension with `key` is set.
    pub fn has_ext(&self, key: &str) -> bool {
        self.0.ext.iter().any(|e| e.key.as_str() == key)
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
    /// Sets (or replaces) an extension by key and encoded bytes (a server passing down what a
    /// client sent; translators use [`CtxBuilder::ext`]).
    pub fn ext_raw(mut self, key: &str, value: Buf) -> Self {
        self.0.ext.retain(|e| e.key.as_str() != key);
        self.0.ext.push(ExtEntry {
            key: key.into(),
            value,
        });
        self
    }
    /// Removes the extension of type `T` (a translator that consumed it).
    pub fn without<T: CtxExtension>(mut self) -> Self {
        self.0.ext.retain(|e| e.key.as_str() != T::KEY);
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

/// Makes an `unlink` conditional and final, for cluster/distribute's rebalance removing the
/// old copy of a file it moved: the leaf removes the name only while it still names this GFID
/// (else ESTALE: the name was renamed or replaced meanwhile), and an object whose last name
/// this removes is unreachable by GFID at once (no `unlinked-grace`), so that clients still
/// naming the old copy by GFID get ESTALE and find the new one. Fds open on it keep working.
/// Crosses the wire.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UnlinkExact(pub crate::types::Gfid);

impl CtxExtension for UnlinkExact {
    const KEY: &'static str = "xlfs/unlink-exact";
    fn encode(&self) -> Vec<u8> {
        self.0.0.to_vec()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(UnlinkExact(crate::types::Gfid(bytes.try_into().ok()?)))
    }
}

/// Makes an `unlink` conditional on what the name is: the leaf removes it unless its object is
/// a regular file whose permission bits are exactly `perm` and that carries the xattr named
/// `xattr`; such an object is left alone and the answer is EEXIST (which `unlink` never
/// answers otherwise). cluster/distribute unlinks a name on its hashed child in one call this
/// way: a data file goes, a link file (the data is elsewhere) stays for the slower path.
/// Crosses the wire.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnlinkUnlessMarked {
    pub perm: u32,
    pub xattr: String,
}

impl CtxExtension for UnlinkUnlessMarked {
    const KEY: &'static str = "xlfs/unlink-unless-marked";
    fn encode(&self) -> Vec<u8> {
        let mut out = self.perm.to_le_bytes().to_vec();
        out.extend_from_slice(self.xattr.as_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        let (p, x) = bytes.split_at_checked(4)?;
        Some(UnlinkUnlessMarked {
            perm: u32::from_le_bytes(p.try_into().ok()?),
            xattr: String::from_utf8(x.to_vec()).ok()?,
        })
    }
}

/// Tells the leaf that whoever asked for this read can send its data straight out of a pipe
/// ([`crate::Buf::from_pipe`]): protocol/server sets it on large reads, and storage/posix
/// then fills a pipe with `splice` instead of copying the data into memory. Any translator
/// in between still sees ordinary bytes if it looks (the pipe is drained on first look).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PipePayloadOk;

impl CtxExtension for PipePayloadOk {
    const KEY: &'static str = "srv/pipe-payload-ok";
    fn encode(&self) -> Vec<u8> {
        Vec::new()
    }
    fn decode(_: &[u8]) -> Option<Self> {
        Some(PipePayloadOk)
    }
}

/// Says that the access mode of the fd an `lk` goes through was already checked by whoever
/// sent it, as the caller's kind of lock requires: the Linux kernel checks it for fcntl(2)
/// locks (EBADF for a write lock through a read-only fd) before a FUSE host sees them, and
/// flock(2) locks, which a FUSE host sends as whole-file `lk` fops too, need no mode at all
/// (`flock -x` on a file opened read-only is fine). features/locks then skips its own
/// check. Crosses the wire.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LkModeChecked;

impl CtxExtension for LkModeChecked {
    const KEY: &'static str = "xlfs/lk-mode-checked";
    fn encode(&self) -> Vec<u8> {
        Vec::new()
    }
    fn decode(_: &[u8]) -> Option<Self> {
        Some(LkModeChecked)
    }
}

impl CtxExtension for ClientId {
    const KEY: &'static str = "srv/client-id";
    fn encode(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(ClientId(u64::from_le_bytes(bytes.try_into().ok()?)))
    }
}

/// Asks the leaf for xattrs in the replies of `lookup`, `create`, `mkdir`, `mknod`,
/// `symlink`, `link` and in each `readdirp` entry ([`Entry::xattrs`](crate::Entry::xattrs),
/// [`DirEntry::xattrs`](crate::DirEntry::xattrs)): the ones named exactly, and every one whose
/// name starts with one of the prefixes. Crosses the wire.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct XattrReq {
    pub names: Vec<String>,
    pub prefixes: Vec<String>,
}

impl XattrReq {
    /// Whether xattr `name` is asked for.
    pub fn wants(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.prefixes.is_empty()
    }
}

impl CtxExtension for XattrReq {
    const KEY: &'static str = "xlfs/xattr-req";
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_strings(&mut out, &self.names);
        put_strings(&mut out, &self.prefixes);
        out
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut at = bytes;
        let names = take_strings(&mut at)?;
        let prefixes = take_strings(&mut at)?;
        at.is_empty().then_some(XattrReq { names, prefixes })
    }
}

/// Xattrs that `create`, `mkdir`, `mknod` and `symlink` set on the new object atomically: the
/// name never appears without them (a distribute link file always has its target, a replica's
/// new file its pending counters). Crosses the wire.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CreateXattrs(pub Vec<(String, Vec<u8>)>);

impl CtxExtension for CreateXattrs {
    const KEY: &'static str = "xlfs/create-xattrs";
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, self.0.len());
        for (k, v) in &self.0 {
            put_bytes(&mut out, k.as_bytes());
            put_bytes(&mut out, v);
        }
        out
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut at = bytes;
        let n = take_u32(&mut at)?;
        let mut xs = Vec::new();
        for _ in 0..n {
            let k = String::from_utf8(take_bytes(&mut at)?.to_vec()).ok()?;
            xs.push((k, take_bytes(&mut at)?.to_vec()));
        }
        at.is_empty().then_some(CreateXattrs(xs))
    }
}

/// One lock of a [`LocksAround`]: a whole-object write `inodelk` in `domain`, or an
/// `entrylk` of `name` in directory `parent` (the whole directory when `name` is empty).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum AroundLock {
    Inode {
        domain: String,
        gfid: crate::types::Gfid,
    },
    Entry {
        domain: String,
        parent: crate::types::Gfid,
        name: String,
    },
}

/// Locks that features/locks takes just before an `xattrop` and gives back just after it,
/// for the caller's lock owner (its connection's client and the context's `lk_owner`):
/// cluster/replicate's lock and pre-op in one round trip, and its post-op and unlock in one
/// more (GlusterFS sends them as separate fops, or as compound fops). `take` is non-blocking
/// and all or nothing: when one is held by another owner, the answer is EAGAIN and neither
/// any lock nor the xattrop stays done; when the xattrop fails, `take` is given back too.
/// `give` is given back after the xattrop whatever it answered. A brick that understands it
/// answers `getxattr` of [`LOCKS_AROUND_XATTR`] (on any object); a caller must ask before
/// relying on it (a brick without it would run the xattrop unlocked). Crosses the wire.
///
/// A `create` may carry one too (`take` only): the locks are taken just before the file is
/// made (a new GFID: nobody else can hold them) and kept for the caller when the create
/// succeeds, given back when it fails. cluster/replicate creates a file with its eager hold
/// so (the pre-op rides in the create's [`CreateXattrs`]). A brick honours that when it
/// answers `getxattr` of [`LOCKS_AROUND_CREATE_XATTR`].
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct LocksAround {
    pub take: Vec<AroundLock>,
    pub give: Vec<AroundLock>,
}

/// The virtual xattr a brick's features/locks answers (`1`) when it honours [`LocksAround`].
pub const LOCKS_AROUND_XATTR: &str = "xlfs.locks-around";

/// The virtual xattr a brick's features/locks answers (`1`) when it also takes the `take`
/// locks of a `create`'s [`LocksAround`] (a brick that answers only [`LOCKS_AROUND_XATTR`]
/// would make the file unlocked).
pub const LOCKS_AROUND_CREATE_XATTR: &str = "xlfs.locks-around-create";

fn put_locks(out: &mut Vec<u8>, v: &[AroundLock]) {
    put_u32(out, v.len());
    for l in v {
        match l {
            AroundLock::Inode { domain, gfid } => {
                out.push(0);
                put_bytes(out, domain.as_bytes());
                put_bytes(out, &gfid.0);
                put_bytes(out, b"");
            }
            AroundLock::Entry {
                domain,
                parent,
                name,
            } => {
                out.push(1);
                put_bytes(out, domain.as_bytes());
                put_bytes(out, &parent.0);
                put_bytes(out, name.as_bytes());
            }
        }
    }
}

fn take_locks(at: &mut &[u8]) -> Option<Vec<AroundLock>> {
    let n = take_u32(at)?;
    let mut v = Vec::new();
    for _ in 0..n {
        let (&tag, rest) = at.split_first()?;
        *at = rest;
        let domain = String::from_utf8(take_bytes(at)?.to_vec()).ok()?;
        let gfid = crate::types::Gfid(take_bytes(at)?.try_into().ok()?);
        let name = String::from_utf8(take_bytes(at)?.to_vec()).ok()?;
        v.push(match tag {
            0 => AroundLock::Inode { domain, gfid },
            1 => AroundLock::Entry {
                domain,
                parent: gfid,
                name,
            },
            _ => return None,
        });
    }
    Some(v)
}

impl CtxExtension for LocksAround {
    const KEY: &'static str = "xlfs/locks-around";
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_locks(&mut out, &self.take);
        put_locks(&mut out, &self.give);
        out
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut at = bytes;
        let take = take_locks(&mut at)?;
        let give = take_locks(&mut at)?;
        at.is_empty().then_some(LocksAround { take, give })
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

fn put_strings(out: &mut Vec<u8>, v: &[String]) {
    put_u32(out, v.len());
    for s in v {
        put_bytes(out, s.as_bytes());
    }
}

fn take_u32(at: &mut &[u8]) -> Option<u32> {
    let (n, rest) = at.split_first_chunk::<4>()?;
    *at = rest;
    Some(u32::from_le_bytes(*n))
}

fn take_bytes<'a>(at: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(at)? as usize;
    if at.len() < n {
        return None;
    }
    let (b, rest) = at.split_at(n);
    *at = rest;
    Some(b)
}

fn take_strings(at: &mut &[u8]) -> Option<Vec<String>> {
    let n = take_u32(at)?;
    // Each string takes at least its 4-byte length: a hostile count cannot allocate much.
    if n as usize > at.len() / 4 {
        return None;
    }
    (0..n)
        .map(|_| String::from_utf8(take_bytes(at)?.to_vec()).ok())
        .collect()
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
        let keys: Vec<&str> = cx3.extensions().map(|(k, _)| k).collect();
        assert_eq!(keys, ["test/tag", "srv/client-id"]);
        assert!(
            !cx3.to_builder()
                .without::<Tag>()
                .build()
                .has_ext("test/tag")
        );
    }

    #[test]
    fn scopes_follow_key_prefixes() {
        assert_eq!(ExtScope::of(GfidReq::KEY), ExtScope::Wire);
        assert_eq!(ExtScope::of(XattrReq::KEY), ExtScope::Wire);
        assert_eq!(ExtScope::of(CreateXattrs::KEY), ExtScope::Wire);
        assert_eq!(ExtScope::of(ClientId::KEY), ExtScope::ServerSet);
        assert_eq!(ExtScope::of(PipePayloadOk::KEY), ExtScope::ServerSet);
        assert_eq!(ExtScope::of(crate::BackingWanted::KEY), ExtScope::Local);
    }

    #[test]
    fn xattr_extensions_round_trip_and_refuse_garbage() {
        let r = XattrReq {
            names: vec!["trusted.gfid".into()],
            prefixes: vec!["trusted.afr.".into(), String::new()],
        };
        assert_eq!(XattrReq::decode(&r.encode()), Some(r.clone()));
        assert!(r.wants("trusted.afr.x") && r.wants("anything"));
        let c = CreateXattrs(vec![(
            "trusted.glusterfs.dht.linkto".into(),
            b"b1\0".to_vec(),
        )]);
        assert_eq!(CreateXattrs::decode(&c.encode()), Some(c.clone()));
        let mut bad = r.encode();
        bad.push(0);
        assert_eq!(XattrReq::decode(&bad), None);
        assert_eq!(XattrReq::decode(&[0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(CreateXattrs::decode(&[1, 0, 0, 0, 9]), None);
    }

    #[test]
    fn locks_around_round_trips_and_refuses_garbage() {
        let g = crate::types::Gfid([7; 16]);
        let a = LocksAround {
            take: vec![
                AroundLock::Inode {
                    domain: "r-replicate-0".into(),
                    gfid: g,
                },
                AroundLock::Entry {
                    domain: "r-replicate-0".into(),
                    parent: g,
                    name: "f".into(),
                },
            ],
            give: vec![AroundLock::Entry {
                domain: "d".into(),
                parent: g,
                name: String::new(),
            }],
        };
        assert_eq!(LocksAround::decode(&a.encode()), Some(a.clone()));
        let mut bad = a.encode();
        bad.push(0);
        assert_eq!(LocksAround::decode(&bad), None);
        let mut tag = a.encode();
        tag[4] = 9;
        assert_eq!(LocksAround::decode(&tag), None);
    }
}
