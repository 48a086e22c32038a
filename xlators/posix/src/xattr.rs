//! Extended attributes and xattrop. Brick-internal names (the GFID xattrs, `*.xlfs.*`) are
//! hidden from listings and cannot be set or removed; `trusted.gfid` reads back the object's
//! GFID whatever namespace stores it. Callers other than root cannot touch `trusted.*` or
//! `security.*` (the brick keeps CAP_SYS_ADMIN while running as the caller, so this check is
//! ours).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};

use xlator_api::abi_stable::std_types::{RString, RVec};
use xlator_api::{Buf, Errno, Fd, FdId, Gfid, Xattr, XattropOp, Xattrs};

use crate::brick::Brick;
use crate::creds::Caller;
use crate::gfid::is_internal;
use crate::stats::Stats;
use crate::sys::{self, XTarget};

pub(crate) fn privileged(name: &str) -> bool {
    name.starts_with("trusted.") || name.starts_with("security.")
}

/// Checks a name a caller wants to change.
fn writable_name(c: &Caller, name: &str) -> Result<CString, Errno> {
    if name.is_empty() {
        return Err(Errno::EINVAL);
    }
    if is_internal(name) || (privileged(name) && !c.is_root()) {
        return Err(Errno::EPERM);
    }
    sys::cstr(name)
}

/// Runs `f` on the xattr target of an object: its open fd, or its handle through /proc.
fn with_target<R>(
    b: &Brick,
    fd: Option<&Fd>,
    g: Gfid,
    f: impl FnOnce(XTarget<'_>) -> Result<R, Errno>,
) -> Result<R, Errno> {
    if let Some(fd) = fd.filter(|fd| fd.id != FdId::ANONYMOUS) {
        let of = b.fds.get(fd.id)?;
        return f(XTarget::Fd(of.as_fd().as_raw_fd()));
    }
    let obj = b.h.resolve(g)?;
    let p = sys::proc_path(obj.as_fd());
    f(XTarget::Follow(&p))
}

impl Brick {
    pub fn setxattr(
        &self,
        c: &Caller,
        fd: Option<&Fd>,
        g: Gfid,
        x: &Xattr,
        flags: i32,
    ) -> Result<(), Errno> {
        let name = writable_name(c, &x.name)?;
        with_target(self, fd, g, |t| sys::setxattr(t, &name, &x.value, flags))
    }

    pub fn getxattr(&self, c: &Caller, fd: Option<&Fd>, g: Gfid, name: &str) -> Result<Buf, Errno> {
        if name == "trusted.gfid" {
            // Verify the object exists, then report its identity.
            with_target(self, fd, g, |_| Ok(()))?;
            return Ok(Buf::copy_from_slice(&g.0));
        }
        if is_internal(name) || (privileged(name) && !c.is_root()) {
            return Err(Errno::ENODATA);
        }
        let n = sys::cstr(name)?;
        with_target(self, fd, g, |t| sys::getxattr(t, &n)).map(Buf::from_vec)
    }

    pub fn listxattr(&self, c: &Caller, g: Gfid) -> Result<RVec<RString>, Errno> {
        let names = with_target(self, None, g, sys::listxattr)?;
        Ok(names
            .into_iter()
            .filter(|n| !is_internal(n) && (c.is_root() || !privileged(n)))
            .map(RString::from)
            .collect())
    }

    pub fn removexattr(
        &self,
        c: &Caller,
        fd: Option<&Fd>,
        g: Gfid,
        name: &str,
    ) -> Result<(), Errno> {
        let n = writable_name(c, name)?;
        with_target(self, fd, g, |t| sys::removexattr(t, &n))
    }

    /// Several values at once, under the rules of [`getxattr`](Self::getxattr); names the
    /// object lacks (or hides from this caller) are left out.
    pub fn getxattrs(&self, c: &Caller, g: Gfid, names: &[RString]) -> Result<Xattrs, Errno> {
        with_target(self, None, g, |t| {
            let mut out = RVec::new();
            for name in names {
                let value = if name.as_str() == "trusted.gfid" {
                    g.0.to_vec()
                } else if is_internal(name) || (privileged(name) && !c.is_root()) {
                    continue;
                } else {
                    match sys::getxattr(t, &sys::cstr(name)?) {
                        Ok(v) => v,
                        Err(Errno::ENODATA) => continue,
                        Err(e) => return Err(e),
                    }
                };
                out.push(Xattr {
                    name: name.clone(),
                    value: Buf::from_vec(value),
                });
            }
            Ok(out)
        })
    }

    /// Sets every xattr of `xs` (each with `flags`), all or none: every name is checked
    /// before any is written, and when a write fails part way the ones already written get
    /// their previous value (or absence) back. Under the GFID's stripe lock, as xattrop.
    pub fn setxattrs(&self, c: &Caller, g: Gfid, xs: &Xattrs, flags: i32) -> Result<(), Errno> {
        let names = xs
            .iter()
            .map(|x| writable_name(c, &x.name))
            .collect::<Result<Vec<_>, _>>()?;
        let _lock = self.stripe(g);
        with_target(self, None, g, |t| {
            let mut undo = Restore::new(t, &self.stats);
            for (x, name) in xs.iter().zip(&names) {
                let old = current(t, name)?;
                sys::setxattr(t, name, &x.value, flags)?;
                undo.written(name, old);
            }
            undo.keep();
            Ok(())
        })
    }

    /// Adds each big-endian lane of every value to the stored one (missing: zeros; the
    /// shorter of the two is padded with zero lanes) under the GFID's stripe lock; returns
    /// the new values. All or nothing: every operand and stored value is checked (whole
    /// lanes, no name twice) before anything is written, and a write failing part way puts
    /// back the values already written. A key whose operand is all zeros is only read: a
    /// missing one is not created (its reply is zeros of the operand's length) and nothing
    /// is written, so its ctime stays (how replicate reads pending counters).
    pub fn xattrop(
        &self,
        c: &Caller,
        fd: Option<&Fd>,
        g: Gfid,
        op: XattropOp,
        xs: &Xattrs,
    ) -> Result<Xattrs, Errno> {
        let width = match op {
            XattropOp::AddArray32 => 4,
            XattropOp::AddArray64 => 8,
        };
        let names = xs
            .iter()
            .map(|x| writable_name(c, &x.name))
            .collect::<Result<Vec<_>, _>>()?;
        if xs.iter().any(|x| !x.value.len().is_multiple_of(width)) {
            return Err(Errno::EINVAL);
        }
        let mut seen = std::collections::HashSet::new();
        if !names.iter().all(|n| seen.insert(n)) {
            return Err(Errno::EINVAL);
        }
        let _lock = self.stripe(g);
        with_target(self, fd, g, |t| {
            // Read and compute everything first.
            let mut plan = Vec::with_capacity(xs.len());
            for (x, name) in xs.iter().zip(&names) {
                let cur = current(t, name)?;
                let stored = cur.as_deref().unwrap_or_default();
                let new = add_lanes(stored, &x.value, width).ok_or(Errno::EINVAL)?;
                let write = x.value.as_slice().iter().any(|b| *b != 0);
                plan.push((name, cur, new, write));
            }
            // The heal index entry exists before any pending counter becomes non-zero
            // (index.rs).
            let writes: Vec<(&str, &[u8])> = plan
                .iter()
                .zip(xs.iter())
                .filter(|((_, _, _, write), _)| *write)
                .map(|((_, _, new, _), x)| (x.name.as_str(), new.as_slice()))
                .collect();
            self.index_before(g, &writes)?;
            let mut undo = Restore::new(t, &self.stats);
            let mut out = RVec::new();
            for ((name, cur, new, write), x) in plan.iter().zip(xs.iter()) {
                if *write {
                    sys::setxattr(t, name, new, 0)?;
                    undo.written(name, cur.clone());
                } else {
                    Stats::bump(&self.stats.xattrop_reads);
                }
                out.push(Xattr {
                    name: x.name.clone(),
                    value: Buf::copy_from_slice(new),
                });
            }
            undo.keep();
            self.index_after(g, &writes);
            Ok(out)
        })
    }
}

/// The stored value of `name`, `None` when absent.
fn current(t: XTarget<'_>, name: &CString) -> Result<Option<Vec<u8>>, Errno> {
    match sys::getxattr(t, name) {
        Ok(v) => Ok(Some(v)),
        Err(Errno::ENODATA) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Puts back, newest first, the previous values of the xattrs written so far, unless
/// [`keep`](Self::keep) is called: a multi-xattr write that fails part way leaves none.
struct Restore<'a> {
    t: XTarget<'a>,
    done: Vec<(CString, Option<Vec<u8>>)>,
    stats: &'a Stats,
}

impl<'a> Restore<'a> {
    fn new(t: XTarget<'a>, stats: &'a Stats) -> Self {
        Restore {
            t,
            done: Vec::new(),
            stats,
        }
    }
    fn written(&mut self, name: &CString, old: Option<Vec<u8>>) {
        self.done.push((name.clone(), old));
    }
    fn keep(mut self) {
        self.done.clear();
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if !self.done.is_empty() {
            Stats::bump(&self.stats.rollbacks);
        }
        for (name, old) in self.done.drain(..).rev() {
            let r = match &old {
                Some(v) => sys::setxattr(self.t, &name, v, 0),
                None => sys::removexattr(self.t, &name),
            };
            if let Err(e) = r {
                tracing::warn!(target: "xlfs::posix", "cannot restore xattr {name:?}: {e:?}");
            }
        }
    }
}

/// Lane-wise wrapping addition of big-endian `width`-byte integers; the shorter operand is
/// padded with zero lanes. `None` when the stored value is not a whole number of lanes.
pub fn add_lanes(cur: &[u8], delta: &[u8], width: usize) -> Option<Vec<u8>> {
    if !cur.len().is_multiple_of(width) || !delta.len().is_multiple_of(width) {
        return None;
    }
    let len = cur.len().max(delta.len());
    let mut out = vec![0u8; len];
    for i in (0..len).step_by(width) {
        let lane = |v: &[u8]| -> u64 {
            v.get(i..i + width)
                .map_or(0, |b| b.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x)))
        };
        let sum = lane(cur).wrapping_add(lane(delta));
        let bytes = sum.to_be_bytes();
        out[i..i + width].copy_from_slice(&bytes[8 - width..]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::add_lanes;

    #[test]
    fn lanes_add_wrap_and_pad() {
        let cur = [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        let d = [0, 0, 0, 2, 0, 0, 0, 1];
        assert_eq!(add_lanes(&cur, &d, 4), Some(vec![0, 0, 0, 3, 0, 0, 0, 0]));
        assert_eq!(add_lanes(&[], &[0, 0, 0, 5], 4), Some(vec![0, 0, 0, 5]));
        assert_eq!(
            add_lanes(&[0, 0, 0, 0, 0, 0, 0, 9], &[], 8),
            Some(vec![0, 0, 0, 0, 0, 0, 0, 9])
        );
        let neg1 = (-1i32).to_be_bytes();
        assert_eq!(add_lanes(&[0, 0, 0, 1], &neg1, 4), Some(vec![0, 0, 0, 0]));
        assert_eq!(add_lanes(&[1, 2, 3], &[0, 0, 0, 1], 4), None);
    }
}
