//! debug/io-stats: per-fop call, error, byte and latency counters
