//! Statedumps of io-cache: occupancy and counters.

use xlator_api::Dump;

use crate::cache::Snapshot;

/// The statedump of `s`.
pub fn render(s: &Snapshot) -> Dump {
    let c = &s.counters;
    let fields: [(&str, u64); 14] = [
        ("page_size", s.page_size),
        ("cache_size", s.limit),
        ("cache_used", s.used),
        ("pages", s.pages as u64),
        ("files", s.files as u64),
        ("hits", c.hits),
        ("misses", c.misses),
        ("joins", c.joins),
        ("revalidations", c.revalidations),
        ("stale", c.stale),
        ("invalidations", c.invalidations),
        ("evictions", c.evictions),
        ("bypassed", c.bypassed),
        ("hit_percent", hit_percent(c.hits, c.misses + c.joins)),
    ];
    Dump::counters(&fields)
}

fn hit_percent(hits: u64, others: u64) -> u64 {
    let total = hits + others;
    (hits * 100).checked_div(total).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Counters;

    #[test]
    fn text_and_json_carry_the_counters() {
        let s = Snapshot {
            counters: Counters {
                hits: 3,
                misses: 1,
                ..Counters::default()
            },
            used: 4096,
            limit: 1 << 20,
            pages: 1,
            files: 1,
            page_size: 4096,
        };
        let d = render(&s);
        let t = d.to_text(2);
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().eq(["cache_used", "4096"]))
                && t.lines()
                    .any(|l| l.split_whitespace().eq(["hit_percent", "75"])),
            "{t}"
        );
        let j = d.to_json();
        assert!(
            j.starts_with('{') && j.ends_with('}') && j.contains("\"hits\": 3"),
            "{j}"
        );
    }
}
