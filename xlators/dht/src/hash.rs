//! The placement hash of a name: the first four bytes (big-endian) of SHA-256 of the name's
//! UTF-8 bytes.
//!
//! Why this one: placement must never change for a name, on any machine, in any build — a file
//! is found only where its hash says (or through a link file there). SHA-256 is a fixed,
//! standard function with no seed, no platform dependence and no version drift, and its output
//! is uniform even for names that differ in one character (`file1`, `file2`...), which spreads
//! files evenly over the ranges. Its cost (well under a microsecond for a file name) is nothing
//! next to the network round trip every placement decision precedes. GlusterFS uses a
//! Davies-Meyer construction over TEA for the same purpose; matching its exact values buys
//! nothing here, since the layouts are our own format.

use sha2::{Digest, Sha256};

/// The 32-bit placement hash of `name`.
pub fn name_hash(name: &str) -> u32 {
    let d = Sha256::digest(name.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_first_four_bytes_of_sha256() {
        // SHA-256("") = e3b0c442 98fc1c14 ...; SHA-256("abc") = ba7816bf ...
        assert_eq!(name_hash(""), 0xe3b0_c442);
        assert_eq!(name_hash("abc"), 0xba78_16bf);
    }

    #[test]
    fn similar_names_spread_over_the_space() {
        let mut quarters = [0u32; 4];
        for i in 0..4000 {
            quarters[(name_hash(&format!("file{i}")) >> 30) as usize] += 1;
        }
        for q in quarters {
            assert!((800..1200).contains(&q), "{quarters:?}");
        }
    }
}
