//! Test support: building io-cache over a child, a scripted "remote" file behind a mock child,
//! and reading counters from the JSON dump.
#![allow(dead_code)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use xlator_api::abi_stable::std_types::ROption;
use xlator_api::sdk::instantiate;
use xlator_api::{
    Buf, DumpFormat, Entry, Fd, FdId, FileType, Fop, Gfid, Iatt, InitArgs, Options, Subvol,
    Timespec, Translator, XlatorOptions,
};
use xlfs_core::services::host_services;
use xlfs_io_cache::IoCache;
use xlfs_testkit::mock::{FopCall, FopReply, MockHandle};

/// The options of `T`: every key at its default, then `set` (checked against the schema).
pub fn options_for<T: Translator>(set: &[(&str, &str)]) -> Options {
    let schema = T::Options::schema();
    let mut o = Options::new();
    for s in &schema {
        o.set(&s.key, &s.default);
    }
    for (k, v) in set {
        let spec = schema
            .iter()
            .find(|s| s.key.as_str() == *k)
            .unwrap_or_else(|| panic!("{} has no option {k:?}", T::TYPE));
        spec.check(v)
            .unwrap_or_else(|e| panic!("option {k:?}: {e}"));
        o.set(k, v);
    }
    o
}

/// An instance of `T` over `child`.
pub fn build<T: Translator>(set: &[(&str, &str)], child: Subvol) -> Subvol {
    instantiate::<T>(InitArgs {
        name: T::TYPE.into(),
        options: options_for::<T>(set),
        children: vec![child].into(),
        services: host_services(),
    })
    .unwrap_or_else(|e| panic!("{} builds: {e}", T::TYPE))
}

/// io-cache with 4 KiB pages over `child`.
pub fn io_cache(set: &[(&str, &str)], child: Subvol) -> Subvol {
    let mut all = vec![("page-size", "4KiB")];
    all.extend_from_slice(set);
    build::<IoCache>(&all, child)
}

pub const PS: u64 = 4096;

pub fn gfid(n: u8) -> Gfid {
    let mut b = [0x11; 16];
    b[15] = n;
    Gfid(b)
}

pub fn fd(id: u64, gfid: Gfid, flags: i32) -> Fd {
    Fd {
        id: FdId(id),
        gfid,
        flags,
    }
}

pub fn rd(id: u64) -> Fd {
    fd(id, gfid(1), libc::O_RDONLY)
}

pub fn rw(id: u64) -> Fd {
    fd(id, gfid(1), libc::O_RDWR)
}

/// Byte `i` of the initial remote content.
pub fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

/// A file "on the server" behind a mock child: readv, writev, fstat, stat, lookup and
/// setattr/fsetattr (size) act on it; every change bumps its mtime.
#[derive(Clone)]
pub struct Remote {
    pub data: Arc<Mutex<Vec<u8>>>,
    pub mtime: Arc<AtomicI64>,
}

impl Remote {
    pub fn new(len: u64) -> Remote {
        Remote {
            data: Arc::new(Mutex::new((0..len).map(byte).collect())),
            mtime: Arc::new(AtomicI64::new(1)),
        }
    }

    pub fn iatt(&self) -> Iatt {
        Iatt {
            gfid: gfid(1),
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

    pub fn read(&self, offset: u64, size: u64) -> Vec<u8> {
        let d = self.data.lock().expect("lock");
        let start = (offset as usize).min(d.len());
        let end = (offset.saturating_add(size) as usize).min(d.len());
        d[start..end].to_vec()
    }

    /// A change made by someone else (another client).
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

    /// Answers the mock's fops from this file.
    pub fn serve(&self, h: &MockHandle) {
        let r = self.clone();
        h.on(Fop::Readv, move |c| match c {
            FopCall::Readv { offset, size, .. } => {
                FopReply::Readv(Ok(Buf::from_vec(r.read(*offset, u64::from(*size)))))
            }
            _ => unreachable!(),
        });
        let r = self.clone();
        h.on(Fop::Writev, move |c| match c {
            FopCall::Writev { offset, data, .. } => {
                r.write(*offset, data);
                FopReply::Writev(Ok(data.len() as u64))
            }
            _ => unreachable!(),
        });
        let r = self.clone();
        h.on(Fop::Fstat, move |_| FopReply::Fstat(Ok(r.iatt())));
        let r = self.clone();
        h.on(Fop::Stat, move |_| FopReply::Stat(Ok(r.iatt())));
        let r = self.clone();
        h.on(Fop::Lookup, move |_| {
            FopReply::Lookup(Ok(Entry { attr: r.iatt() }))
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

/// A counter from `sv`'s JSON dump.
pub fn counter(sv: &Subvol, key: &str) -> u64 {
    let j = sv.dump(DumpFormat::Json);
    let pat = format!("\"{key}\": ");
    let at = j.find(&pat).unwrap_or_else(|| panic!("{key} not in {j}")) + pat.len();
    j[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {j}"))
}

/// The readv calls that reached the child: (offset, size).
pub fn reads(h: &MockHandle) -> Vec<(u64, u32)> {
    h.calls_of(Fop::Readv)
        .into_iter()
        .filter_map(|c| match c {
            FopCall::Readv { offset, size, .. } => Some((offset, size)),
            _ => None,
        })
        .collect()
}
