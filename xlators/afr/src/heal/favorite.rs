//! `favorite-child-policy` (GlusterFS `cluster.favorite-child-policy`): which copy of a file
//! in data or metadata split-brain (every copy accused by another) heal takes as the source,
//! from the copies' attributes alone. Off (`none`) by default: split-brain is then never
//! resolved by heal, reads fail with EIO until an operator chooses.
//!
//! The rules ([`choose`], pure) pick only when they single out a copy: `size` the one largest
//! `st_size`, `mtime` / `ctime` the one newest time, `majority` the copies that agree (same
//! size and mtime, in whole seconds) when they are more than half of all children. A tie, or
//! a copy whose attributes could not be read, means no pick (the split-brain stays, EIO as
//! before).
//!
//! One pick per heal of an object ([`Favorite`]): the first lane found in split-brain decides
//! and the other lanes reuse it, because data heal copies the source's times to the sinks
//! (and changes their ctime), after which a new pick would see a tie or another winner.
//! Entry split-brain is merged by entry heal; a regular file's GFID split-brain is resolved by
//! entry heal with [`choose`] over the copies' attributes (see [`super::entry`]).

use futures::future::join_all;
use xlator_api::{Ctx, Gfid, Iatt, LogLevel};

use crate::shared::Shared;

/// The policy, parsed from the option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    None,
    Size,
    Mtime,
    Ctime,
    Majority,
}

impl Policy {
    pub fn parse(s: &str) -> Result<Policy, String> {
        Ok(match s {
            "none" => Policy::None,
            "size" => Policy::Size,
            "mtime" => Policy::Mtime,
            "ctime" => Policy::Ctime,
            "majority" => Policy::Majority,
            other => {
                return Err(format!(
                    "favorite-child-policy {other:?}: expected none, size, mtime, ctime or majority"
                ));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Size => "size",
            Policy::Mtime => "mtime",
            Policy::Ctime => "ctime",
            Policy::Majority => "majority",
        }
    }
}

/// The sources `policy` picks among the copies whose attributes are `attrs[i]` (`None`: not
/// a candidate). `None` when the rule does not single out a source, or a candidate's
/// attributes are missing (`unknown[i]`: candidate `i` did not answer the stat).
pub fn choose(policy: Policy, attrs: &[Option<Iatt>], unknown: &[bool]) -> Option<Vec<bool>> {
    let n = attrs.len();
    if unknown.iter().any(|u| *u) {
        return None;
    }
    let cands: Vec<(usize, &Iatt)> = attrs
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.as_ref().map(|a| (i, a)))
        .collect();
    if cands.len() < 2 {
        return None;
    }
    let single = |best: Option<usize>| best.map(|b| (0..n).map(|i| i == b).collect::<Vec<bool>>());
    match policy {
        Policy::None => None,
        Policy::Size => single(unique_max(&cands, |a| a.size)),
        Policy::Mtime => single(unique_max(&cands, |a| a.mtime)),
        Policy::Ctime => single(unique_max(&cands, |a| a.ctime)),
        Policy::Majority => {
            // Whole seconds, as GlusterFS (bricks stamp one write at slightly different times).
            let same = |a: &Iatt, b: &Iatt| a.size == b.size && a.mtime.sec == b.mtime.sec;
            cands.iter().find_map(|(_, a)| {
                let group: Vec<bool> = (0..n)
                    .map(|i| attrs[i].as_ref().is_some_and(|b| same(a, b)))
                    .collect();
                (group.iter().filter(|g| **g).count() * 2 > n).then_some(group)
            })
        }
    }
}

/// The one candidate with the largest `key`; `None` on a tie for the largest.
fn unique_max<K: Ord + Copy>(cands: &[(usize, &Iatt)], key: impl Fn(&Iatt) -> K) -> Option<usize> {
    let best = cands.iter().map(|(_, a)| key(a)).max()?;
    let mut top = cands.iter().filter(|(_, a)| key(a) == best);
    let (i, _) = top.next()?;
    top.next().is_none().then_some(*i)
}

/// The pick of one heal of an object, made once (see the module doc).
pub(crate) struct Favorite {
    policy: Policy,
    /// The object's path, when the heal came from a lookup (for the log).
    path: Option<String>,
    chosen: Option<Option<Vec<bool>>>,
}

impl Favorite {
    pub fn new(policy: Policy, path: Option<String>) -> Favorite {
        Favorite {
            policy,
            path,
            chosen: None,
        }
    }

    /// The sources for a lane of `gfid` in split-brain among the `present` children (under
    /// the heal's lock); `None`: no pick (policy none, or the rule singles out nobody).
    /// Logs the resolution once per object.
    pub async fn pick(
        &mut self,
        sh: &Shared,
        gfid: Gfid,
        lane: &str,
        present: &[bool],
    ) -> Option<Vec<bool>> {
        if self.policy == Policy::None {
            return None;
        }
        if self.chosen.is_none() {
            let cx = Ctx::root();
            let stats = join_all((0..sh.n()).map(|i| {
                let cx = cx.clone();
                async move {
                    if present[i] {
                        Some(sh.children[i].stat(&cx, gfid).await)
                    } else {
                        None
                    }
                }
            }))
            .await;
            let unknown: Vec<bool> = stats.iter().map(|s| matches!(s, Some(Err(_)))).collect();
            let attrs: Vec<Option<Iatt>> =
                stats.into_iter().map(|s| s.and_then(Result::ok)).collect();
            let chosen = choose(self.policy, &attrs, &unknown);
            let what = match &self.path {
                Some(p) => format!("{p} ({gfid})"),
                None => gfid.to_string(),
            };
            match &chosen {
                Some(src) => {
                    let names: Vec<String> = (0..sh.n())
                        .filter(|&i| src[i])
                        .map(|i| sh.children[i].name().to_string())
                        .collect();
                    sh.log(
                        LogLevel::Info,
                        &format!(
                            "split-brain on {what} resolved by favorite-child-policy={}: source {}",
                            self.policy.name(),
                            names.join(",")
                        ),
                    );
                    let g = gfid.to_string();
                    crate::shared::lock(&sh.split_brains).retain(|s| !s.contains(&g));
                }
                None => sh.log(
                    LogLevel::Warn,
                    &format!(
                        "split-brain ({lane}) on {what}: favorite-child-policy={} picks no \
                         source (a tie, or a copy not readable); it stays until resolved",
                        self.policy.name()
                    ),
                ),
            }
            self.chosen = Some(chosen);
        }
        let chosen = self.chosen.clone().flatten()?;
        let sources: Vec<bool> = chosen.iter().zip(present).map(|(c, p)| *c && *p).collect();
        sources.iter().any(|s| *s).then_some(sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::Timespec;

    fn at(size: u64, mtime: i64, ctime: i64) -> Option<Iatt> {
        Some(Iatt {
            size,
            mtime: Timespec {
                sec: mtime,
                nsec: 0,
            },
            ctime: Timespec {
                sec: ctime,
                nsec: 0,
            },
            ..Iatt::default()
        })
    }
    const K2: [bool; 2] = [false; 2];
    const K3: [bool; 3] = [false; 3];

    #[test]
    fn each_rule_singles_out_one_copy_or_none() {
        let a = [at(10, 5, 9), at(20, 7, 8)];
        assert_eq!(choose(Policy::Size, &a, &K2), Some(vec![false, true]));
        assert_eq!(choose(Policy::Mtime, &a, &K2), Some(vec![false, true]));
        assert_eq!(choose(Policy::Ctime, &a, &K2), Some(vec![true, false]));
        assert_eq!(choose(Policy::None, &a, &K2), None);
        // Replica 2 has no majority of differing copies.
        assert_eq!(choose(Policy::Majority, &a, &K2), None);
    }

    #[test]
    fn ties_pick_nothing() {
        let a = [at(10, 5, 5), at(10, 5, 5), at(3, 1, 1)];
        assert_eq!(choose(Policy::Size, &a, &K3), None);
        assert_eq!(choose(Policy::Mtime, &a, &K3), None);
        assert_eq!(choose(Policy::Ctime, &a, &K3), None);
        assert_eq!(
            choose(Policy::Majority, &a, &K3),
            Some(vec![true, true, false])
        );
        let all_differ = [at(1, 1, 1), at(2, 2, 2), at(3, 3, 3)];
        assert_eq!(choose(Policy::Majority, &all_differ, &K3), None);
    }

    #[test]
    fn negative_times_and_nanoseconds_order_correctly() {
        let a = [at(1, -5, 0), at(1, 3, 0)];
        assert_eq!(choose(Policy::Mtime, &a, &K2), Some(vec![false, true]));
        let ns = |nsec| {
            at(1, 3, 0).map(|mut x| {
                x.mtime.nsec = nsec;
                x
            })
        };
        assert_eq!(
            choose(Policy::Mtime, &[ns(2), ns(1)], &K2),
            Some(vec![true, false])
        );
    }

    #[test]
    fn absent_or_unreadable_copies() {
        // A child not present is no candidate; one present whose stat failed blocks the pick.
        let a = [at(10, 1, 1), None, at(5, 1, 1)];
        assert_eq!(
            choose(Policy::Size, &a, &K3),
            Some(vec![true, false, false])
        );
        assert_eq!(choose(Policy::Size, &a, &[false, true, false]), None);
        assert_eq!(choose(Policy::Size, &[at(1, 1, 1), None], &K2), None);
    }

    #[test]
    fn parse_names_round_trip() {
        for p in ["none", "size", "mtime", "ctime", "majority"] {
            assert_eq!(Policy::parse(p).map(Policy::name), Ok(p));
        }
        assert!(Policy::parse("biggest").is_err());
    }
}
