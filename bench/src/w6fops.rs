//! The W6 fop table: how many fops of each kind xlfs made per dbench operation.
//!
//! `bench/run.sh` brackets dbench's execute phase with two statedumps of an xlfs target (its
//! mount and its brick 0) and writes the difference of io-stats' call counters as a raw line
//! `round=R target=T workload=w6 phase=fops side=client|brick xlator=PATH total=N FOP=N ...`.
//! The same round's W6 result gives dbench's operation count (`ops`, over `secs` seconds of
//! execute phase) and the seconds between the two statedumps (`window_secs`, a little shorter:
//! the first dump is taken at dbench's first progress line of the execute phase). Calls per
//! dbench operation = calls ÷ (ops × window_secs ÷ secs): both counted over the same span,
//! assuming dbench runs at an even rate through its execute phase. A round without its W6
//! result or with an unknown window gives no value (never a guess); each cell is the median of
//! the rounds that have one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::report::{Raw, Sample, Stats, fmt_num};

/// Fields of a fop line that are not fop counters.
const NOT_FOPS: &[&str] = &["phase", "side", "xlator", "total"];

/// Calls per dbench operation of one target and side (client = the mount's io-stats, brick =
/// the brick's: what crossed the wire).
#[derive(Debug, Clone, Serialize)]
pub struct FopRates {
    pub target: String,
    pub side: String,
    pub xlator: String,
    /// fop -> calls per dbench operation, over the rounds; "total" is every fop.
    pub per_op: BTreeMap<String, Stats>,
    /// fop -> calls in the window, per round (raw).
    pub calls: BTreeMap<String, Vec<f64>>,
}

/// The W6 result of the same round and target.
fn result_of<'a>(raw: &'a Raw, s: &Sample) -> Option<&'a Sample> {
    raw.samples.iter().find(|r| {
        r.workload == "w6"
            && r.round == s.round
            && r.target == s.target
            && !r.fields.contains_key("phase")
    })
}

/// Operations dbench ran in the window of the statedumps, `None` when not known.
fn ops_in_window(r: &Sample) -> Option<f64> {
    let (ops, secs, window) = (r.num("ops")?, r.num("secs")?, r.num("window_secs")?);
    (ops > 0.0 && secs > 0.0 && window > 0.0).then(|| ops * window / secs)
}

pub fn rates(raw: &Raw) -> Vec<FopRates> {
    let mut keyed: BTreeMap<(usize, String), FopRates> = BTreeMap::new();
    let order = raw.target_order();
    let mut per: BTreeMap<(usize, String), BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for s in raw
        .samples
        .iter()
        .filter(|s| s.workload == "w6" && s.fields.get("phase").map(String::as_str) == Some("fops"))
    {
        let side = s.fields.get("side").cloned().unwrap_or_default();
        let ti = order
            .iter()
            .position(|t| *t == s.target)
            .unwrap_or(usize::MAX);
        // client before brick, other names after them
        let rank = match side.as_str() {
            "client" => 0,
            "brick" => 1,
            _ => 2,
        };
        let key = (ti, format!("{}\u{0}{rank}{side}", s.target));
        let e = keyed.entry(key.clone()).or_insert_with(|| FopRates {
            target: s.target.clone(),
            side: side.clone(),
            xlator: s.fields.get("xlator").cloned().unwrap_or_default(),
            per_op: BTreeMap::new(),
            calls: BTreeMap::new(),
        });
        let window_ops = result_of(raw, s).and_then(ops_in_window);
        for (k, _) in s
            .fields
            .iter()
            .filter(|(k, _)| !NOT_FOPS.contains(&k.as_str()))
        {
            if let Some(v) = s.num(k) {
                e.calls.entry(k.clone()).or_default().push(v);
            }
        }
        if let Some(v) = s.num("total") {
            e.calls.entry("total".into()).or_default().push(v);
        }
        if let Some(w) = window_ops {
            let p = per.entry(key).or_default();
            for (k, _) in s
                .fields
                .iter()
                .filter(|(k, _)| !NOT_FOPS.contains(&k.as_str()) || k.as_str() == "total")
            {
                if let Some(v) = s.num(k) {
                    p.entry(k.clone()).or_default().push(v / w);
                }
            }
        }
    }
    for (key, e) in keyed.iter_mut() {
        if let Some(p) = per.get(key) {
            for (fop, vals) in p {
                if let Some(st) = Stats::of(vals) {
                    e.per_op.insert(fop.clone(), st);
                }
            }
        }
    }
    keyed.into_values().collect()
}

/// The markdown section (empty when no W6 fop counts were recorded).
pub fn markdown(raw: &Raw) -> String {
    let rs = rates(raw);
    let mut o = String::new();
    if rs.is_empty() {
        return o;
    }
    let _ = writeln!(o, "## W6 xlfs fops per dbench operation (io-stats)\n");
    let _ = writeln!(
        o,
        "io-stats call counts between two statedumps that bracket dbench's execute phase, ÷ \
         the dbench operations in that span (dbench's count × window ÷ execute seconds). \
         client = the mount's io-stats (what the FUSE host sent into the graph), brick = brick \
         0's io-stats (the round trips that crossed the wire to it; a volume of several bricks \
         shows only brick 0's share). Median of the rounds; \
         fops under 0.001 per operation are left out.\n"
    );
    // one column per (target, side); rows: every fop seen, by the first column's rate
    let mut fops: Vec<String> = Vec::new();
    for r in &rs {
        for f in r.per_op.keys() {
            if f != "total" && !fops.contains(f) {
                fops.push(f.clone());
            }
        }
    }
    let first = &rs[0];
    let rate = |r: &FopRates, f: &str| r.per_op.get(f).map(|s| s.median);
    fops.sort_by(|a, b| {
        let (x, y) = (rate(first, a).unwrap_or(0.0), rate(first, b).unwrap_or(0.0));
        y.total_cmp(&x).then_with(|| a.cmp(b))
    });
    fops.retain(|f| rs.iter().any(|r| rate(r, f).is_some_and(|v| v >= 0.001)));
    let _ = write!(o, "| fop |");
    for r in &rs {
        let _ = write!(o, " {} {} |", r.target, r.side);
    }
    let _ = write!(o, "\n|---|");
    for _ in &rs {
        let _ = write!(o, "---|");
    }
    let _ = writeln!(o);
    for f in fops.iter().map(String::as_str).chain(["total"]) {
        let label = if f == "total" { "**all fops**" } else { f };
        let _ = write!(o, "| {label} |");
        for r in &rs {
            let c = match rate(r, f) {
                Some(v) => fmt_num(v),
                None => "—".into(),
            };
            let _ = write!(o, " {c} |");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o);
    let no_window: Vec<String> = rs
        .iter()
        .filter(|r| r.per_op.is_empty())
        .map(|r| format!("{} {}", r.target, r.side))
        .collect();
    if !no_window.is_empty() {
        let _ = writeln!(
            o,
            "No rate for {} (no W6 result or execute window in the same round).\n",
            no_window.join(", ")
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str = "\
META rounds=2
TARGET name=bindfs role=fuse-floor info=x
TARGET name=xlfs role=xlfs info=y
round=1 target=xlfs workload=w6 clients=8 secs=60 mbps=50 ops=6000 window_secs=30
round=1 target=xlfs workload=w6 phase=ops NTCreateX=10
round=1 target=xlfs workload=w6 phase=fops side=client xlator=x/io-stats total=9000 lookup=6000 open=3000
round=1 target=xlfs workload=w6 phase=fops side=brick xlator=b/io-stats total=3000 lookup=3000
round=2 target=xlfs workload=w6 clients=8 secs=60 mbps=50 ops=12000 window_secs=60
round=2 target=xlfs workload=w6 phase=fops side=client xlator=x/io-stats total=12000 lookup=12000
round=3 target=xlfs workload=w6 phase=fops side=client xlator=x/io-stats total=5 lookup=5
";

    #[test]
    fn calls_per_operation_over_the_same_window() {
        let raw = Raw::parse(RAW);
        assert!(raw.malformed.is_empty(), "{:?}", raw.malformed);
        let rs = rates(&raw);
        assert_eq!(rs.len(), 2);
        let c = rs.iter().find(|r| r.side == "client").expect("client");
        // round 1: 6000 ops in 60 s, window 30 s -> 3000 ops; 6000 lookups -> 2.0
        // round 2: 12000 ops, whole window -> 1.0; round 3 has no result: no rate
        assert_eq!(c.per_op["lookup"].n, 2);
        assert!((c.per_op["lookup"].median - 1.5).abs() < 1e-9);
        assert!((c.per_op["open"].median - 1.0).abs() < 1e-9);
        assert_eq!(c.per_op["total"].n, 2);
        assert_eq!(c.calls["lookup"].len(), 3, "raw calls of every round kept");
        let b = rs.iter().find(|r| r.side == "brick").expect("brick");
        assert!((b.per_op["lookup"].median - 1.0).abs() < 1e-9);
        let md = markdown(&raw);
        assert!(md.contains("| fop | xlfs client | xlfs brick |"), "{md}");
        assert!(md.contains("| lookup | 1.50 | 1.00 |"), "{md}");
        assert!(md.contains("| open | 1.00 | — |"), "{md}");
        assert!(md.contains("| **all fops** | 2.00 | 1.00 |"), "{md}");
    }

    #[test]
    fn no_fop_lines_no_section() {
        assert!(
            markdown(&Raw::parse(
                "round=1 target=xlfs workload=w6 mbps=1 ops=1 secs=1 window_secs=1\n"
            ))
            .is_empty()
        );
    }
}
