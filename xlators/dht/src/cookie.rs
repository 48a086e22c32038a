//! readdirp cookies: which child a listing is in and where in that child's listing.
//!
//! A child's cookies are its own (storage/posix passes the brick file system's `d_off`: small
//! counters on tmpfs or xfs, 63-bit name hashes on ext4). The translator's cookie must carry
//! the child index too, in 64 bits, and must never send a listing back to the wrong place.
//!
//! GlusterFS (`dht_itransform`) multiplies small offsets by the child count and, for offsets
//! with the top bit set or too large, drops low bits of the brick offset — which can resume a
//! listing at the wrong entry (duplicates or loops on ext4's hashed offsets). Here nothing is
//! dropped:
//!
//! * **direct** (bit 63 clear): bits 62..63-b hold the child index (`b` bits, enough for
//!   every child), the low `63 - b` bits the child's offset, when it fits;
//! * **indirect** (bit 63 set): the low 63 bits are a serial number in a table kept by the
//!   translator, holding (child, offset) exactly. The table is bounded ([`TABLE_MAX`]
//!   entries, oldest dropped first); a serial no longer in it answers EINVAL ("cookie too
//!   old") rather than a guess. A reader goes on from the cookies of the page it just got,
//!   the newest, so a listing in progress only loses its place after `TABLE_MAX` newer
//!   indirect cookies (of every listing of this client) were handed out.
//!
//! Cookie 0 is the start of the listing (child 0, offset 0).

use std::collections::VecDeque;

use xlator_api::Errno;

/// Indirect cookies kept (16 bytes each).
pub const TABLE_MAX: usize = 1 << 18;

const INDIRECT: u64 = 1 << 63;

/// Encodes and decodes cookies for `n` children.
pub struct Cookies {
    bits: u32,
    table: VecDeque<(usize, u64)>,
    /// Serial of `table[0]`.
    first: u64,
}

impl Cookies {
    pub fn new(n: usize) -> Cookies {
        let bits = usize::BITS - n.saturating_sub(1).leading_zeros();
        Cookies {
            bits: bits.max(1),
            table: VecDeque::new(),
            first: 0,
        }
    }

    fn off_bits(&self) -> u32 {
        63 - self.bits
    }

    /// The cookie of offset `off` in child `child`'s listing.
    pub fn encode(&mut self, child: usize, off: u64) -> u64 {
        if off < 1 << self.off_bits() {
            return ((child as u64) << self.off_bits()) | off;
        }
        if self.table.len() >= TABLE_MAX {
            self.table.pop_front();
            self.first += 1;
        }
        self.table.push_back((child, off));
        INDIRECT | (self.first + self.table.len() as u64 - 1)
    }

    /// The child and its offset a cookie stands for.
    pub fn decode(&self, cookie: u64) -> Result<(usize, u64), Errno> {
        if cookie & INDIRECT == 0 {
            let child = (cookie >> self.off_bits()) as usize;
            return Ok((child, cookie & ((1 << self.off_bits()) - 1)));
        }
        let serial = cookie & !INDIRECT;
        serial
            .checked_sub(self.first)
            .and_then(|i| self.table.get(usize::try_from(i).ok()?))
            .copied()
            .ok_or(Errno::EINVAL)
    }

    pub fn indirect_held(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn small_offsets_are_direct_and_zero_is_the_start() {
        let mut c = Cookies::new(4);
        assert_eq!(c.encode(0, 0), 0);
        assert_eq!(c.decode(0), Ok((0, 0)));
        let k = c.encode(3, 12345);
        assert_eq!(k & INDIRECT, 0);
        assert_eq!(c.decode(k), Ok((3, 12345)));
        assert_eq!(c.indirect_held(), 0);
    }

    #[test]
    fn ext4_sized_offsets_go_through_the_table_exactly() {
        let mut c = Cookies::new(4);
        let big = 0x7fff_ffff_ffff_fff0u64;
        let k = c.encode(2, big);
        assert_ne!(k & INDIRECT, 0);
        assert_eq!(c.decode(k), Ok((2, big)));
        // One bit child index for two children: a 62-bit offset is still direct.
        let mut two = Cookies::new(2);
        let k = two.encode(1, (1 << 62) - 1);
        assert_eq!(k & INDIRECT, 0);
        assert_eq!(two.decode(k), Ok((1, (1 << 62) - 1)));
    }

    #[test]
    fn a_cookie_dropped_from_the_table_is_einval_not_a_guess() {
        let mut c = Cookies::new(3);
        let old = c.encode(1, u64::MAX - 1);
        for i in 0..TABLE_MAX as u64 {
            c.encode(2, u64::MAX - 2 - i);
        }
        assert_eq!(c.decode(old), Err(Errno::EINVAL));
        let newest = c.encode(0, u64::MAX);
        assert_eq!(c.decode(newest), Ok((0, u64::MAX)));
        assert_eq!(c.decode(INDIRECT | (1 << 40)), Err(Errno::EINVAL));
    }

    proptest! {
        #[test]
        fn every_cookie_decodes_to_what_it_encoded(
            n in 1usize..300,
            items in proptest::collection::vec((0usize..300, any::<u64>()), 1..50),
        ) {
            let mut c = Cookies::new(n);
            let ks: Vec<(u64, usize, u64)> = items
                .iter()
                .map(|&(ch, off)| {
                    let ch = ch % n;
                    (c.encode(ch, off), ch, off)
                })
                .collect();
            for (k, ch, off) in ks {
                prop_assert_eq!(c.decode(k), Ok((ch, off)));
            }
        }
    }
}
