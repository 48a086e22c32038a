//! The options of performance/write-behind. All of them are reconfigurable: a change applies
//! to the next request (a smaller window makes writers wait until the cached bytes drain
//! below it; nothing already acknowledged is dropped).

use std::time::Duration;

use crate::window::Limits;

xlator_api::options! {
    /// Options of performance/write-behind.
    pub struct WriteBehindOptions {
        /// Bytes of acknowledged but unfinished writes each file may hold (GlusterFS
        /// `cache-size`). A write that does not fit waits until earlier ones finish; a single
        /// write larger than the window is taken when the file has nothing cached.
        pub window_size: u64 = OptionSpec::size("window-size", "1MiB")
            .range(4 << 10, 1 << 30)
            .reconfigurable(),
        /// Largest write built by joining strictly contiguous writes of the same fd and
        /// caller. 128 KiB is GlusterFS's default and FUSE's usual max_write; larger
        /// aggregates (up to 1 MiB) pay off over high-latency links and erasure coding.
        pub aggregate_size: u64 = OptionSpec::size("aggregate-size", "128KiB")
            .range(4 << 10, 16 << 20)
            .reconfigurable(),
        /// Acknowledge `flush` (close) at once when writes are still in flight and send it
        /// after them; a write error found later is reported by the next fsync, flush or
        /// write of the file. Off (the default): flush waits for the writes and reports their
        /// errors, so a file closed here is complete on the bricks when close(2) returns and
        /// another client that opens it then sees all of it (close-to-open consistency, see
        /// docs/consistency.md). GlusterFS defaults to on and gives that guarantee up.
        pub flush_behind: bool = OptionSpec::bool("flush-behind", "off").reconfigurable(),
        /// Send a write at once when nothing of its file is in flight, instead of holding it
        /// to grow an aggregate. Off: a partial aggregate waits until it is full, another
        /// request follows it, the window fills, a barrier (fsync, flush, read...) needs it, or
        /// `aggregate-wait` passes.
        pub trickling_writes: bool =
            OptionSpec::bool("trickling-writes", "on").reconfigurable(),
        /// With trickling-writes off: the longest a partial aggregate waits for the next
        /// write before it is sent anyway, so a writer that stops (a log line, the last block
        /// before a pause) is on the bricks within this time and not only at its next
        /// fsync or close.
        pub aggregate_wait: Duration = OptionSpec::duration("aggregate-wait", "1ms")
            .range(0, 1000)
            .reconfigurable(),
        /// Writes through fds opened with O_DIRECT bypass the cache (after the file's earlier
        /// cached writes finished), so the caller gets the child's answer.
        pub strict_o_direct: bool = OptionSpec::bool("strict-o-direct", "off").reconfigurable(),
    }
}

/// The settings the engine reads on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub limits: Limits,
    pub flush_behind: bool,
    pub strict_o_direct: bool,
    pub aggregate_wait: Duration,
}

impl From<&WriteBehindOptions> for Config {
    fn from(o: &WriteBehindOptions) -> Config {
        Config {
            limits: Limits {
                window: o.window_size,
                aggregate: o.aggregate_size,
                trickle: o.trickling_writes,
            },
            flush_behind: o.flush_behind,
            strict_o_direct: o.strict_o_direct,
            aggregate_wait: o.aggregate_wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::{Options, XlatorOptions};

    use super::*;

    fn parse(set: &[(&str, &str)]) -> Result<WriteBehindOptions, String> {
        let schema = WriteBehindOptions::schema();
        let mut o = Options::new();
        for s in &schema {
            o.set(&s.key, &s.default);
        }
        for (k, v) in set {
            let spec = schema
                .iter()
                .find(|s| s.key.as_str() == *k)
                .ok_or_else(|| format!("no option {k}"))?;
            spec.check(v)?;
            o.set(k, v);
        }
        WriteBehindOptions::from_options(&o)
    }

    #[test]
    fn defaults_match_the_documentation() {
        let c = Config::from(&parse(&[]).expect("defaults parse"));
        assert_eq!(c.limits.window, 1 << 20);
        assert_eq!(c.limits.aggregate, 128 << 10);
        assert!(c.limits.trickle && !c.flush_behind && !c.strict_o_direct);
        assert_eq!(c.aggregate_wait, Duration::from_millis(1));
        let schema = WriteBehindOptions::schema();
        assert!(schema.iter().all(|s| s.reconfigurable && !s.doc.is_empty()));
    }

    #[test]
    fn ranges_are_enforced() {
        assert!(parse(&[("window-size", "1KiB")]).is_err());
        assert!(parse(&[("window-size", "2GiB")]).is_err());
        assert!(parse(&[("aggregate-size", "32MiB")]).is_err());
        let o = parse(&[("window-size", "4MiB"), ("aggregate-size", "1MiB")]).expect("valid");
        assert_eq!((o.window_size, o.aggregate_size), (4 << 20, 1 << 20));
    }
}
