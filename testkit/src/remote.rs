//! [`Remote`]: one file "on the server" behind a [`MockChild`](crate::MockChild), for
//! testing caching translators — the test changes the file behind the translator's back, as
//! another client would, and sees exactly which reads went down.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlator_api::Ctx;
//! use xlfs_testkit::MockChild;
//! use xlfs_testkit::fixtures::reads;
//! use xlfs_testkit::remote::{Remote, byte, rd};
//!
//! let (child, h) = MockChild::new();
//! let remote = Remote::new(100);
//! remote.serve(&h);
//! let b = child.readv(&Ctx::root(), rd(1), 10, 4).await.unwrap();
//! assert_eq!(&*b.data, &[byte(10), byte(11), byte(12), byte(13)]);
//! remote.write(0, b"changed");
//! assert_eq!(remote.iatt().mtime.sec, 2);
//! assert_eq!(reads(&h), [(10, 4)]);
//! # }
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::{Buf, Entry, Fd, FileType, Fop, Gfid, Iatt, ReadReply, Timespec, WriteReply};

use crate::fixtures::{fd, gfid};
use crate::mock::{FopCall, FopReply, MockHandle};

/// The GFID of the [`Remote`] file: [`gfid(1)`](crate::fixtures::gfid).
pub const FILE: Gfid = gfid(1);

/// Byte `i` of a [`Remote`] file's initial content (`i % 251`: no short period).
pub fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

/// A read-only fd numbered `id` on [`FILE`].
pub fn rd(id: u64) -> Fd {
    fd(id, FILE, libc::O_RDONLY)
}

/// A read-write fd numbered `id` on [`FILE`].
pub fn rw(id: u64) -> Fd {
    fd(id, FILE, libc::O_RDWR)
}

/// A regular file [`FILE`] (mode 0644) that a mock child serves once [`Remote::serve`] is
/// called: `readv`, `writev`, `fstat`, `stat`, `lookup` and `setattr`/`fsetattr` (size only)
/// act on it, whatever GFID or fd they name. Every change bumps its mtime (seconds, from 1).
/// Clones share the file.
#[derive(Clone)]
pub struct Remote {
    /// The content.
    pub data: Arc<Mutex<Vec<u8>>>,
    /// The modification time, in seconds.
    pub mtime: Arc<AtomicI64>,
}

impl Remote {
    /// A file of `len` bytes, byte `i` being [`byte(i)`](byte), with mtime 1.
    pub fn new(len: u64) -> Remote {
        Remote {
            data: Arc::new(Mutex::new((0..len).map(byte).collect())),
            mtime: Arc::new(AtomicI64::new(1)),
        }
    }

    /// The file's current attributes.
    pub fn iatt(&self) -> Iatt {
        Iatt {
            gfid: FILE,
            kind: FileType::Regular,
            perm: 0o644,
            nlink: 1,
            size: self.data.lock().expect("lock").len() as u64,
            mtime: Timespec {
                sec: self.mtime.load(Ordering::SeqCst),
                nsec: 0,
            },
            ..Iatt::default()
        }
    }

    /// Up to `size` bytes from `offset` (fewer at the end of the file).
    pub fn read(&self, offset: u64, size: u64) -> Vec<u8> {
        let d = self.data.lock().expect("lock");
        let start = (offset as usize).min(d.len());
        let end = (offset.saturating_add(size) as usize).min(d.len());
        d[start..end].to_vec()
    }

    /// A change made by someone else (another client): writes `bytes` at `offset`, growing
    /// the file if needed.
    pub fn write(&self, offset: u64, bytes: &[u8]) {
        let mut d = self.data.lock().expect("lock");
        let end = offset as usize + bytes.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[offset as usize..end].copy_from_slice(bytes);
        self.mtime.fetch_add(1, Ordering::SeqCst);
    }

    fn truncate(&self, size: u64) {
        self.data.lock().expect("lock").resize(size as usize, 0);
        self.mtime.fetch_add(1, Ordering::SeqCst);
    }

    /// Answers the mock's fops from this file (installs handlers; queued replies still win).
    pub fn serve(&self, h: &MockHandle) {
        let r = self.clone();
        h.on(Fop::Readv, move |c| match c {
            FopCall::Readv { offset, size, .. } => FopReply::Readv(Ok(ReadReply::data(
                Buf::from_vec(r.read(*offset, u64::from(*size))),
            ))),
            _ => unreachable!(),
        });
        let r = self.clone();
        h.on(Fop::Writev, move |c| match c {
            FopCall::Writev { offset, data, .. } => {
                r.write(*offset, data);
                FopReply::Writev(Ok(WriteReply::written(data.len() as u64)))
            }
            _ => unreachable!(),
        });
        let r = self.clone();
        h.on(Fop::Fstat, move |_| FopReply::Fstat(Ok(r.iatt())));
        let r = self.clone();
        h.on(Fop::Stat, move |_| FopReply::Stat(Ok(r.iatt())));
        let r = self.clone();
        h.on(Fop::Lookup, move |_| {
            FopReply::Lookup(Ok(Entry::new(r.iatt())))
        });
        let r = self.clone();
        h.on(Fop::Setattr, move |c| match c {
            FopCall::Setattr { attr, .. } => {
                if let ROption::RSome(s) = attr.size {
                    r.truncate(s);
                }
                FopReply::Setattr(Ok(r.iatt()))
            }
            _ => unreachable!(),
        });
        let r = self.clone();
        h.on(Fop::Fsetattr, move |c| match c {
            FopCall::Fsetattr { attr, .. } => {
                if let ROption::RSome(s) = attr.size {
                    r.truncate(s);
                }
                FopReply::Fsetattr(Ok(r.iatt()))
            }
            _ => unreachable!(),
        });
    }
}
