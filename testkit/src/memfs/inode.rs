//! The inode table: GFID-addressed objects, directories with stable cookies, link counts, open
//! counts and space accounting. No permission logic here; see `namespace.rs` and friends.

use std::collections::{BTreeMap, HashMap};

use xlator_api::{Errno, FdId, FileType, Gfid, Iatt, Timespec};

use super::data::{CHUNK, Data};

/// `st_dev` of every object.
const DEV: u64 = 0x6d65_6d66; // "memf"

/// What an object holds besides its attributes.
pub(crate) enum Body {
    File(Data),
    Dir(Dir),
    Symlink(String),
    /// FIFOs, sockets and device nodes.
    Special,
}

/// A directory: names to GFIDs, and a cookie per entry for `readdirp`. Cookies grow
/// monotonically, so continuing after a cookie never repeats an entry, even when entries
/// before it are removed.
pub(crate) struct Dir {
    pub(crate) names: HashMap<String, (Gfid, u64)>,
    pub(crate) order: BTreeMap<u64, String>,
    next_cookie: u64,
    /// The directory holding this one (the root's is itself).
    pub(crate) parent: Gfid,
}

impl Dir {
    pub(crate) fn new(parent: Gfid) -> Dir {
        Dir {
            names: HashMap::new(),
            order: BTreeMap::new(),
            next_cookie: 1,
            parent,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<Gfid> {
        self.names.get(name).map(|(g, _)| *g)
    }

    pub(crate) fn insert(&mut self, name: &str, gfid: Gfid) {
        self.remove(name);
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        self.names.insert(name.to_owned(), (gfid, cookie));
        self.order.insert(cookie, name.to_owned());
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<Gfid> {
        let (gfid, cookie) = self.names.remove(name)?;
        self.order.remove(&cookie);
        Some(gfid)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// One object.
pub(crate) struct Inode {
    pub(crate) attr: Iatt,
    pub(crate) body: Body,
    pub(crate) xattrs: BTreeMap<String, Vec<u8>>,
    /// Open (non-anonymous) fds; an unlinked object lives until the last is released.
    pub(crate) open: u32,
}

impl Inode {
    pub(crate) fn dir(&self) -> Result<&Dir, Errno> {
        match &self.body {
            Body::Dir(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    pub(crate) fn dir_mut(&mut self) -> Result<&mut Dir, Errno> {
        match &mut self.body {
            Body::Dir(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// The file data; EISDIR for directories, EINVAL for other kinds.
    pub(crate) fn data(&self) -> Result<&Data, Errno> {
        match &self.body {
            Body::File(d) => Ok(d),
            Body::Dir(_) => Err(Errno::EISDIR),
            _ => Err(Errno::EINVAL),
        }
    }

    pub(crate) fn data_mut(&mut self) -> Result<&mut Data, Errno> {
        match &mut self.body {
            Body::File(d) => Ok(d),
            Body::Dir(_) => Err(Errno::EISDIR),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Refreshes `size`/`blocks` of a regular file from its data.
    pub(crate) fn sync_size(&mut self) {
        if let Body::File(d) = &self.body {
            self.attr.size = d.size();
            self.attr.blocks = d.chunks() * (CHUNK / 512);
        }
    }

    pub(crate) fn touch_mtime(&mut self, now: Timespec) {
        self.attr.mtime = now;
        self.attr.ctime = now;
    }
}

/// All objects of one volume.
pub(crate) struct Table {
    pub(crate) inodes: HashMap<Gfid, Inode>,
    /// Open fds by id, for open-unlinked lifetime.
    pub(crate) fds: HashMap<FdId, Gfid>,
    next_ino: u64,
    /// Allocated data chunks, and the most there may be.
    pub(crate) used_chunks: u64,
    pub(crate) capacity_chunks: u64,
    pub(crate) max_inodes: u64,
}

/// Attributes of a new object.
pub(crate) struct NewInode {
    pub(crate) kind: FileType,
    pub(crate) perm: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) rdev: u64,
    pub(crate) body: Body,
}

impl Table {
    /// A volume with only the root directory (mode 0755, owned by root).
    pub(crate) fn new(capacity_bytes: u64, max_inodes: u64) -> Table {
        let mut t = Table {
            inodes: HashMap::new(),
            fds: HashMap::new(),
            next_ino: 1,
            used_chunks: 0,
            capacity_chunks: capacity_bytes / CHUNK,
            max_inodes,
        };
        let root = NewInode {
            kind: FileType::Directory,
            perm: 0o755,
            uid: 0,
            gid: 0,
            rdev: 0,
            body: Body::Dir(Dir::new(Gfid::ROOT)),
        };
        t.insert(Gfid::ROOT, root, Timespec::now());
        t
    }

    pub(crate) fn get(&self, gfid: Gfid) -> Result<&Inode, Errno> {
        self.inodes.get(&gfid).ok_or(Errno::ESTALE)
    }

    pub(crate) fn get_mut(&mut self, gfid: Gfid) -> Result<&mut Inode, Errno> {
        self.inodes.get_mut(&gfid).ok_or(Errno::ESTALE)
    }

    pub(crate) fn attr(&self, gfid: Gfid) -> Result<Iatt, Errno> {
        self.get(gfid).map(|i| i.attr)
    }

    /// Whether `gfid` may name a new object: EEXIST when an object (even an unlinked one
    /// still open) has it, or it is the root's; EINVAL for the null GFID.
    pub(crate) fn gfid_free(&self, gfid: Gfid) -> Result<(), Errno> {
        if gfid.is_null() {
            Err(Errno::EINVAL)
        } else if gfid == Gfid::ROOT || self.inodes.contains_key(&gfid) {
            Err(Errno::EEXIST)
        } else {
            Ok(())
        }
    }

    /// Adds an object with the GFID `want` (see [`Table::gfid_free`]) or a fresh one
    /// (ENOSPC when out of inodes); `parent` is used only for directories.
    pub(crate) fn create(
        &mut self,
        new: NewInode,
        parent: Gfid,
        now: Timespec,
        want: Option<Gfid>,
    ) -> Result<Gfid, Errno> {
        if let Some(g) = want {
            self.gfid_free(g)?;
        }
        if self.inodes.len() as u64 >= self.max_inodes {
            return Err(Errno::ENOSPC);
        }
        let gfid = match want {
            Some(g) => g,
            None => {
                let mut g = Gfid::random();
                while self.inodes.contains_key(&g) || g == Gfid::ROOT || g.is_null() {
                    g = Gfid::random();
                }
                g
            }
        };
        let new = match new.body {
            Body::Dir(_) => NewInode {
                body: Body::Dir(Dir::new(parent)),
                ..new
            },
            _ => new,
        };
        self.insert(gfid, new, now);
        Ok(gfid)
    }

    fn insert(&mut self, gfid: Gfid, new: NewInode, now: Timespec) {
        let (nlink, size, blocks) = match &new.body {
            Body::Dir(_) => (2, CHUNK, CHUNK / 512),
            Body::Symlink(t) => (1, t.len() as u64, 0),
            _ => (1, 0, 0),
        };
        let ino = self.next_ino;
        self.next_ino += 1;
        let attr = Iatt {
            gfid,
            ino,
            dev: DEV,
            kind: new.kind,
            perm: new.perm & 0o7777,
            nlink,
            uid: new.uid,
            gid: new.gid,
            rdev: new.rdev,
            size,
            blksize: CHUNK as u32,
            blocks,
            atime: now,
            mtime: now,
            ctime: now,
        };
        let inode = Inode {
            attr,
            body: new.body,
            xattrs: BTreeMap::new(),
            open: 0,
        };
        self.inodes.insert(gfid, inode);
    }

    /// Whether `dir` is `ancestor` or lies below it.
    pub(crate) fn is_within(&self, dir: Gfid, ancestor: Gfid) -> bool {
        let mut cur = dir;
        loop {
            if cur == ancestor {
                return true;
            }
            match self.inodes.get(&cur).and_then(|i| i.dir().ok()) {
                Some(d) if d.parent != cur => cur = d.parent,
                _ => return false,
            }
        }
    }

    /// Drops the object if it has no names and no open fds left.
    pub(crate) fn reap(&mut self, gfid: Gfid) {
        let dead = self
            .inodes
            .get(&gfid)
            .is_some_and(|i| i.attr.nlink == 0 && i.open == 0);
        if dead
            && gfid != Gfid::ROOT
            && let Some(Inode {
                body: Body::File(d),
                ..
            }) = self.inodes.remove(&gfid)
        {
            self.used_chunks -= d.chunks();
        }
    }

    /// Fails with ENOSPC unless `chunks` more chunks fit.
    pub(crate) fn reserve(&self, chunks: u64) -> Result<(), Errno> {
        if self.used_chunks.saturating_add(chunks) > self.capacity_chunks {
            Err(Errno::ENOSPC)
        } else {
            Ok(())
        }
    }

    /// Runs `f` on the data of `gfid`, keeping space accounting and `size`/`blocks` right.
    pub(crate) fn with_data<R>(
        &mut self,
        gfid: Gfid,
        f: impl FnOnce(&mut Data) -> R,
    ) -> Result<R, Errno> {
        let inode = self.inodes.get_mut(&gfid).ok_or(Errno::ESTALE)?;
        let data = inode.data_mut()?;
        let before = data.chunks();
        let r = f(data);
        let after = data.chunks();
        inode.sync_size();
        self.used_chunks = self.used_chunks + after - before;
        Ok(r)
    }

    /// Records an open fd on `gfid`.
    pub(crate) fn register_fd(&mut self, id: FdId, gfid: Gfid) {
        if id == FdId::ANONYMOUS {
            return;
        }
        if let Some(old) = self.fds.insert(id, gfid) {
            self.close_on(old);
        }
        if let Some(i) = self.inodes.get_mut(&gfid) {
            i.open += 1;
        }
    }

    /// Forgets an fd; unknown ids are ignored (a parent may release fds it never opened here).
    pub(crate) fn release_fd(&mut self, id: FdId) {
        if let Some(gfid) = self.fds.remove(&id) {
            self.close_on(gfid);
        }
    }

    fn close_on(&mut self, gfid: Gfid) {
        if let Some(i) = self.inodes.get_mut(&gfid) {
            i.open = i.open.saturating_sub(1);
        }
        self.reap(gfid);
    }
}
