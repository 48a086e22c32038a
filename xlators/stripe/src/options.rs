//! The options of cluster/stripe.

xlator_api::options! {
    /// Options of cluster/stripe.
    pub struct StripeOptions {
        /// Size of the units a new file is cut into, placed round robin over the children.
        /// Recorded in each file's geometry xattr at create: a change applies to files
        /// created afterwards, existing files keep theirs. 128 KiB is one FUSE read and one
        /// read-ahead page, so a sequential reader's read-ahead window of `page-count` (4)
        /// pages covers 4 children, and a 1 MiB request is one 256 KiB read per child of a
        /// stripe of 4 (see the README for the measurement).
        pub block_size: u64 = OptionSpec::size("block-size", "128KiB")
            .range(4 << 10, 64 << 20)
            .reconfigurable(),
    }
}

#[cfg(test)]
mod tests {
    use xlator_api::XlatorOptions;
    use xlfs_testkit::build::try_options_for;

    use super::*;

    fn parse(set: &[(&str, &str)]) -> Result<StripeOptions, String> {
        StripeOptions::from_options(&try_options_for::<crate::xlator::Stripe>(set)?)
    }

    #[test]
    fn the_default_unit_is_128_kib_and_ranges_are_enforced() {
        assert_eq!(parse(&[]).expect("defaults").block_size, 128 << 10);
        assert_eq!(
            parse(&[("block-size", "1MiB")]).expect("valid").block_size,
            1 << 20
        );
        assert!(parse(&[("block-size", "1KiB")]).is_err());
        assert!(parse(&[("block-size", "1GiB")]).is_err());
        assert!(StripeOptions::schema().iter().all(|s| !s.doc.is_empty()));
    }
}
