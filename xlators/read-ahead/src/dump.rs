//! Statedumps of read-ahead: memory and counters.

use xlator_api::Dump;

use crate::ahead::Snapshot;

/// The statedump of `s`.
pub fn render(s: &Snapshot) -> Dump {
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
    Dump::counters(&fields)
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
        let d = render(&s);
        let t = d.to_text(2);
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().eq(["prefetched", "4"]))
                && t.lines()
                    .any(|l| l.split_whitespace().eq(["hit_percent", "90"])),
            "{t}"
        );
        let j = d.to_json();
        assert!(j.ends_with('}') && j.contains("\"fds\": 1"), "{j}");
    }
}
