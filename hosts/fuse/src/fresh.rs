//! Directories this mount made a moment ago, and the names it has put in them since.
//!
//! A directory is empty when mkdir returns, so for a short while after, a name this mount did
//! not create in it can be answered "no such name" without asking the bricks. That is the
//! negative lookup `tar x`, `cp -r` and `git checkout` send before each create: one round trip
//! in seven or eight per file.
//!
//! Correctness within the mount: every name this mount creates there (create, mknod, mkdir,
//! symlink, link, rename) is recorded before the request goes to the graph, and a lookup of a
//! recorded name always goes to the graph. So a dentry the kernel dropped (memory pressure,
//! `drop_caches`) is found again. The kernel holds the parent's lock across a create, so a
//! lookup never overtakes the record of its own name.
//!
//! Across clients: a name another client creates in such a directory shows up here no later
//! than the window after the mkdir (the negative reply's TTL is what is left of it). That is
//! the same bound the entry timeout already sets for names another client removes.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fuser::INodeNo;

/// Longest name a brick accepts (ext4, xfs, tmpfs: 255 bytes).
const NAME_MAX: usize = 255;

/// Records kept before expired ones are swept.
const SWEEP_AT: usize = 4096;

pub struct FreshDirs {
    window: Duration,
    dirs: Mutex<HashMap<INodeNo, Fresh>>,
}

struct Fresh {
    made: Instant,
    names: HashSet<OsString>,
}

impl FreshDirs {
    /// Answers for `window` after each mkdir; zero turns it off.
    pub fn new(window: Duration) -> FreshDirs {
        FreshDirs {
            window,
            dirs: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<INodeNo, Fresh>> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This mount made the (empty) directory `dir` at `made`, when the mkdir was sent.
    pub fn made(&self, dir: INodeNo, made: Instant) {
        if self.window.is_zero() {
            return;
        }
        let mut m = self.lock();
        if m.len() >= SWEEP_AT {
            let w = self.window;
            m.retain(|_, f| f.made.elapsed() < w);
        }
        m.insert(
            dir,
            Fresh {
                made,
                names: HashSet::new(),
            },
        );
    }

    /// This mount is about to create `name` in `dir`: its lookups must go to the graph.
    pub fn adding(&self, dir: INodeNo, name: &OsStr) {
        if self.window.is_zero() {
            return;
        }
        if let Some(f) = self.lock().get_mut(&dir) {
            f.names.insert(name.to_owned());
        }
    }

    /// Another client changed names in `dir`: nothing is known absent there any more.
    pub fn forget(&self, dir: INodeNo) {
        if !self.window.is_zero() {
            self.lock().remove(&dir);
        }
    }

    /// `Some(ttl)` when `name` is known not to exist in `dir`: how long the kernel may keep
    /// that answer (what is left of the window).
    pub fn absent(&self, dir: INodeNo, name: &OsStr) -> Option<Duration> {
        // A name too long for any brick gets ENAMETOOLONG from the graph, not "no such name".
        if self.window.is_zero() || name.len() > NAME_MAX {
            return None;
        }
        let mut m = self.lock();
        let f = m.get(&dir)?;
        let left = self
            .window
            .checked_sub(f.made.elapsed())
            .unwrap_or_default();
        if left.is_zero() {
            m.remove(&dir);
            return None;
        }
        (!f.names.contains(name)).then_some(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_for_names_not_made_here_and_only_within_the_window() {
        let f = FreshDirs::new(Duration::from_millis(200));
        let d = INodeNo(7);
        assert_eq!(f.absent(d, OsStr::new("a")), None, "not made here");
        f.made(d, Instant::now());
        let ttl = f.absent(d, OsStr::new("a")).expect("fresh");
        assert!(ttl <= Duration::from_millis(200) && !ttl.is_zero());
        f.adding(d, OsStr::new("a"));
        assert_eq!(f.absent(d, OsStr::new("a")), None, "created here");
        assert!(f.absent(d, OsStr::new("b")).is_some());
        assert_eq!(f.absent(INodeNo(8), OsStr::new("b")), None);
        let long = "x".repeat(NAME_MAX + 1);
        assert_eq!(
            f.absent(d, OsStr::new(&long)),
            None,
            "ENAMETOOLONG is the graph's"
        );
        assert!(f.absent(d, OsStr::new(&long[..NAME_MAX])).is_some());
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(f.absent(d, OsStr::new("b")), None, "window over");
    }

    #[test]
    fn a_zero_window_turns_it_off_and_an_old_mkdir_counts_from_its_start() {
        let off = FreshDirs::new(Duration::ZERO);
        off.made(INodeNo(2), Instant::now());
        assert_eq!(off.absent(INodeNo(2), OsStr::new("x")), None);
        let f = FreshDirs::new(Duration::from_millis(100));
        f.made(INodeNo(2), Instant::now() - Duration::from_millis(150));
        assert_eq!(f.absent(INodeNo(2), OsStr::new("x")), None);
    }

    #[test]
    fn expired_records_are_swept() {
        let f = FreshDirs::new(Duration::from_millis(1));
        for i in 0..SWEEP_AT as u64 {
            f.made(INodeNo(i + 10), Instant::now() - Duration::from_millis(5));
        }
        f.made(INodeNo(1), Instant::now());
        assert_eq!(f.lock().len(), 1);
    }
}
