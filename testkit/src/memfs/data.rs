//! Sparse file contents in 4 KiB chunks: holes cost nothing, reads of holes give zeroes, and
//! SEEK_DATA/SEEK_HOLE are exact at chunk granularity (like a 4 KiB-block file system).

use std::collections::BTreeMap;

use xlator_api::{Errno, SeekWhat};

/// Allocation unit, in bytes.
pub(crate) const CHUNK: u64 = 4096;

/// The bytes of one regular file. Invariant: every stored byte at or beyond `size` is zero (so
/// extending the file reads zeroes); chunks past the end exist only when preallocated.
#[derive(Default)]
pub(crate) struct Data {
    chunks: BTreeMap<u64, Box<[u8]>>,
    size: u64,
}

/// Chunk indexes touched by `[off, off + len)`; `len > 0`.
fn span(off: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    off / CHUNK..=(off + len - 1) / CHUNK
}

impl Data {
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Allocated chunks.
    pub(crate) fn chunks(&self) -> u64 {
        self.chunks.len() as u64
    }

    /// Chunks that writing `[off, off + len)` would allocate.
    pub(crate) fn missing(&self, off: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        span(off, len)
            .filter(|i| !self.chunks.contains_key(i))
            .count() as u64
    }

    /// Up to `len` bytes at `off`; short at end of file.
    pub(crate) fn read(&self, off: u64, len: u64) -> Vec<u8> {
        if off >= self.size || len == 0 {
            return Vec::new();
        }
        let end = self.size.min(off.saturating_add(len));
        let mut out = vec![0u8; (end - off) as usize];
        for (&i, chunk) in self.chunks.range(span(off, end - off)) {
            let c0 = i * CHUNK;
            let from = off.max(c0);
            let to = end.min(c0 + CHUNK);
            out[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&chunk[(from - c0) as usize..(to - c0) as usize]);
        }
        out
    }

    /// Applies `f(chunk, range in chunk, range in [off, off+len))` to every chunk touched,
    /// allocating missing ones.
    fn each_chunk_mut(&mut self, off: u64, len: u64, mut f: impl FnMut(&mut [u8], usize)) {
        if len == 0 {
            return;
        }
        let end = off + len;
        for i in span(off, len) {
            let c0 = i * CHUNK;
            let from = off.max(c0);
            let to = end.min(c0 + CHUNK);
            let chunk = self
                .chunks
                .entry(i)
                .or_insert_with(|| vec![0u8; CHUNK as usize].into());
            f(
                &mut chunk[(from - c0) as usize..(to - c0) as usize],
                (from - off) as usize,
            );
        }
    }

    /// Writes `data` at `off`, extending the file. The caller checked `off + len` fits.
    pub(crate) fn write(&mut self, off: u64, data: &[u8]) {
        let len = data.len() as u64;
        self.each_chunk_mut(off, len, |dst, at| {
            dst.copy_from_slice(&data[at..at + dst.len()])
        });
        self.size = self.size.max(off + len);
    }

    /// Sets the size; shrinking frees whole chunks past the end and zeroes the tail.
    pub(crate) fn truncate(&mut self, size: u64) {
        if size < self.size {
            let keep = size.div_ceil(CHUNK);
            self.chunks.split_off(&keep);
            if !size.is_multiple_of(CHUNK)
                && let Some(last) = self.chunks.get_mut(&(size / CHUNK))
            {
                last[(size % CHUNK) as usize..].fill(0);
            }
        }
        self.size = size;
    }

    /// Allocates zeroed chunks over `[off, off + len)` without changing data or size.
    pub(crate) fn allocate(&mut self, off: u64, len: u64) {
        self.each_chunk_mut(off, len, |_, _| {});
    }

    /// Zeroes `[off, off + len)`, keeping it allocated.
    pub(crate) fn zero(&mut self, off: u64, len: u64) {
        self.each_chunk_mut(off, len, |dst, _| dst.fill(0));
    }

    /// Deallocates `[off, off + len)`: whole chunks are freed, partial ones zeroed.
    pub(crate) fn punch(&mut self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = off.saturating_add(len);
        let touched: Vec<u64> = self
            .chunks
            .range(span(off, end - off))
            .map(|(&i, _)| i)
            .collect();
        for i in touched {
            let c0 = i * CHUNK;
            if off <= c0 && end >= c0 + CHUNK {
                self.chunks.remove(&i);
            } else if let Some(chunk) = self.chunks.get_mut(&i) {
                let from = off.max(c0);
                let to = end.min(c0 + CHUNK);
                chunk[(from - c0) as usize..(to - c0) as usize].fill(0);
            }
        }
    }

    /// `lseek(SEEK_DATA/SEEK_HOLE)`: ENXIO at or past end of file, or when no data follows.
    pub(crate) fn seek(&self, off: u64, what: SeekWhat) -> Result<u64, Errno> {
        if off >= self.size {
            return Err(Errno::ENXIO);
        }
        match what {
            SeekWhat::Data => match self.chunks.range(off / CHUNK..).next() {
                Some((&i, _)) if (i * CHUNK).max(off) < self.size => Ok((i * CHUNK).max(off)),
                _ => Err(Errno::ENXIO),
            },
            SeekWhat::Hole => {
                let mut i = off / CHUNK;
                while self.chunks.contains_key(&i) {
                    i += 1;
                }
                Ok((i * CHUNK).max(off).min(self.size))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_read_as_zeroes_and_cost_nothing() {
        let mut d = Data::default();
        d.write(10 * CHUNK + 5, b"abc");
        assert_eq!(d.size(), 10 * CHUNK + 8);
        assert_eq!(d.chunks(), 1);
        assert_eq!(d.read(10 * CHUNK, 8), b"\0\0\0\0\0abc".to_vec());
        assert_eq!(d.read(0, 4), vec![0; 4]);
        assert_eq!(d.read(d.size(), 10), Vec::<u8>::new());
        assert_eq!(d.read(d.size() - 2, 10), b"bc".to_vec());
    }

    #[test]
    fn truncate_then_extend_reads_zeroes() {
        let mut d = Data::default();
        d.write(0, &[7u8; 10000]);
        d.truncate(5000);
        assert_eq!(d.chunks(), 2);
        d.truncate(10000);
        assert_eq!(d.read(4990, 20), [vec![7u8; 10], vec![0u8; 10]].concat());
        d.truncate(0);
        assert_eq!(d.chunks(), 0);
    }

    #[test]
    fn punch_frees_whole_chunks_and_zeroes_partial_ones() {
        let mut d = Data::default();
        d.write(0, &[1u8; 4 * CHUNK as usize]);
        d.punch(100, 2 * CHUNK);
        assert_eq!(d.chunks(), 3);
        assert_eq!(d.read(99, 2), vec![1, 0]);
        assert_eq!(d.read(2 * CHUNK + 99, 2), vec![0, 1]);
        assert_eq!(d.size(), 4 * CHUNK);
    }

    #[test]
    fn seek_finds_data_and_holes() {
        let mut d = Data::default();
        d.write(2 * CHUNK, &[1u8; 10]);
        d.truncate(5 * CHUNK);
        assert_eq!(d.seek(0, SeekWhat::Data), Ok(2 * CHUNK));
        assert_eq!(d.seek(0, SeekWhat::Hole), Ok(0));
        assert_eq!(d.seek(2 * CHUNK + 3, SeekWhat::Hole), Ok(3 * CHUNK));
        assert_eq!(d.seek(3 * CHUNK, SeekWhat::Data), Err(Errno::ENXIO));
        assert_eq!(d.seek(5 * CHUNK, SeekWhat::Hole), Err(Errno::ENXIO));
        let mut full = Data::default();
        full.write(0, &[1u8; 100]);
        assert_eq!(full.seek(0, SeekWhat::Hole), Ok(100));
    }
}
