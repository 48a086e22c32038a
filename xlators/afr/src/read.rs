//! Read-child choice, pure: the order in which readable children are tried for a read.
//! Failing over walks the rest of the order.

use xlator_api::Gfid;

/// How the first child is picked among the readable ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPolicy {
    /// The lowest-numbered readable child.
    FirstUp,
    /// A child chosen by the file's GFID: every client reads a file from the same child
    /// (server caches), and different files spread over the children.
    GfidHash,
    /// The readable child with the fewest reads in flight from this client.
    LeastOutstanding,
}

impl ReadPolicy {
    pub fn parse(s: &str) -> Result<ReadPolicy, String> {
        match s {
            "first-up" => Ok(ReadPolicy::FirstUp),
            "gfid-hash" => Ok(ReadPolicy::GfidHash),
            "least-outstanding" => Ok(ReadPolicy::LeastOutstanding),
            other => Err(format!("unknown read-policy {other:?}")),
        }
    }
}

/// The children to try, best first: every readable child once; the first by `policy`, then
/// the others in index order after it (wrapping). `outstanding[i]` is child `i`'s reads in
/// flight.
pub fn order(readable: &[bool], policy: ReadPolicy, gfid: Gfid, outstanding: &[u64]) -> Vec<usize> {
    let cands: Vec<usize> = (0..readable.len()).filter(|&i| readable[i]).collect();
    if cands.is_empty() {
        return cands;
    }
    let first = match policy {
        ReadPolicy::FirstUp => 0,
        ReadPolicy::GfidHash => (hash(gfid) % cands.len() as u64) as usize,
        ReadPolicy::LeastOutstanding => (0..cands.len())
            .min_by_key(|&k| (outstanding.get(cands[k]).copied().unwrap_or(0), k))
            .unwrap_or(0),
    };
    (0..cands.len())
        .map(|k| cands[(first + k) % cands.len()])
        .collect()
}

/// FNV-1a of the GFID bytes: stable across clients and builds.
fn hash(g: Gfid) -> u64 {
    g.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_readable_children_are_tried_each_once() {
        let o = order(&[false, true, true], ReadPolicy::FirstUp, Gfid::ROOT, &[]);
        assert_eq!(o, [1, 2]);
        assert!(order(&[false, false], ReadPolicy::GfidHash, Gfid::ROOT, &[]).is_empty());
    }

    #[test]
    fn gfid_hash_is_stable_and_spreads_files() {
        let all = [true, true, true];
        let mut firsts = std::collections::HashSet::new();
        for b in 0..64u8 {
            let g = Gfid([b; 16]);
            let o = order(&all, ReadPolicy::GfidHash, g, &[]);
            assert_eq!(o, order(&all, ReadPolicy::GfidHash, g, &[]));
            assert_eq!(o.len(), 3);
            firsts.insert(o[0]);
        }
        assert_eq!(firsts.len(), 3, "files spread over every child");
    }

    #[test]
    fn least_outstanding_picks_the_idlest_readable_child() {
        let o = order(
            &[true, true, true],
            ReadPolicy::LeastOutstanding,
            Gfid::ROOT,
            &[5, 1, 3],
        );
        assert_eq!(o, [1, 2, 0]);
        let o = order(
            &[true, false, true],
            ReadPolicy::LeastOutstanding,
            Gfid::ROOT,
            &[5, 0, 3],
        );
        assert_eq!(o, [2, 0]);
    }
}
