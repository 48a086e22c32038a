//! The statedump: counts of inodes with lock state, held locks and waiting requests, then
//! the locks themselves (held and waiting), each with its inode, space, client, owner, kind
//! and range or name. The list is bounded ([`LISTED_MAX`]); `locks_more` says how many were
//! left out, so a brick with a million locks still dumps in bounded size.

use xlator_api::{Dump, Gfid};

use crate::owner::Owner;
use crate::range::{Held, Kind};
use crate::table::LockTable;

/// At most this many locks are listed.
pub const LISTED_MAX: usize = 100;

/// Collects at most `max` lock entries and counts every lock.
struct Lister {
    max: usize,
    held: usize,
    waiting: usize,
    listed: Vec<Dump>,
    more: usize,
}

impl Lister {
    fn add(&mut self, waiting: bool, entry: impl FnOnce() -> Dump) {
        if waiting {
            self.waiting += 1;
        } else {
            self.held += 1;
        }
        if self.listed.len() < self.max {
            let state = if waiting { "waiting" } else { "held" };
            self.listed.push(entry().with("state", state));
        } else {
            self.more += 1;
        }
    }
}

/// The fields every entry starts with; `client` is left out for a local caller.
fn head(g: Gfid, space: &str, domain: Option<&str>, owner: Owner) -> Dump {
    let mut d = Dump::new().with("gfid", g.to_string()).with("space", space);
    if let Some(domain) = domain {
        d.push("domain", domain);
    }
    if let Some(c) = owner.client {
        d.push("client", c.0);
    }
    d.with("owner", owner.lk.0)
}

fn range_entry(g: Gfid, space: &str, domain: Option<&str>, h: &Held) -> Dump {
    let kind = match h.kind {
        Kind::Read => "read",
        Kind::Write => "write",
    };
    head(g, space, domain, h.owner)
        .with("kind", kind)
        .with("start", h.range.start)
        .with("len", h.range.len())
}

fn name_entry(g: Gfid, domain: &str, name: Option<&str>, owner: Owner) -> Dump {
    // The empty name is the whole directory, as in the fop.
    head(g, "entrylk", Some(domain), owner).with("name", name.unwrap_or(""))
}

impl LockTable {
    /// The statedump, listing at most `max` locks.
    pub fn dump(&self, max: usize) -> Dump {
        let m = self.lock();
        let mut l = Lister {
            max,
            held: 0,
            waiting: 0,
            listed: Vec::new(),
            more: 0,
        };
        for (g, il) in m.iter() {
            let g = *g;
            let spaces = std::iter::once((None, &il.posix))
                .chain(il.domains.iter().map(|(d, rl)| (Some(d.as_str()), rl)));
            for (domain, rl) in spaces {
                let space = if domain.is_some() { "inodelk" } else { "posix" };
                for h in rl.held() {
                    l.add(false, || range_entry(g, space, domain, h));
                }
                for h in rl.waiters() {
                    l.add(true, || range_entry(g, space, domain, h));
                }
            }
            for (domain, el) in &il.entries {
                for h in el.held() {
                    l.add(false, || {
                        name_entry(g, domain, h.name.as_deref(), h.owner).with("count", h.count)
                    });
                }
                for (name, owner) in el.waiters() {
                    l.add(true, || name_entry(g, domain, name, owner));
                }
            }
        }
        Dump::new()
            .with("inodes", m.len())
            .with("held", l.held)
            .with("waiting", l.waiting)
            .with("locks", l.listed)
            .with("locks_more", l.more)
    }
}
