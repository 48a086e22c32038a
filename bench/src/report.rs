//! `xlfs-bench report`: turn the raw file written by `bench/run.sh` into one markdown table per
//! workload (median and min–max per target, ratios to the floors) and a JSON document with every
//! raw value.
//!
//! The raw file is line oriented; every line is one of
//!
//! ```text
//! # comment                                          (ignored, as are blank lines)
//! META key=value with spaces                         run description (date, versions, knobs)
//! TARGET name=xlfs role=xlfs info=free text          a measured target, in table order
//! SKIP target=xlfs-replica2 reason=free text         a target that could not be set up
//! ERROR round=2 target=xlfs workload=w3 rc=1 args=.. a workloads.sh call that failed
//! round=1 target=brick workload=w1 bs=4k mbps=258.3  a RESULT line of workloads.sh, tagged
//! ```
//!
//! Anything else is reported as malformed (never silently dropped).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// Targets that are floors when no `TARGET` line gives a role.
const DEFAULT_FLOORS: &[&str] = &["brick", "bindfs", "bindfs-mt"];

/// One tagged RESULT line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub line: usize,
    pub round: u32,
    pub target: String,
    pub workload: String,
    /// Every `key=value` of the line except round/target/workload, in order.
    pub fields: BTreeMap<String, String>,
}

impl Sample {
    /// A numeric field; `None` when missing, not a number, or not finite (`nan`).
    pub fn num(&self, key: &str) -> Option<f64> {
        let v: f64 = self.fields.get(key)?.parse().ok()?;
        v.is_finite().then_some(v)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetInfo {
    pub name: String,
    pub role: String,
    pub info: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skip {
    pub target: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunError {
    pub line: usize,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Malformed {
    pub line: usize,
    pub text: String,
    pub why: String,
}

/// Everything read from a raw file.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Raw {
    pub meta: BTreeMap<String, String>,
    pub targets: Vec<TargetInfo>,
    pub skipped: Vec<Skip>,
    pub errors: Vec<RunError>,
    pub malformed: Vec<Malformed>,
    pub samples: Vec<Sample>,
}

/// `key=rest of the line` for the first `=`.
fn split_kv(s: &str) -> Option<(&str, &str)> {
    let (k, v) = s.split_once('=')?;
    (!k.is_empty() && !k.contains(char::is_whitespace)).then_some((k.trim(), v))
}

/// Parses `a=1 b=2 tail=free text` where `tail` (if given) takes the rest of the line.
fn parse_fields(s: &str, tail: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let (tok, after) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (k, v) = tok
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| format!("token {tok:?} is not key=value"))?;
        if Some(k) == tail {
            let (_, whole) = split_kv(rest).ok_or("bad tail")?;
            out.push((k.to_string(), whole.trim().to_string()));
            return Ok(out);
        }
        out.push((k.to_string(), v.to_string()));
        rest = after.trim_start();
    }
    Ok(out)
}

fn take(fields: &mut Vec<(String, String)>, key: &str) -> Option<String> {
    let i = fields.iter().position(|(k, _)| k == key)?;
    Some(fields.remove(i).1)
}

impl Raw {
    pub fn parse(text: &str) -> Raw {
        let mut raw = Raw::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim_end();
            let t = line.trim_start();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if let Err(why) = raw.parse_line(n, t) {
                raw.malformed.push(Malformed {
                    line: n,
                    text: t.to_string(),
                    why,
                });
            }
        }
        raw
    }

    fn parse_line(&mut self, n: usize, t: &str) -> Result<(), String> {
        let (word, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
        match word {
            "META" => {
                let (k, v) = split_kv(rest.trim()).ok_or("META needs key=value")?;
                self.meta.insert(k.to_string(), v.trim().to_string());
            }
            "TARGET" => {
                let mut f = parse_fields(rest, Some("info"))?;
                let name = take(&mut f, "name").ok_or("TARGET needs name=")?;
                let role = take(&mut f, "role").unwrap_or_default();
                let info = take(&mut f, "info").unwrap_or_default();
                self.targets.push(TargetInfo { name, role, info });
            }
            "SKIP" => {
                let mut f = parse_fields(rest, Some("reason"))?;
                let target = take(&mut f, "target").ok_or("SKIP needs target=")?;
                let reason = take(&mut f, "reason").unwrap_or_default();
                self.skipped.push(Skip { target, reason });
            }
            "ERROR" => self.errors.push(RunError {
                line: n,
                text: rest.trim().to_string(),
            }),
            _ => {
                let mut f = parse_fields(t, None)?;
                let round = take(&mut f, "round").ok_or("no round=")?;
                let round: u32 = round
                    .parse()
                    .map_err(|_| format!("round={round:?} is not a number"))?;
                let target = take(&mut f, "target").ok_or("no target=")?;
                let workload = take(&mut f, "workload").ok_or("no workload=")?;
                if target.is_empty() || workload.is_empty() {
                    return Err("empty target or workload".into());
                }
                if f.iter().any(|(k, _)| k == "ERROR") {
                    return Err("error marker inside a result line".into());
                }
                self.samples.push(Sample {
                    line: n,
                    round,
                    target,
                    workload,
                    fields: f.into_iter().collect(),
                });
            }
        }
        Ok(())
    }

    /// Targets in table order: `TARGET` lines first, then others by first appearance.
    pub fn target_order(&self) -> Vec<String> {
        let mut v: Vec<String> = self.targets.iter().map(|t| t.name.clone()).collect();
        for s in &self.samples {
            if !v.contains(&s.target) {
                v.push(s.target.clone());
            }
        }
        v
    }

    pub fn is_floor(&self, target: &str) -> bool {
        match self.targets.iter().find(|t| t.name == target) {
            Some(t) if !t.role.is_empty() => t.role.contains("floor"),
            _ => DEFAULT_FLOORS.contains(&target),
        }
    }
}

/// Median (mean of the two middle values for an even count), min and max.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
    pub values: Vec<f64>,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            median,
            min: v[0],
            max: v[n - 1],
            n,
            values: values.to_vec(),
        })
    }
}

/// `a / b`, `None` when either is missing or `b` is zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// A metric shown in a table.
struct Metric {
    key: &'static str,
    label: &'static str,
    /// Whether a ratio to the floors means something.
    ratio: bool,
}

/// How one workload becomes one table.
struct TableSpec {
    workload: &'static str,
    title: &'static str,
    note: &'static str,
    /// The key that splits a workload into variants (columns), if any.
    variant: Option<fn(&Sample) -> Option<String>>,
    metrics: &'static [Metric],
}

fn w1_variant(s: &Sample) -> Option<String> {
    s.fields.get("bs").map(|b| format!("bs={b}"))
}
fn w3_variant(s: &Sample) -> Option<String> {
    let bs = s.fields.get("bs")?;
    Some(match s.fields.get("direct").map(String::as_str) {
        Some("0") => format!("{bs} buffered"),
        _ => bs.clone(),
    })
}
fn w6_variant(s: &Sample) -> Option<String> {
    s.fields.get("clients").map(|c| format!("{c} clients"))
}
fn w4_variant(s: &Sample) -> Option<String> {
    s.fields.get("p").map(|p| format!("P={p}"))
}

const SPECS: &[TableSpec] = &[
    TableSpec {
        workload: "w1",
        title: "W1 sequential write (dd, conv=fsync), MB/s",
        note: "Higher is better. Each cell: median (min–max) of the rounds; the ratio rows are \
               target median ÷ floor median (1.00 = as fast as the floor).",
        variant: Some(w1_variant),
        metrics: &[Metric {
            key: "mbps",
            label: "MB/s",
            ratio: true,
        }],
    },
    TableSpec {
        workload: "w2",
        title: "W2 big-file write, drop caches, read back (bs=1M), MB/s",
        note: "Higher is better; read/write is read MB/s ÷ write MB/s of the same round (a \
               striped or replicated layout that reads slower than it writes shows < 1). Ratio \
               rows: target median ÷ floor median.",
        variant: None,
        metrics: &[
            Metric {
                key: "write_mbps",
                label: "write MB/s",
                ratio: true,
            },
            Metric {
                key: "read_mbps",
                label: "read MB/s",
                ratio: true,
            },
            Metric {
                key: "read_over_write",
                label: "read/write",
                ratio: false,
            },
        ],
    },
    TableSpec {
        workload: "w3",
        title: "W3 small files, fio random 60% read / 40% write over 64 KiB files, ops/s",
        note: "Higher is better; ops/s = read + write IOPS of all jobs, O_DIRECT unless marked \
               buffered (bindfs does not forward O_DIRECT). Ratio rows: target ÷ floor.",
        variant: Some(w3_variant),
        metrics: &[Metric {
            key: "ops_per_s",
            label: "ops/s",
            ratio: true,
        }],
    },
    TableSpec {
        workload: "w4",
        title: "W4 concurrent whole-file readers (caches dropped), files/s",
        note: "Higher is better; P readers share the corpus of 500–800 KiB files. Ratio rows: \
               target ÷ floor.",
        variant: Some(w4_variant),
        metrics: &[Metric {
            key: "files_per_s",
            label: "files/s",
            ratio: true,
        }],
    },
    TableSpec {
        workload: "w5",
        title: "W5 untar a Linux source tree, sync, rm -rf, seconds",
        note: "Lower is better for seconds (ratio rows: target seconds ÷ floor seconds, 2.0 = \
               twice as slow as the floor); higher is better for tar entries/s (entries ÷ tar \
               seconds; a two-mount target extracts one copy per mount at once, twice the \
               entries, so compare it by entries/s).",
        variant: None,
        metrics: &[
            Metric {
                key: "tar_secs",
                label: "tar s",
                ratio: true,
            },
            Metric {
                key: "sync_secs",
                label: "sync s",
                ratio: true,
            },
            Metric {
                key: "rm_secs",
                label: "rm s",
                ratio: true,
            },
            Metric {
                key: "total_secs",
                label: "total s",
                ratio: true,
            },
            Metric {
                key: "entries_per_s_tar",
                label: "tar entries/s",
                ratio: true,
            },
        ],
    },
    TableSpec {
        workload: "w6",
        title: "W6 dbench (client.txt load), MB/s",
        note: "Higher is better: dbench's \"Throughput ... MB/sec\" of the execute phase; max \
               latency is dbench's max_latency (ms, lower is better). Ratio rows: target ÷ \
               floor.",
        variant: Some(w6_variant),
        metrics: &[
            Metric {
                key: "mbps",
                label: "MB/s",
                ratio: true,
            },
            Metric {
                key: "max_latency_ms",
                label: "max latency ms",
                ratio: false,
            },
        ],
    },
];

/// One column of a table: a variant (or none) and a metric.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub label: String,
    pub variant: Option<String>,
    pub metric: String,
    pub ratio: bool,
    /// Per target.
    pub stats: BTreeMap<String, Stats>,
    /// target -> floor -> target median ÷ floor median.
    pub ratios: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub workload: String,
    pub title: String,
    pub note: String,
    pub targets: Vec<String>,
    pub columns: Vec<Column>,
}

/// Sort key of a variant label: the first number in it (with k/M/G suffixes), then the text.
fn variant_key(v: &str) -> (u64, String) {
    let start = v.find(|c: char| c.is_ascii_digit());
    let n = start
        .map(|i| {
            let digits: String = v[i..].chars().take_while(char::is_ascii_digit).collect();
            let base: u64 = digits.parse().unwrap_or(0);
            let mul = match v[i + digits.len()..].chars().next() {
                Some('k' | 'K') => 1 << 10,
                Some('m' | 'M') => 1 << 20,
                Some('g' | 'G') => 1 << 30,
                _ => 1,
            };
            base.saturating_mul(mul)
        })
        .unwrap_or(u64::MAX);
    (n, v.to_string())
}

/// Measurement samples of a workload (round 0 is preparation, not measured).
fn measured<'a>(raw: &'a Raw, workload: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
    raw.samples
        .iter()
        .filter(move |s| s.workload == workload && s.round > 0 && !s.fields.contains_key("phase"))
}

/// The value of a metric in a sample, including derived ones.
fn metric_value(s: &Sample, key: &str) -> Option<f64> {
    match key {
        "total_secs" => s
            .num("total_secs")
            .or_else(|| Some(s.num("tar_secs")? + s.num("sync_secs")? + s.num("rm_secs")?)),
        _ => s.num(key),
    }
}

fn build_table(raw: &Raw, spec: &TableSpec) -> Option<Table> {
    let samples: Vec<&Sample> = measured(raw, spec.workload).collect();
    let errored = raw
        .errors
        .iter()
        .any(|e| e.text.contains(&format!("workload={}", spec.workload)));
    if samples.is_empty() && !errored {
        return None;
    }
    let order = raw.target_order();
    let targets: Vec<String> = order
        .iter()
        .filter(|t| {
            samples.iter().any(|s| &s.target == *t)
                || raw.errors.iter().any(|e| {
                    e.text.contains(&format!("target={t} "))
                        && e.text.contains(&format!("workload={}", spec.workload))
                })
        })
        .cloned()
        .collect();
    let mut variants: Vec<Option<String>> = match spec.variant {
        None => vec![None],
        Some(f) => {
            let mut v: Vec<String> = samples.iter().filter_map(|s| f(s)).collect();
            v.sort_by_key(|x| variant_key(x));
            v.dedup();
            v.into_iter().map(Some).collect()
        }
    };
    if variants.is_empty() {
        variants.push(None);
    }
    let floors: Vec<&String> = targets.iter().filter(|t| raw.is_floor(t)).collect();
    let mut columns = Vec::new();
    for variant in &variants {
        for m in spec.metrics {
            let label = match (variant, spec.metrics.len()) {
                (Some(v), 1) => v.clone(),
                (Some(v), _) => format!("{v} {}", m.label),
                (None, _) => m.label.to_string(),
            };
            let mut stats = BTreeMap::new();
            for t in &targets {
                let vals: Vec<f64> = samples
                    .iter()
                    .filter(|s| &s.target == t)
                    .filter(|s| match (spec.variant, variant) {
                        (Some(f), Some(v)) => f(s).as_ref() == Some(v),
                        _ => true,
                    })
                    .filter_map(|s| metric_value(s, m.key))
                    .collect();
                if let Some(st) = Stats::of(&vals) {
                    stats.insert(t.clone(), st);
                }
            }
            let mut ratios = BTreeMap::new();
            if m.ratio {
                for (ti, t) in targets.iter().enumerate() {
                    let mut per = BTreeMap::new();
                    for f in &floors {
                        // floors only against the floors listed before them (bindfs ÷ brick)
                        let fi = targets.iter().position(|x| x == *f).unwrap_or(usize::MAX);
                        if *f == t || (raw.is_floor(t) && fi > ti) {
                            continue;
                        }
                        let r = ratio(
                            stats.get(t).map(|s| s.median),
                            stats.get(*f).map(|s| s.median),
                        );
                        if let Some(r) = r {
                            per.insert((*f).clone(), r);
                        }
                    }
                    if !per.is_empty() {
                        ratios.insert(t.clone(), per);
                    }
                }
            }
            columns.push(Column {
                label,
                variant: variant.clone(),
                metric: m.key.to_string(),
                ratio: m.ratio,
                stats,
                ratios,
            });
        }
    }
    Some(Table {
        workload: spec.workload.to_string(),
        title: spec.title.to_string(),
        note: spec.note.to_string(),
        targets,
        columns,
    })
}

/// One table per workload that has results (or errors), in W1..W5 order.
pub fn tables(raw: &Raw) -> Vec<Table> {
    SPECS.iter().filter_map(|s| build_table(raw, s)).collect()
}

/// A number with about three significant digits.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn cell(st: Option<&Stats>, rounds: Option<usize>) -> String {
    match st {
        None => "—".to_string(),
        Some(s) => {
            let mut c = if s.n > 1 {
                format!(
                    "{} ({}–{})",
                    fmt_num(s.median),
                    fmt_num(s.min),
                    fmt_num(s.max)
                )
            } else {
                fmt_num(s.median)
            };
            if rounds.is_some_and(|r| r != s.n) {
                let _ = write!(c, " n={}", s.n);
            }
            c
        }
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The markdown report.
pub fn markdown(raw: &Raw) -> String {
    let mut o = String::new();
    let get = |k: &str| raw.meta.get(k).map(String::as_str).unwrap_or("?");
    let _ = writeln!(
        o,
        "# xlfs benchmarks, {} ({} run)\n",
        get("date"),
        get("mode")
    );
    let _ = writeln!(
        o,
        "Generated by `bench/run.sh` (`xlfs-bench report`). Rounds are interleaved across \
         targets (round 1: every target, round 2: every target, ..., the targets' order rotating \
         by one each round); each cell is the median \
         of the rounds with the min–max in brackets. The machine may be shared and noisy: \
         compare targets within this run, not against other runs.\n"
    );
    let _ = writeln!(o, "## Setup\n");
    let _ = writeln!(o, "| key | value |\n|---|---|");
    for (k, v) in &raw.meta {
        let _ = writeln!(o, "| {k} | {} |", md_escape(v));
    }
    let _ = writeln!(o);
    if !raw.targets.is_empty() {
        let _ = writeln!(o, "Targets:\n");
        for t in &raw.targets {
            let role = if t.role.is_empty() {
                String::new()
            } else {
                format!(" ({})", t.role)
            };
            let _ = writeln!(o, "- `{}`{role}: {}", t.name, t.info);
        }
        let _ = writeln!(o);
    }
    if !raw.skipped.is_empty() {
        let _ = writeln!(o, "Skipped targets:\n");
        for s in &raw.skipped {
            let _ = writeln!(o, "- `{}`: {}", s.target, s.reason);
        }
        let _ = writeln!(o);
    }
    let rounds: Option<usize> = raw.meta.get("rounds").and_then(|r| r.parse().ok());
    let ts = tables(raw);
    if ts.is_empty() {
        let _ = writeln!(o, "No results.\n");
    }
    for t in &ts {
        let _ = writeln!(o, "## {}\n", t.title);
        let _ = writeln!(o, "{}\n", t.note);
        let _ = write!(o, "| target |");
        for c in &t.columns {
            let _ = write!(o, " {} |", c.label);
        }
        let _ = write!(o, "\n|---|");
        for _ in &t.columns {
            let _ = write!(o, "---|");
        }
        let _ = writeln!(o);
        for tg in &t.targets {
            let _ = write!(o, "| {tg} |");
            for c in &t.columns {
                let _ = write!(o, " {} |", cell(c.stats.get(tg), rounds));
            }
            let _ = writeln!(o);
        }
        let floors: Vec<&String> = t.targets.iter().filter(|x| raw.is_floor(x)).collect();
        // every target against every floor, except floors: only against the first one
        let pairs = t.targets.iter().flat_map(|tg| {
            let fl: Vec<&String> = if raw.is_floor(tg) {
                floors
                    .iter()
                    .take(1)
                    .filter(|f| **f != tg)
                    .copied()
                    .collect()
            } else {
                floors.clone()
            };
            fl.into_iter().map(move |f| (tg, f))
        });
        for (tg, f) in pairs {
            if !t.columns.iter().any(|c| c.ratio) {
                continue;
            }
            let _ = write!(o, "| {tg} ÷ {f} |");
            for c in &t.columns {
                let r = c.ratios.get(tg).and_then(|m| m.get(f));
                let s = match (c.ratio, r) {
                    (false, _) => String::new(),
                    (true, None) => "—".to_string(),
                    (true, Some(r)) => format!("{r:.2}"),
                };
                let _ = write!(o, " {s} |");
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(o);
        let errs: Vec<&RunError> = raw
            .errors
            .iter()
            .filter(|e| e.text.contains(&format!("workload={}", t.workload)))
            .collect();
        if !errs.is_empty() {
            let _ = writeln!(o, "Failed runs in this workload (no value recorded):\n");
            for e in errs {
                let _ = writeln!(o, "- `{}`", e.text);
            }
            let _ = writeln!(o);
        }
    }
    o.push_str(&crate::w6fops::markdown(raw));
    let other_errs: Vec<&RunError> = raw
        .errors
        .iter()
        .filter(|e| {
            !SPECS
                .iter()
                .any(|s| e.text.contains(&format!("workload={}", s.workload)))
        })
        .collect();
    if !other_errs.is_empty() {
        let _ = writeln!(o, "## Other errors\n");
        for e in other_errs {
            let _ = writeln!(o, "- `{}`", e.text);
        }
        let _ = writeln!(o);
    }
    if !raw.malformed.is_empty() {
        let _ = writeln!(o, "## Malformed raw lines (ignored)\n");
        for m in &raw.malformed {
            let _ = writeln!(o, "- line {}: {} — `{}`", m.line, m.why, m.text);
        }
        let _ = writeln!(o);
    }
    o
}

/// A raw field as JSON: a number when it is one, else a string.
fn json_value(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && !v.starts_with('+') => serde_json::Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(v.to_string())),
        _ => Value::String(v.to_string()),
    }
}

#[derive(Serialize)]
struct JsonSample<'a> {
    line: usize,
    round: u32,
    target: &'a str,
    workload: &'a str,
    fields: BTreeMap<&'a str, Value>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: u32,
    date: Option<&'a str>,
    mode: Option<&'a str>,
    git_rev: Option<&'a str>,
    kernel: Option<&'a str>,
    versions: BTreeMap<&'a str, &'a str>,
    options: BTreeMap<&'a str, &'a str>,
    knobs: BTreeMap<&'a str, &'a str>,
    meta: &'a BTreeMap<String, String>,
    targets: &'a [TargetInfo],
    skipped: &'a [Skip],
    errors: &'a [RunError],
    malformed: &'a [Malformed],
    tables: Vec<Table>,
    /// W6: io-stats calls per dbench operation of the xlfs targets.
    w6_fops: Vec<crate::w6fops::FopRates>,
    samples: Vec<JsonSample<'a>>,
}

fn with_prefix<'a>(meta: &'a BTreeMap<String, String>, p: &str) -> BTreeMap<&'a str, &'a str> {
    meta.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(p)?, v.as_str())))
        .collect()
}

/// The JSON report: run description, tables with statistics and ratios, every raw sample.
pub fn json(raw: &Raw) -> Value {
    let m = &raw.meta;
    let r = JsonReport {
        schema: 1,
        date: m.get("date").map(String::as_str),
        mode: m.get("mode").map(String::as_str),
        git_rev: m.get("git_rev").map(String::as_str),
        kernel: m.get("kernel").map(String::as_str),
        versions: with_prefix(m, "version."),
        options: with_prefix(m, "opt."),
        knobs: with_prefix(m, "env."),
        meta: m,
        targets: &raw.targets,
        skipped: &raw.skipped,
        errors: &raw.errors,
        malformed: &raw.malformed,
        tables: tables(raw),
        w6_fops: crate::w6fops::rates(raw),
        samples: raw
            .samples
            .iter()
            .map(|s| JsonSample {
                line: s.line,
                round: s.round,
                target: &s.target,
                workload: &s.workload,
                fields: s
                    .fields
                    .iter()
                    .map(|(k, v)| (k.as_str(), json_value(v)))
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_value(r).unwrap_or(Value::Null)
}

/// `xlfs-bench report --raw FILE [--out-md FILE] [--out-json FILE]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut raw_path = None;
    let mut md_path = None;
    let mut json_path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--raw" => raw_path = Some(val("--raw")?),
            "--out-md" => md_path = Some(val("--out-md")?),
            "--out-json" => json_path = Some(val("--out-json")?),
            other => return Err(format!("report: unknown argument {other:?}")),
        }
    }
    let raw_path = raw_path.ok_or("report needs --raw FILE")?;
    let text =
        std::fs::read_to_string(&raw_path).map_err(|e| format!("cannot read {raw_path}: {e}"))?;
    let raw = Raw::parse(&text);
    let md = markdown(&raw);
    match md_path {
        Some(p) => std::fs::write(&p, &md).map_err(|e| format!("cannot write {p}: {e}"))?,
        None => print!("{md}"),
    }
    if let Some(p) = json_path {
        let j = serde_json::to_string_pretty(&json(&raw)).map_err(|e| e.to_string())?;
        std::fs::write(&p, j + "\n").map_err(|e| format!("cannot write {p}: {e}"))?;
    }
    for m in &raw.malformed {
        eprintln!(
            "xlfs-bench report: {raw_path}:{}: malformed line ({}): {}",
            m.line, m.why, m.text
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn median_odd_even_and_minmax() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).expect("stats");
        assert!(approx(s.median, 2.0));
        assert!(approx(s.min, 1.0) && approx(s.max, 3.0));
        assert_eq!(s.n, 3);
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]).expect("stats");
        assert!(approx(s.median, 2.5));
        let s = Stats::of(&[7.5]).expect("stats");
        assert!(approx(s.median, 7.5) && approx(s.min, 7.5) && approx(s.max, 7.5));
        assert!(Stats::of(&[]).is_none());
        let s = Stats::of(&[f64::NAN, 5.0]).expect("stats");
        assert_eq!(s.n, 1);
        assert!(approx(s.median, 5.0));
    }

    #[test]
    fn ratio_handles_missing_and_zero() {
        assert!(approx(ratio(Some(1.0), Some(4.0)).expect("r"), 0.25));
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }

    const SAMPLE: &str = "\
# comment
META date=2026-12-01
META mode=quick
META rounds=3
META version.fio=fio-3.33
META env.W1_MIB=32
TARGET name=brick role=floor info=ext4 dir /var/tmp/x
TARGET name=bindfs role=fuse-floor info=bindfs of it
TARGET name=xlfs role=xlfs info=single brick
SKIP target=xlfs-replica2 reason=replica 2 needs translator type cluster/replicate, which is not available
round=0 target=brick workload=w3 phase=prep files=400 secs=1.0 files_per_s=400
round=1 target=brick workload=w1 bs=4k bytes=1 secs=1 mbps=100.0
round=1 target=bindfs workload=w1 bs=4k bytes=1 secs=1 mbps=50.0
round=1 target=xlfs workload=w1 bs=4k bytes=1 secs=1 mbps=20.0
round=1 target=xlfs workload=w1 bs=1M bytes=1 secs=1 mbps=300.0
round=2 target=brick workload=w1 bs=4k bytes=1 secs=1 mbps=300.0
round=2 target=bindfs workload=w1 bs=4k bytes=1 secs=1 mbps=70.0
round=2 target=xlfs workload=w1 bs=4k bytes=1 secs=1 mbps=40.0
round=3 target=brick workload=w1 bs=4k bytes=1 secs=1 mbps=200.0
round=3 target=bindfs workload=w1 bs=4k bytes=1 secs=1 mbps=nan
round=3 target=xlfs workload=w1 bs=4k bytes=1 secs=1 mbps=30.0
round=1 target=xlfs workload=w5 entries=10 tar_secs=1.5 sync_secs=0.5 rm_secs=1.0
round=1 target=brick workload=w5 entries=10 tar_secs=0.5 sync_secs=0.25 rm_secs=0.25
ERROR round=2 target=xlfs workload=w5 rc=1 args=w5
this line is garbage
round=x target=brick workload=w1 mbps=1
round=1 workload=w1 mbps=1
round=1 target=brick workload=w1 mbps
";

    #[test]
    fn parse_counts_every_kind_of_line() {
        let raw = Raw::parse(SAMPLE);
        assert_eq!(raw.meta.get("date").map(String::as_str), Some("2026-12-01"));
        assert_eq!(raw.targets.len(), 3);
        assert_eq!(raw.targets[1].info, "bindfs of it");
        assert_eq!(raw.skipped.len(), 1);
        assert!(raw.skipped[0].reason.starts_with("replica 2 needs"));
        assert_eq!(raw.errors.len(), 1);
        assert_eq!(raw.samples.len(), 13);
        let lines: Vec<usize> = raw.malformed.iter().map(|m| m.line).collect();
        assert_eq!(raw.malformed.len(), 4, "{:?}", raw.malformed);
        assert!(lines.windows(2).all(|w| w[0] < w[1]));
        assert!(raw.malformed[1].why.contains("round"));
        assert!(raw.malformed[2].why.contains("target"));
        assert!(raw.malformed[3].why.contains("key=value"));
    }

    #[test]
    fn aggregate_median_minmax_ratio_and_missing() {
        let raw = Raw::parse(SAMPLE);
        let ts = tables(&raw);
        let w1 = ts.iter().find(|t| t.workload == "w1").expect("w1 table");
        assert_eq!(w1.targets, vec!["brick", "bindfs", "xlfs"]);
        // variants sorted by size: 4k before 1M
        let labels: Vec<&str> = w1.columns.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, vec!["bs=4k", "bs=1M"]);
        let c4k = &w1.columns[0];
        let b = &c4k.stats["brick"];
        assert!(approx(b.median, 200.0) && approx(b.min, 100.0) && approx(b.max, 300.0));
        // bindfs round 3 was nan: two values, median is their mean
        let f = &c4k.stats["bindfs"];
        assert_eq!(f.n, 2);
        assert!(approx(f.median, 60.0));
        let x = &c4k.stats["xlfs"];
        assert!(approx(x.median, 30.0));
        assert!(approx(c4k.ratios["xlfs"]["brick"], 0.15));
        assert!(approx(c4k.ratios["xlfs"]["bindfs"], 0.5));
        assert!(approx(c4k.ratios["bindfs"]["brick"], 0.3));
        // floors only against the floors before them
        assert!(!c4k.ratios.contains_key("brick"));
        assert!(!c4k.ratios["bindfs"].contains_key("xlfs"));
        // 1M: only xlfs measured, so no ratio at all
        let c1m = &w1.columns[1];
        assert_eq!(c1m.stats.len(), 1);
        assert!(c1m.ratios.is_empty());
        // prep lines (round 0) never make a table
        assert!(ts.iter().all(|t| t.workload != "w3"));
        // w5: derived total, seconds ratios
        let w5 = ts.iter().find(|t| t.workload == "w5").expect("w5 table");
        let total = w5
            .columns
            .iter()
            .find(|c| c.metric == "total_secs")
            .expect("total");
        assert!(approx(total.stats["xlfs"].median, 3.0));
        assert!(approx(total.ratios["xlfs"]["brick"], 3.0));
    }

    #[test]
    fn markdown_shows_cells_ratios_skips_errors() {
        let raw = Raw::parse(SAMPLE);
        let md = markdown(&raw);
        assert!(md.contains("# xlfs benchmarks, 2026-12-01 (quick run)"));
        assert!(md.contains("| target | bs=4k | bs=1M |"), "{md}");
        assert!(md.contains("| brick | 200 (100–300) | — |"), "{md}");
        assert!(md.contains("| bindfs | 60.0 (50.0–70.0) n=2 | — |"), "{md}");
        assert!(md.contains("| xlfs ÷ brick | 0.15 | — |"), "{md}");
        assert!(md.contains("| xlfs ÷ bindfs | 0.50 | — |"), "{md}");
        assert!(md.contains("| bindfs ÷ brick | 0.30 | — |"), "{md}");
        assert!(!md.contains("| brick ÷"), "{md}");
        assert!(md.contains("`xlfs-replica2`: replica 2 needs"));
        assert!(md.contains("round=2 target=xlfs workload=w5 rc=1"));
        assert!(md.contains("line 25"), "{md}");
        assert!(md.contains("| tar s | sync s | rm s | total s |"), "{md}");
    }

    #[test]
    fn json_has_meta_versions_knobs_and_typed_samples() {
        let raw = Raw::parse(SAMPLE);
        let j = json(&raw);
        assert_eq!(j["date"], "2026-12-01");
        assert_eq!(j["versions"]["fio"], "fio-3.33");
        assert_eq!(j["knobs"]["W1_MIB"], "32");
        assert_eq!(j["skipped"][0]["target"], "xlfs-replica2");
        let s = &j["samples"][1];
        assert_eq!(s["target"], "brick");
        assert_eq!(s["fields"]["bs"], "4k");
        assert_eq!(s["fields"]["mbps"], 100.0);
        assert!(s["fields"]["bytes"].is_i64());
        // nan stays a string rather than breaking the JSON
        let nan = j["samples"]
            .as_array()
            .expect("array")
            .iter()
            .find(|s| s["fields"]["mbps"] == "nan");
        assert!(nan.is_some());
        assert_eq!(j["tables"][0]["workload"], "w1");
    }

    #[test]
    fn w6_table_mbps_ratio_to_bindfs_and_ops_lines_left_out() {
        let raw = Raw::parse(
            "TARGET name=bindfs role=fuse-floor info=b\n\
             TARGET name=xlfs role=xlfs info=x\n\
             round=1 target=bindfs workload=w6 clients=8 secs=60 mbps=80 max_latency_ms=60 ops=9\n\
             round=1 target=xlfs workload=w6 clients=8 secs=60 mbps=20 max_latency_ms=200 ops=3\n\
             round=1 target=xlfs workload=w6 phase=ops NTCreateX=5 ReadX=7\n",
        );
        assert!(raw.malformed.is_empty(), "{:?}", raw.malformed);
        let ts = tables(&raw);
        let w6 = ts.iter().find(|t| t.workload == "w6").expect("w6 table");
        let c = &w6.columns[0];
        assert_eq!(c.label, "8 clients MB/s");
        assert_eq!(
            c.stats["xlfs"].n, 1,
            "the phase=ops line is not a measurement"
        );
        assert!(approx(c.ratios["xlfs"]["bindfs"], 0.25));
        let md = markdown(&raw);
        assert!(md.contains("| xlfs ÷ bindfs | 0.25 |  |"), "{md}");
    }

    #[test]
    fn fmt_num_keeps_three_digits() {
        assert_eq!(fmt_num(1234.4), "1234");
        assert_eq!(fmt_num(56.78), "56.8");
        assert_eq!(fmt_num(5.678), "5.68");
        assert_eq!(fmt_num(0.5678), "0.568");
    }

    #[test]
    fn empty_input_makes_a_report_without_tables() {
        let raw = Raw::parse("");
        assert!(markdown(&raw).contains("No results."));
        assert!(tables(&raw).is_empty());
    }
}
