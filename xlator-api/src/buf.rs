//! [`Buf`]: the reference-counted, sliceable, FFI-safe byte buffer that carries read and write
//! payloads. Cloning and slicing never copy bytes, so a write passing through N translators and
//! the wire is copied only where it enters the process and where it reaches the disk.

use std::fmt;
use std::ops::{Deref, RangeBounds};

use abi_stable::StableAbi;
use abi_stable::std_types::{RArc, RVec};

/// An immutable view `[off, off + len)` into a shared byte vector.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct Buf {
    data: RArc<RVec<u8>>,
    off: usize,
    len: usize,
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
        }
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
        &self.data[self.off..self.off + self.len]
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
        }
    }

    /// Whether two buffers view the same storage (used by tests to prove zero-copy).
    pub fn shares_storage_with(&self, other: &Buf) -> bool {
        std::ptr::eq(
            &*self.data as *const RVec<u8>,
            &*other.data as *const RVec<u8>,
        )
    }

    /// The bytes as a `Vec`, without copying when this is the only view of the whole storage.
    pub fn into_vec(self) -> Vec<u8> {
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
}
