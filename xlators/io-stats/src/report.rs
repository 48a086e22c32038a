//! Renders a [`StatsSnapshot`] as the text table or the JSON document of a statedump.

use std::fmt::Write as _;

use serde::Serialize;

use crate::histogram::HistogramSnapshot;
use crate::stats::{StatsReport, StatsSnapshot};

/// What a dump says about the instance besides its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Header<'a> {
    pub xlator: &'a str,
    #[serde(rename = "type")]
    pub type_name: &'a str,
    pub count_fop_hits: bool,
    pub latency_measurement: bool,
}

#[derive(Serialize)]
struct JsonDump<'a> {
    #[serde(flatten)]
    header: &'a Header<'a>,
    #[serde(flatten)]
    stats: StatsReport,
}

/// The JSON dump: the header fields, then [`StatsReport`]'s.
pub fn json(header: &Header<'_>, snap: &StatsSnapshot) -> String {
    let doc = JsonDump {
        header,
        stats: snap.report(),
    };
    serde_json::to_string_pretty(&doc)
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", format!("io-stats dump: {e}")))
}

/// The text dump: a header, one row per active fop, then errno and histogram details.
pub fn text(h: &Header<'_>, snap: &StatsSnapshot) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; the `let _` keeps that visible instead of unwrapping.
    let _ = write_text(&mut out, h, snap);
    out
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn write_text(out: &mut String, h: &Header<'_>, snap: &StatsSnapshot) -> std::fmt::Result {
    writeln!(
        out,
        "{} {:?}: uptime {:.3}s, count-fop-hits {}, latency-measurement {}",
        h.type_name,
        h.xlator,
        snap.uptime.as_secs_f64(),
        on_off(h.count_fop_hits),
        on_off(h.latency_measurement),
    )?;
    writeln!(
        out,
        "totals: {} calls, {} errors, {} bytes read, {} bytes written",
        snap.total_calls(),
        snap.total_errors(),
        snap.bytes_read(),
        snap.bytes_written(),
    )?;
    if snap.active().next().is_none() {
        return writeln!(out, "no fops yet");
    }
    writeln!(
        out,
        "\n{:<13}{:>10}{:>8}{:>12}{:>9}{:>11}{:>9}{:>9}{:>9}",
        "fop", "calls", "errors", "bytes", "min-us", "mean-us", "p50-us", "p99-us", "max-us"
    )?;
    for f in snap.active() {
        let bytes = if f.bytes > 0 {
            f.bytes.to_string()
        } else {
            "-".to_owned()
        };
        let l = &f.latency_us;
        let (min, mean, p50, p99, max) = if l.count == 0 {
            let d = || "-".to_owned();
            (d(), d(), d(), d(), d())
        } else {
            (
                l.min.to_string(),
                format!("{:.1}", l.mean()),
                l.percentile(0.5).to_string(),
                l.percentile(0.99).to_string(),
                l.max.to_string(),
            )
        };
        writeln!(
            out,
            "{:<13}{:>10}{:>8}{:>12}{:>9}{:>11}{:>9}{:>9}{:>9}",
            f.fop.name(),
            f.calls,
            f.errors,
            bytes,
            min,
            mean,
            p50,
            p99,
            max
        )?;
    }
    let failing: Vec<_> = snap.active().filter(|f| !f.errnos.is_empty()).collect();
    if !failing.is_empty() {
        writeln!(out, "\nerrors by errno:")?;
        for f in failing {
            let list: Vec<String> = f.errnos.iter().map(|(e, n)| format!("{e}={n}")).collect();
            writeln!(out, "  {:<13}{}", f.fop.name(), list.join(" "))?;
        }
    }
    let timed: Vec<_> = snap.active().filter(|f| f.latency_us.count > 0).collect();
    if !timed.is_empty() {
        writeln!(out, "\nlatency histograms (us, [low,high):count):")?;
        for f in timed {
            writeln!(out, "  {:<13}{}", f.fop.name(), buckets(&f.latency_us))?;
        }
    }
    if snap.read_sizes.count > 0 || snap.write_sizes.count > 0 {
        writeln!(out, "\nI/O sizes (bytes, [low,high):count):")?;
        for (what, h) in [("readv", &snap.read_sizes), ("writev", &snap.write_sizes)] {
            if h.count > 0 {
                writeln!(out, "  {:<13}{}", what, buckets(h))?;
            }
        }
    }
    Ok(())
}

fn buckets(h: &HistogramSnapshot) -> String {
    let parts: Vec<String> = h
        .report()
        .buckets
        .iter()
        .map(|b| {
            let hi = if b.lt == u64::MAX {
                "inf".to_owned()
            } else {
                b.lt.to_string()
            };
            format!("[{},{}):{}", b.ge, hi, b.count)
        })
        .collect();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use xlator_api::{Errno, Fop};

    use super::*;
    use crate::stats::{Io, Stats};

    fn header() -> Header<'static> {
        Header {
            xlator: "stats",
            type_name: "debug/io-stats",
            count_fop_hits: true,
            latency_measurement: true,
        }
    }

    fn sample() -> StatsSnapshot {
        let s = Stats::new();
        s.count(Fop::Lookup, Err(Errno::ENOENT));
        s.time(Fop::Lookup, Duration::from_micros(3));
        s.count(Fop::Readv, Ok(Io::Read(4096)));
        s.time(Fop::Readv, Duration::from_micros(40));
        s.snapshot()
    }

    #[test]
    fn text_has_header_rows_errnos_and_histograms() {
        let t = text(&header(), &sample());
        assert!(t.starts_with("debug/io-stats \"stats\": uptime "), "{t}");
        assert!(
            t.contains("totals: 2 calls, 1 errors, 4096 bytes read, 0 bytes written"),
            "{t}"
        );
        let row = t
            .lines()
            .find(|l| l.starts_with("readv "))
            .expect("readv row");
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            ["readv", "1", "0", "4096", "40", "40.0", "40", "40", "40"]
        );
        assert!(t.contains("  lookup       ENOENT=1"), "{t}");
        assert!(t.contains("  readv        [32,64):1"), "{t}");
        assert!(t.contains("  readv        [4096,8192):1"), "{t}");
        assert!(!t.contains("\nstat "), "inactive fops are left out: {t}");
    }

    #[test]
    fn text_of_idle_instance() {
        let t = text(&header(), &Stats::new().snapshot());
        assert!(t.ends_with("no fops yet\n"), "{t}");
    }

    #[test]
    fn json_round_trips_through_serde() {
        let j = json(&header(), &sample());
        let v: serde_json::Value = serde_json::from_str(&j).expect("valid JSON");
        assert_eq!(v["xlator"], "stats");
        assert_eq!(v["type"], "debug/io-stats");
        assert_eq!(v["count_fop_hits"], true);
        assert_eq!(v["bytes_read"], 4096);
        assert_eq!(v["fops"]["lookup"]["errnos"]["ENOENT"], 1);
        assert_eq!(v["fops"]["readv"]["latency_us"]["p50"], 40);
        assert!(v["fops"]["lookup"].get("bytes").is_none());
        assert!(v["fops"].get("stat").is_none());
    }
}
