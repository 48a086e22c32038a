//! [`Report`]: the outcome of every conformance case.

use std::fmt;
use std::time::Duration;

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// A check failed; the message says which and what was seen.
    Failed(String),
    /// Not run: the graph lacks a capability the case needs.
    Skipped(String),
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct CaseReport {
    /// The case name (`group::case`).
    pub name: &'static str,
    /// Passed, failed or skipped, with the reason.
    pub outcome: Outcome,
    /// Wall time of the case (zero when skipped).
    pub elapsed: Duration,
}

/// The results of a conformance run, in case order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One entry per selected case.
    pub cases: Vec<CaseReport>,
}

impl Report {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }

    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.count(|o| *o == Outcome::Passed)
    }

    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(_)))
    }

    /// Cases skipped for a missing capability.
    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped(_)))
    }

    /// The failed cases with their messages.
    pub fn failures(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.cases.iter().filter_map(|c| match &c.outcome {
            Outcome::Failed(m) => Some((c.name, m.as_str())),
            _ => None,
        })
    }

    /// The outcome of case `name`.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.cases
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.outcome)
    }

    /// Panics, listing every failure, unless no case failed (skips are fine).
    #[track_caller]
    pub fn assert_all_passed(&self) {
        if self.failed() > 0 {
            let list: Vec<String> = self
                .failures()
                .map(|(n, m)| format!("  {n}: {m}"))
                .collect();
            panic!(
                "{} conformance case(s) failed:\n{}\n{self}",
                self.failed(),
                list.join("\n")
            );
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.cases {
            match &c.outcome {
                Outcome::Passed => writeln!(f, "ok      {} ({:?})", c.name, c.elapsed)?,
                Outcome::Failed(m) => writeln!(f, "FAILED  {}: {m}", c.name)?,
                Outcome::Skipped(r) => writeln!(f, "skipped {}: {r}", c.name)?,
            }
        }
        write!(
            f,
            "conformance: {} passed, {} failed, {} skipped of {}",
            self.passed(),
            self.failed(),
            self.skipped(),
            self.cases.len()
        )
    }
}
