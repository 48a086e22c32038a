//! Reading and writing frames on a byte stream without copying payloads.
//!
//! The layout is `LengthDelimitedCodec`'s default (u32 big-endian length, then the body), so
//! any codec-based peer interoperates (a test checks both directions). The codec itself is not
//! used on the data path: its decoder hands out slices of one shared read buffer (turning them
//! into the `Buf` that fops carry would copy every payload) and its encoder copies every payload
//! into its write buffer. Here a frame body is read straight into its own allocation, which
//! becomes the `Buf` the fops see, and payloads are written from their `Buf`s with vectored I/O.

use std::io::IoSlice;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use xlator_api::Buf;

use super::{INLINE_PAYLOAD, WireError};

/// Reads length-prefixed frames, refusing any longer than `max` before allocating.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, max: usize) -> FrameReader<R> {
        FrameReader {
            inner: BufReader::with_capacity(64 << 10, inner),
            max,
        }
    }

    /// Changes the maximum frame size (raised after the handshake).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// The next frame body. `Ok(None)` at a clean end of stream (between frames). Once the
    /// first byte of a frame has arrived, the rest must arrive within `body_timeout`.
    pub async fn next(&mut self, body_timeout: Duration) -> Result<Option<Buf>, WireError> {
        if self.inner.fill_buf().await?.is_empty() {
            return Ok(None);
        }
        match tokio::time::timeout(body_timeout, self.read_rest()).await {
            Ok(r) => r.map(Some),
            Err(_) => Err(WireError::SlowSender(body_timeout)),
        }
    }

    async fn read_rest(&mut self) -> Result<Buf, WireError> {
        let mut prefix = [0u8; 4];
        read_exact(&mut self.inner, &mut prefix).await?;
        let len = u32::from_be_bytes(prefix) as usize;
        if len > self.max {
            return Err(WireError::FrameTooLarge {
                len: len as u64,
                max: self.max,
            });
        }
        if len == 0 {
            return Err(WireError::EmptyFrame);
        }
        let mut body: Vec<u8> = Vec::new();
        body.try_reserve_exact(len)
            .map_err(|_| WireError::FrameTooLarge {
                len: len as u64,
                max: self.max,
            })?;
        while body.len() < len {
            // `take` bounds the read to this frame; large reads bypass the BufReader's buffer
            // and land directly in `body`.
            let want = (len - body.len()) as u64;
            let n = (&mut self.inner).take(want).read_buf(&mut body).await?;
            if n == 0 {
                return Err(WireError::Truncated);
            }
        }
        Ok(Buf::from_vec(body))
    }
}

async fn read_exact<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<(), WireError> {
    match r.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(WireError::Truncated),
        Err(e) => Err(WireError::Io(e)),
    }
}

/// An encoded frame: length prefix and header in `head`, then the payload buffers.
#[derive(Debug)]
pub struct OutFrame {
    pub head: Vec<u8>,
    pub payload: Vec<Buf>,
}

impl OutFrame {
    /// Total bytes on the wire, prefix included.
    pub fn len(&self) -> usize {
        self.head.len() + self.payload.iter().map(Buf::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies small payloads into `head` (cheaper than an extra iovec).
    pub(super) fn inline_small_payloads(&mut self) {
        let total: usize = self.payload.iter().map(Buf::len).sum();
        if total < INLINE_PAYLOAD {
            for p in self.payload.drain(..) {
                self.head.extend_from_slice(&p);
            }
        }
    }
}

/// Writes `frames` in as few system calls as possible (vectored, no copy of large payloads).
pub async fn write_frames<W: AsyncWrite + Unpin>(
    w: &mut W,
    frames: &[OutFrame],
) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(frames.len() * 2);
    for f in frames {
        slices.push(IoSlice::new(&f.head));
        for p in &f.payload {
            if !p.is_empty() {
                slices.push(IoSlice::new(p));
            }
        }
    }
    let mut rest: &mut [IoSlice<'_>] = &mut slices;
    while !rest.is_empty() {
        let n = w.write_vectored(rest).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_frames_and_refuses_oversized_lengths() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(b"abc");
        bytes.extend_from_slice(&0xffff_fff0u32.to_be_bytes());
        let mut r = FrameReader::new(&bytes[..], 1 << 20);
        let f = r
            .next(Duration::from_secs(1))
            .await
            .expect("frame")
            .expect("some");
        assert_eq!(&*f, b"abc");
        assert!(matches!(
            r.next(Duration::from_secs(1)).await,
            Err(WireError::FrameTooLarge { .. })
        ));
        let mut r = FrameReader::new(&[0u8, 0, 0, 9, 1][..], 1 << 20);
        assert!(matches!(
            r.next(Duration::from_secs(1)).await,
            Err(WireError::Truncated)
        ));
        let mut r = FrameReader::new(&[][..], 1 << 20);
        assert!(matches!(r.next(Duration::from_secs(1)).await, Ok(None)));
    }
}
