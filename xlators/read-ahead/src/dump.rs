//! Statedumps of read-ahead: memory and counters, as text or JSON.

use xlator_api::DumpFormat;

use crate::ahead::Snapshot;

/// Renders `s` in `format`.
pub fn render(s: &Snapshot, format: DumpFormat) -> String {
    let c = &s.counters;
    let fields: [(&str, u64); 12] = [
        ("page_size", s.page_size),
        ("page_count", s.page_count),
        ("fds", s.fds as u64),
        ("pages", s.pages as u64),
        ("bytes", s.bytes),
        ("hits", c.hits),
        ("misses", c.misses),
        ("prefetched", c.prefetched),
        ("direct", c.direct),
        ("fallbacks", c.fallbacks),
        ("drops", c.drops),
        ("hit_percent", percent(c.hits, c.hits + c.misses)),
    ];
    xlator_api::render_counters(format, "performance/read-ahead", &fields)
}

fn percent(part: u64, total: u64) -> u64 {
    (part * 100).checked_div(total).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fds::Counters;

    #[test]
    fn text_and_json_carry_the_counters() {
        let s = Snapshot {
            counters: Counters {
                hits: 9,
                misses: 1,
                prefetched: 4,
                ..Counters::default()
            },
            fds: 1,
            pages: 4,
            bytes: 4 << 17,
            page_size: 1 << 17,
            page_count: 4,
        };
        let t = render(&s, DumpFormat::Text);
        assert!(
            t.contains("prefetched   4") && t.contains("hit_percent  90"),
            "{t}"
        );
        let j = render(&s, DumpFormat::Json);
        assert!(j.ends_with('}') && j.contains("\"fds\": 1"), "{j}");
    }
}
