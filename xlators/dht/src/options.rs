//! The options of cluster/distribute.

xlator_api::options! {
    /// Options of cluster/distribute.
    pub struct DhtOptions {
        /// Free space a child must keep: a file whose hashed child has less free goes to the
        /// child with the most free space instead, with a link file on the hashed child
        /// (GlusterFS `min-free-disk`). A percentage of the child's size (`10%`) or a size
        /// (`5GiB`); `0` turns it off. Children's free space is asked with statfs at most once
        /// per `statfs-interval`.
        pub min_free_disk: String = OptionSpec::string("min-free-disk", "10%").reconfigurable(),
        /// How long a child's statfs answer is used for min-free-disk decisions.
        pub statfs_interval: std::time::Duration =
            OptionSpec::duration("statfs-interval", "5s").range(0, 3_600_000).reconfigurable(),
        /// When a name misses on its hashed child and its directory's layout is not trusted
        /// (see the README), look it up on every child once before answering ENOENT
        /// (GlusterFS `lookup-unhashed auto`). Off: the hashed child's answer is final.
        pub lookup_unhashed: bool = OptionSpec::bool("lookup-unhashed", "on").reconfigurable(),
        /// Children being removed (`xlfs volume remove-brick ... start`): their volume names
        /// as in the volfile, comma-separated. They get no hash range when a layout is made or
        /// fixed and no new files; rebalance moves their files to the others. Empty: none.
        pub decommissioned: String = OptionSpec::string("decommissioned", "").reconfigurable(),
    }
}

/// A parsed `min-free-disk`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinFree {
    Off,
    /// Fraction of the child's size, 0 < f < 1.
    Fraction(f64),
    Bytes(u64),
}

impl MinFree {
    pub fn parse(s: &str) -> Result<MinFree, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("min-free-disk {s:?}: not a percentage (say 10%)"))?;
            if !(0.0..100.0).contains(&v) {
                return Err(format!(
                    "min-free-disk {s:?}: a percentage from 0% to below 100%"
                ));
            }
            return Ok(if v == 0.0 {
                MinFree::Off
            } else {
                MinFree::Fraction(v / 100.0)
            });
        }
        let b = xlator_api::parse_size(t)
            .map_err(|e| format!("min-free-disk {s:?}: neither a percentage nor a size: {e}"))?;
        Ok(if b == 0 {
            MinFree::Off
        } else {
            MinFree::Bytes(b)
        })
    }

    /// Whether a child with `free` of `total` bytes available is too full for new files.
    pub fn too_full(&self, free: u64, total: u64) -> bool {
        match *self {
            MinFree::Off => false,
            MinFree::Fraction(f) => (free as f64) < f * total as f64,
            MinFree::Bytes(b) => free < b,
        }
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::XlatorOptions;
    use xlfs_testkit::build::try_options_for;

    use super::*;

    fn parse(set: &[(&str, &str)]) -> Result<DhtOptions, String> {
        DhtOptions::from_options(&try_options_for::<crate::Distribute>(set)?)
    }

    #[test]
    fn min_free_disk_takes_a_percentage_or_a_size() {
        let o = parse(&[]).expect("defaults");
        assert_eq!(MinFree::parse(&o.min_free_disk), Ok(MinFree::Fraction(0.1)));
        assert_eq!(MinFree::parse("1MiB"), Ok(MinFree::Bytes(1 << 20)));
        assert_eq!(MinFree::parse("0"), Ok(MinFree::Off));
        assert_eq!(MinFree::parse("0%"), Ok(MinFree::Off));
        assert!(MinFree::parse("150%").is_err());
        assert!(MinFree::parse("lots").is_err());
        assert!(MinFree::Fraction(0.1).too_full(9, 100));
        assert!(!MinFree::Fraction(0.1).too_full(10, 100));
        assert!(MinFree::Bytes(10).too_full(9, 1000));
        assert!(!MinFree::Off.too_full(0, 100));
        assert!(DhtOptions::schema().iter().all(|s| !s.doc.is_empty()));
    }
}
