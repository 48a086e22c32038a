//! The geometry xattr each child's copy of a striped file carries, and its check.
//!
//! `trusted.stripe.geometry` holds 17 bytes: a format byte (1), the stripe count (u32 BE), this
//! child's index (u32 BE) and the unit size in bytes (u64 BE). It is set with the file, in the
//! same create (`CreateXattrs`), so no child's copy exists without it, and never changed
//! afterwards (this translator refuses to set or remove it from above). A copy whose xattr is
//! missing, unreadable, or disagrees with its position or with the other copies is an error
//! (EIO, logged): guessing a geometry would return another file's bytes.

use xlator_api::{Buf, Errno};

use crate::units::Geometry;

/// The xattr name.
pub const GEOMETRY_XATTR: &str = "trusted.stripe.geometry";
const FORMAT: u8 = 1;
const LEN: usize = 17;

/// The xattr value for child `index` of a file with geometry `geo`.
pub fn encode(geo: Geometry, index: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(LEN);
    v.push(FORMAT);
    v.extend_from_slice(&geo.count.to_be_bytes());
    v.extend_from_slice(&u32::try_from(index).unwrap_or(u32::MAX).to_be_bytes());
    v.extend_from_slice(&geo.block.to_be_bytes());
    v
}

/// The geometry and index recorded in a value, if well formed.
pub fn decode(v: &[u8]) -> Option<(Geometry, usize)> {
    if v.len() != LEN || v[0] != FORMAT {
        return None;
    }
    let count = u32::from_be_bytes(v[1..5].try_into().ok()?);
    let index = u32::from_be_bytes(v[5..9].try_into().ok()?);
    let block = u64::from_be_bytes(v[9..17].try_into().ok()?);
    Some((Geometry::new(count, block)?, index as usize))
}

/// Why a child's copy is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    Missing,
    Malformed,
    Count { found: u32, children: usize },
    Index { found: usize },
    Block { found: u64, first: u64 },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Missing => write!(f, "no {GEOMETRY_XATTR} xattr"),
            Mismatch::Malformed => write!(f, "malformed {GEOMETRY_XATTR} xattr"),
            Mismatch::Count { found, children } => {
                write!(
                    f,
                    "striped over {found} children, this stripe has {children}"
                )
            }
            Mismatch::Index { found } => write!(f, "recorded as stripe index {found}"),
            Mismatch::Block { found, first } => {
                write!(f, "unit size {found}, child 0 says {first}")
            }
        }
    }
}

/// Checks the values of one file's geometry xattr on every child (in child order) and
/// returns the file's geometry. An `Err` names the first child refused and why.
pub fn check(values: &[Option<&Buf>]) -> Result<Geometry, (usize, Mismatch)> {
    let n = values.len();
    let mut first: Option<Geometry> = None;
    for (i, v) in values.iter().enumerate() {
        let v = v.ok_or((i, Mismatch::Missing))?;
        let (geo, index) = decode(v).ok_or((i, Mismatch::Malformed))?;
        if geo.count as usize != n {
            return Err((
                i,
                Mismatch::Count {
                    found: geo.count,
                    children: n,
                },
            ));
        }
        if index != i {
            return Err((i, Mismatch::Index { found: index }));
        }
        match first {
            Some(f) if f.block != geo.block => {
                return Err((
                    i,
                    Mismatch::Block {
                        found: geo.block,
                        first: f.block,
                    },
                ));
            }
            Some(_) => {}
            None => first = Some(geo),
        }
    }
    first.ok_or((0, Mismatch::Missing))
}

/// Logs a refused geometry and gives the errno for it.
pub fn refuse(
    log: &xlator_api::HostServices,
    xl: &str,
    what: impl std::fmt::Display,
    child: usize,
    why: &Mismatch,
) -> Errno {
    log.log(
        xlator_api::LogLevel::Error,
        "xlfs::stripe",
        &format!("{xl}: {what}: child {child}'s copy refused: {why}; replying EIO"),
    );
    Errno::EIO
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs(vals: &[Vec<u8>]) -> Vec<Buf> {
        vals.iter().map(|v| Buf::from_vec(v.clone())).collect()
    }

    #[test]
    fn a_consistent_set_gives_the_geometry() {
        let geo = Geometry::new(3, 65536).expect("valid");
        let b = bufs(&(0..3).map(|i| encode(geo, i)).collect::<Vec<_>>());
        let vals: Vec<Option<&Buf>> = b.iter().map(Some).collect();
        assert_eq!(check(&vals), Ok(geo));
    }

    #[test]
    fn missing_wrong_index_count_or_block_are_refused() {
        let geo = Geometry::new(2, 4096).expect("valid");
        let other = Geometry::new(2, 8192).expect("valid");
        let three = Geometry::new(3, 4096).expect("valid");
        let b = bufs(&[
            encode(geo, 0),
            encode(geo, 0),
            encode(other, 1),
            encode(three, 1),
            vec![1, 2, 3],
        ]);
        assert_eq!(check(&[Some(&b[0]), None]), Err((1, Mismatch::Missing)));
        assert_eq!(
            check(&[Some(&b[0]), Some(&b[1])]),
            Err((1, Mismatch::Index { found: 0 }))
        );
        assert!(matches!(
            check(&[Some(&b[0]), Some(&b[2])]),
            Err((1, Mismatch::Block { .. }))
        ));
        assert!(matches!(
            check(&[Some(&b[0]), Some(&b[3])]),
            Err((1, Mismatch::Count { .. }))
        ));
        assert_eq!(
            check(&[Some(&b[4]), Some(&b[0])]),
            Err((0, Mismatch::Malformed))
        );
    }
}
