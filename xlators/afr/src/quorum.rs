//! Client quorum, pure: whether a set of children may accept a modification. GlusterFS's rule
//! (`afr_has_quorum`): `auto` wants more than half of the children; with an even count exactly
//! half is enough when it includes the first child (the tie-breaker), so of two partitioned
//! halves exactly one may write.

/// The quorum policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quorum {
    /// Any one child.
    None,
    /// More than half (half with the first child).
    Auto,
    /// At least this many.
    Fixed(usize),
}

impl Quorum {
    /// From the options: `default` is `auto` above two children (GlusterFS
    /// `fix_quorum_options`), else `none`.
    pub fn parse(kind: &str, count: u32, children: usize) -> Result<Quorum, String> {
        Ok(match kind {
            "none" => Quorum::None,
            "auto" => Quorum::Auto,
            "default" if children > 2 => Quorum::Auto,
            "default" => Quorum::None,
            "fixed" => {
                let n = count as usize;
                if n == 0 || n > children {
                    return Err(format!(
                        "quorum-type fixed needs quorum-count between 1 and {children}, got {n}"
                    ));
                }
                Quorum::Fixed(n)
            }
            other => return Err(format!("unknown quorum-type {other:?}")),
        })
    }

    /// Whether the children marked in `set` make a quorum.
    pub fn met(self, set: &[bool]) -> bool {
        let n = set.len();
        let count = set.iter().filter(|b| **b).count();
        match self {
            Quorum::None => count > 0,
            Quorum::Fixed(k) => count >= k && count > 0,
            Quorum::Auto => {
                count * 2 > n
                    || (n.is_multiple_of(2) && count * 2 == n && set.first() == Some(&true))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Quorum;

    #[test]
    fn auto_wants_a_majority_or_the_half_with_the_first_child() {
        let q = Quorum::Auto;
        assert!(q.met(&[true, true, false]) && q.met(&[false, true, true]));
        assert!(!q.met(&[true, false, false]) && !q.met(&[false, false, true]));
        assert!(q.met(&[true, false]) && !q.met(&[false, true]));
        assert!(q.met(&[true, false, true, false]) && !q.met(&[false, true, false, true]));
    }

    #[test]
    fn fixed_counts_and_none_wants_anyone() {
        assert!(Quorum::Fixed(2).met(&[false, true, true]));
        assert!(!Quorum::Fixed(2).met(&[false, false, true]));
        assert!(Quorum::None.met(&[false, true]) && !Quorum::None.met(&[false, false]));
    }

    #[test]
    fn default_is_auto_above_two_children() {
        assert_eq!(Quorum::parse("default", 0, 3), Ok(Quorum::Auto));
        assert_eq!(Quorum::parse("default", 0, 2), Ok(Quorum::None));
        assert_eq!(Quorum::parse("fixed", 2, 3), Ok(Quorum::Fixed(2)));
        assert!(Quorum::parse("fixed", 0, 3).is_err() && Quorum::parse("fixed", 4, 3).is_err());
    }
}
