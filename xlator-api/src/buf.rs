//! [`Buf`]: the reference-counted, sliceable, FFI-safe byte buffer that carries read and write
//! payloads. Cloning and slicing never copy bytes, so a write passing through N translators and
//! the wire is copied only where it enters the process and where it reaches the disk.
//!
//! A buffer may also hold its bytes in a pipe ([`Buf::from_pipe`]): storage/posix fills one
//! with `splice` from the file (the page cache pages are referenced, not copied), and a
//! sender that owns the only view hands the pipe to the socket with another `splice`
//! ([`Buf::take_pipe`]), so read data crosses the brick without a copy in user space. Anyone
//! else who looks at the bytes (`as_slice`, `Deref`) drains the pipe into memory once, so a
//! pipe-held buffer behaves like any other.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, RangeBounds};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, ROption, RVec};

/// An immutable view `[off, off + len)` into a shared byte vector, or into bytes held in a
/// pipe until someone needs them.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct Buf {
    data: RArc<RVec<u8>>,
    off: usize,
    len: usize,
    /// When set, the bytes are this pipe's (and `data` is empty).
    pipe: ROption<RArc<PipeBytes>>,
}

/// `len` bytes waiting in a pipe; drained into `bytes` the first time they are looked at.
#[repr(C)]
#[derive(StableAbi)]
struct PipeBytes {
    /// The read end; -1 once drained or taken.
    fd: AtomicI32,
    len: usize,
    /// One of the `PIPE_*` states.
    state: AtomicU8,
    /// Written once, by the thread that moved `state` from `PIPE_FULL` to `PIPE_DRAINING`;
    /// read only after `state` is `PIPE_DRAINED` (acquire).
    bytes: UnsafeCell<RVec<u8>>,
}

const PIPE_FULL: u8 = 0;
const PIPE_DRAINING: u8 = 1;
const PIPE_DRAINED: u8 = 2;
const PIPE_TAKEN: u8 = 3;
const PIPE_FAILED: u8 = 4;

// SAFETY: `bytes` is written by exactly one thread (the one that won the FULL -> DRAINING
// transition) before it publishes DRAINED with release ordering; every reader first observes
// DRAINED with acquire ordering, and nobody writes it again.
unsafe impl Sync for PipeBytes {}
unsafe impl Send for PipeBytes {}
// A panic while draining publishes FAILED first, so no reader ever sees half-written bytes.
impl std::panic::RefUnwindSafe for PipeBytes {}

impl PipeBytes {
    /// The bytes, draining the pipe first if nobody has.
    fn bytes(&self) -> &[u8] {
        loop {
            match self.state.compare_exchange(
                PIPE_FULL,
                PIPE_DRAINING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => match self.drain() {
                    Ok(v) => {
                        // SAFETY: this thread won the FULL -> DRAINING transition: no one
                        // else reads or writes `bytes` until DRAINED is published below.
                        unsafe { *self.bytes.get() = v };
                        self.state.store(PIPE_DRAINED, Ordering::Release);
                    }
                    Err(e) => {
                        // Never leave DRAINING behind: the other readers would wait forever.
                        self.state.store(PIPE_FAILED, Ordering::Release);
                        panic!("Buf: {e}");
                    }
                },
                Err(PIPE_DRAINED) => {
                    // SAFETY: DRAINED was published (acquire) after the only write.
                    return unsafe { (*self.bytes.get()).as_slice() };
                }
                Err(PIPE_DRAINING) => std::thread::yield_now(),
                Err(PIPE_TAKEN) => panic!("Buf: bytes read after the pipe was handed to a sender"),
                Err(_) => panic!("Buf: its pipe could not be read"),
            }
        }
    }

    /// Reads the whole pipe (it holds exactly `len` bytes, written before the buffer was
    /// made) and closes it.
    fn drain(&self) -> Result<RVec<u8>, String> {
        let fd = self.fd.swap(-1, Ordering::AcqRel);
        if fd < 0 {
            return Err("its pipe was already drained".into());
        }
        // SAFETY: the fd was ours (from `from_pipe`) and is closed exactly once, here.
        let pipe = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut v = Vec::with_capacity(self.len);
        while v.len() < self.len {
            let want = self.len - v.len();
            let room = &mut v.spare_capacity_mut()[..want];
            // SAFETY: reading into the vector's spare capacity; only the bytes read are kept.
            let n = unsafe { libc::read(pipe.as_raw_fd(), room.as_mut_ptr().cast(), room.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("reading its pipe failed: {e}"));
            }
            if n == 0 {
                return Err(format!("its pipe held {} of {} bytes", v.len(), self.len));
            }
            // SAFETY: `n` more bytes were initialised by the read.
            unsafe { v.set_len(v.len() + n as usize) };
        }
        Ok(RVec::from(v))
    }
}

impl Drop for PipeBytes {
    fn drop(&mut self) {
        let fd = *self.fd.get_mut();
        if fd >= 0 {
            // SAFETY: still ours: neither drained nor taken.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
}

impl Buf {
    /// The empty buffer.
    pub fn new() -> Buf {
        Buf::from_vec(Vec::new())
    }

    /// Takes ownership of `v` (moves it into an `RVec`; no byte copy).
    pub fn from_vec(v: Vec<u8>) -> Buf {
        let len = v.len();
        Buf {
            data: RArc::new(RVec::from(v)),
            off: 0,
            len,
            pipe: ROption::RNone,
        }
    }

    /// A buffer whose `len` bytes are all in the pipe `read_end` already (the write end
    /// closed or at least done writing). The pipe is closed when the buffer goes.
    pub fn from_pipe(read_end: OwnedFd, len: usize) -> Buf {
        Buf {
            data: RArc::new(RVec::new()),
            off: 0,
            len,
            pipe: ROption::RSome(RArc::new(PipeBytes {
                fd: AtomicI32::new(std::os::fd::IntoRawFd::into_raw_fd(read_end)),
                len,
                state: AtomicU8::new(PIPE_FULL),
                bytes: UnsafeCell::new(RVec::new()),
            })),
        }
    }

    /// A copy of `bytes` held in a new pipe (for tests, and for a leaf that has its data in
    /// memory but answers a caller that takes pipes). Fails if the pipe cannot be made that
    /// large (`F_SETPIPE_SZ`, limited by `/proc/sys/fs/pipe-max-size` without
    /// CAP_SYS_RESOURCE).
    pub fn copy_into_pipe(bytes: &[u8]) -> std::io::Result<Buf> {
        let (r, w) = pipe_with_room(bytes.len())?;
        let mut done = 0;
        while done < bytes.len() {
            // SAFETY: writing from a live slice.
            let n = unsafe {
                libc::write(
                    w.as_raw_fd(),
                    bytes[done..].as_ptr().cast(),
                    bytes.len() - done,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
                continue;
            }
            done += n as usize;
        }
        Ok(Buf::from_pipe(r, bytes.len()))
    }

    /// Whether the bytes are still in a pipe (nobody has looked at them).
    pub fn in_pipe(&self) -> bool {
        match &self.pipe {
            ROption::RSome(p) => p.state.load(Ordering::Acquire) == PIPE_FULL,
            ROption::RNone => false,
        }
    }

    /// The pipe holding this buffer's bytes, for a sender to `splice` them on: only when
    /// this is the only view of the whole pipe and nobody has drained it. Afterwards the
    /// bytes cannot be read through this buffer (`as_slice` panics): the caller must own
    /// the buffer (no other thread may look at it), send the bytes, then drop it.
    pub fn take_pipe(&self) -> Option<OwnedFd> {
        let ROption::RSome(p) = &self.pipe else {
            return None;
        };
        if self.off != 0 || self.len != p.len || RArc::strong_count(p) != 1 {
            return None;
        }
        p.state
            .compare_exchange(PIPE_FULL, PIPE_TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        let fd = p.fd.swap(-1, Ordering::AcqRel);
        // SAFETY: the fd was ours and, now TAKEN, is handed out exactly once.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Copies `s` into a new buffer.
    pub fn copy_from_slice(s: &[u8]) -> Buf {
        Buf::from_vec(s.to_vec())
    }

    /// A zero-filled buffer of `len` bytes.
    pub fn zeroed(len: usize) -> Buf {
        Buf::from_vec(vec![0; len])
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        match &self.pipe {
            ROption::RSome(p) => &p.bytes()[self.off..self.off + self.len],
            ROption::RNone => &self.data[self.off..self.off + self.len],
        }
    }

    /// A sub-view sharing the same storage. Panics if the range is out of bounds, like slicing.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Buf {
        use std::ops::Bound::*;
        let start = match range.start_bound() {
            Included(&s) => s,
            Excluded(&s) => s + 1,
            Unbounded => 0,
        };
        let end = match range.end_bound() {
            Included(&e) => e + 1,
            Excluded(&e) => e,
            Unbounded => self.len,
        };
        assert!(
            start <= end && end <= self.len,
            "Buf::slice {start}..{end} of {}",
            self.len
        );
        Buf {
            data: self.data.clone(),
            off: self.off + start,
            len: end - start,
            pipe: self.pipe.clone(),
        }
    }

    /// Whether two buffers view the same storage (used by tests to prove zero-copy).
    pub fn shares_storage_with(&self, other: &Buf) -> bool {
        match (&self.pipe, &other.pipe) {
            (ROption::RSome(a), ROption::RSome(b)) => std::ptr::eq(&**a, &**b),
            (ROption::RNone, ROption::RNone) => std::ptr::eq(
                &*self.data as *const RVec<u8>,
                &*other.data as *const RVec<u8>,
            ),
            _ => false,
        }
    }

    /// The bytes as a `Vec`, without copying when this is the only view of the whole storage.
    pub fn into_vec(self) -> Vec<u8> {
        if self.pipe.is_some() {
            return self.as_slice().to_vec();
        }
        if self.off == 0 && self.len == self.data.len() {
            match RArc::try_unwrap(self.data) {
                Ok(v) => return v.into_vec(),
                Err(data) => return data[..self.len].to_vec(),
            }
        }
        self.as_slice().to_vec()
    }

    /// Concatenates buffers (one copy; used to merge adjacent writes).
    pub fn concat(parts: &[Buf]) -> Buf {
        let total = parts.iter().map(Buf::len).sum();
        let mut v = Vec::with_capacity(total);
        for p in parts {
            v.extend_from_slice(p);
        }
        Buf::from_vec(v)
    }
}

/// A new pipe (read end, write end, both close-on-exec) that holds at least `bytes` bytes
/// written to it (`F_SETPIPE_SZ`, one page per slot); EINVAL if the kernel gave less, EPERM
/// beyond `/proc/sys/fs/pipe-max-size` without CAP_SYS_RESOURCE.
pub fn pipe_with_room(bytes: usize) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds are new and owned from here on.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let want = libc::c_int::try_from(bytes.max(1).div_ceil(4096) * 4096)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: fcntl on an fd we own.
    let got = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if (got as usize) < bytes {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok((r, w))
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::new()
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::from_vec(v)
    }
}

impl From<&[u8]> for Buf {
    fn from(s: &[u8]) -> Buf {
        Buf::copy_from_slice(s)
    }
}

impl From<&str> for Buf {
    fn from(s: &str) -> Buf {
        Buf::copy_from_slice(s.as_bytes())
    }
}

/// Serialized as a byte string. (The wire moves read/write payloads outside the serializer;
/// this is for small values such as xattrs.)
impl serde::Serialize for Buf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.as_slice())
    }
}

impl<'de> serde::Deserialize<'de> for Buf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Buf, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Buf;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Buf, E> {
                Ok(Buf::copy_from_slice(v))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Buf, E> {
                Ok(Buf::from_vec(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Buf, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0).min(4096));
                while let Some(b) = a.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(Buf::from_vec(v))
            }
        }
        d.deserialize_bytes(V)
    }
}

impl PartialEq for Buf {
    fn eq(&self, other: &Buf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Buf {}

impl fmt::Debug for Buf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only the length: payloads must never end up in logs.
        write!(f, "Buf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_storage_and_bound_check() {
        let b = Buf::from_vec((0..100u8).collect());
        let s = b.slice(10..20);
        assert_eq!(&*s, &(10..20u8).collect::<Vec<_>>()[..]);
        let ss = s.slice(5..);
        assert_eq!(ss[0], 15);
        assert!(ss.shares_storage_with(&b));
        assert_eq!(ss.clone().into_vec(), vec![15, 16, 17, 18, 19]);
        assert!(std::panic::catch_unwind(|| b.slice(50..101)).is_err());
    }

    #[test]
    fn unique_into_vec_does_not_copy() {
        let v = vec![7u8; 4096];
        let p = v.as_ptr();
        let b = Buf::from_vec(v);
        let back = b.into_vec();
        assert_eq!(back.as_ptr(), p);
    }

    #[test]
    fn a_pipe_buffer_reads_like_any_other_and_its_slices_share_it() {
        let want: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let b = Buf::copy_into_pipe(&want).expect("pipe");
        assert!(b.in_pipe());
        assert_eq!(b.len(), want.len());
        let s = b.slice(100..200);
        assert!(s.shares_storage_with(&b));
        assert!(b.in_pipe(), "slicing does not drain");
        assert_eq!(&*s, &want[100..200]);
        assert!(!b.in_pipe());
        assert_eq!(b, Buf::from_vec(want.clone()));
        assert_eq!(b.clone().into_vec(), want);
        assert!(!s.shares_storage_with(&Buf::from_vec(want)));
    }

    #[test]
    fn threads_reading_a_pipe_buffer_at_once_all_see_the_bytes() {
        let want: Vec<u8> = (0..60_000u32).map(|i| (i % 253) as u8).collect();
        let b = Buf::copy_into_pipe(&want).expect("pipe");
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(|| assert_eq!(b.as_slice(), &want[..]));
            }
        });
    }

    #[test]
    fn only_the_sole_view_of_an_undrained_pipe_can_take_it() {
        let want = vec![9u8; 5000];
        let b = Buf::copy_into_pipe(&want).expect("pipe");
        let c = b.clone();
        assert!(b.take_pipe().is_none(), "another view exists");
        drop(c);
        let part = b.slice(1..);
        assert!(part.take_pipe().is_none(), "not the whole pipe");
        drop(part);
        let fd = b.take_pipe().expect("sole whole view");
        let mut got = vec![0u8; 6000];
        // SAFETY: reading into a live buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), got.as_mut_ptr().cast(), got.len()) };
        assert_eq!(n, 5000);
        assert!(got[..5000].iter().all(|&x| x == 9));
        assert!(b.take_pipe().is_none(), "taken once");

        let drained = Buf::copy_into_pipe(&want).expect("pipe");
        assert_eq!(drained.len(), drained.as_slice().len());
        assert!(drained.take_pipe().is_none(), "already drained");
        assert_eq!(Buf::from_vec(want).take_pipe().map(|_| ()), None);
    }
}
