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

    /// The stream, and whether bytes already read from it wait in the buffer.
    pub fn get_ref(&self) -> (&R, bool) {
        (self.inner.get_ref(), !self.inner.buffer().is_empty())
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
        let (mut body, len) = body_for(prefix, self.max)?;
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

impl<R: AsyncRead> FrameReader<R> {
    /// The stream and the bytes already read from it but not yet returned as frames.
    pub fn into_parts(self) -> (R, Vec<u8>, usize) {
        let buffered = self.inner.buffer().to_vec();
        (self.inner.into_inner(), buffered, self.max)
    }
}

/// Frames assembled from non-blocking reads, by whichever thread gets to read: a task
/// woken by readiness, or a caller spinning for its reply. Same layout and limits as
/// [`FrameReader`]; small frames come out of one staging buffer, a large body is read
/// straight into its own allocation. Reads append to a `Vec`'s spare capacity (no zeroing).
pub struct FramePump {
    /// Bytes read and not yet consumed are `stage[start..]`; its capacity is [`STAGE`].
    stage: Vec<u8>,
    start: usize,
    /// The body being assembled and its full length.
    body: Option<(Vec<u8>, usize)>,
    max: usize,
    /// When the frame being assembled began (its first byte arrived).
    partial_since: Option<std::time::Instant>,
}

/// How one [`FramePump::pump`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Pumped {
    /// The socket has nothing more for now.
    Drained,
    /// The peer closed the stream between frames.
    Closed,
}

const STAGE: usize = 64 << 10;

impl FramePump {
    /// A pump whose first bytes are `buffered` (left over from a [`FrameReader`]).
    pub fn new(buffered: Vec<u8>, max: usize) -> FramePump {
        let mut stage = Vec::with_capacity(STAGE.max(buffered.len()));
        stage.extend_from_slice(&buffered);
        FramePump {
            partial_since: (!stage.is_empty()).then(std::time::Instant::now),
            stage,
            start: 0,
            body: None,
            max,
        }
    }

    /// When the frame now being assembled began, if one is.
    pub fn partial_since(&self) -> Option<std::time::Instant> {
        self.partial_since
    }

    /// Reads with `read` until it would block, passing every complete frame body to `frame`.
    /// `read` is a non-blocking read appending to the `Vec` at most its spare capacity
    /// (which is never zero), `WouldBlock` when nothing is there.
    pub fn pump(
        &mut self,
        mut read: impl FnMut(&mut Vec<u8>) -> std::io::Result<usize>,
        mut frame: impl FnMut(Buf),
    ) -> Result<Pumped, WireError> {
        loop {
            self.take_frames(&mut frame)?;
            let direct = matches!(&self.body, Some((body, len))
                if *len - body.len() >= STAGE
                    && body.capacity() == *len
                    && self.start == self.stage.len());
            let got = if direct {
                // A large remainder goes straight into the body: no copy through the stage.
                read(&mut self.body.as_mut().expect("checked").0)
            } else {
                if self.start == self.stage.len() {
                    self.stage.clear();
                    self.start = 0;
                } else if self.stage.len() == self.stage.capacity() {
                    self.stage.drain(..self.start);
                    self.start = 0;
                }
                read(&mut self.stage)
            };
            match got {
                Ok(0) => {
                    return if self.body.is_none() && self.start == self.stage.len() {
                        Ok(Pumped::Closed)
                    } else {
                        Err(WireError::Truncated)
                    };
                }
                Ok(_) => {
                    if self.partial_since.is_none() {
                        self.partial_since = Some(std::time::Instant::now());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Pumped::Drained);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(WireError::Io(e)),
            }
        }
    }

    /// Hands out every frame complete in the stage (and the body being assembled).
    fn take_frames(&mut self, frame: &mut impl FnMut(Buf)) -> Result<(), WireError> {
        loop {
            let avail = self.stage.len() - self.start;
            if self.body.is_none() {
                if avail < 4 {
                    break;
                }
                let mut prefix = [0u8; 4];
                prefix.copy_from_slice(&self.stage[self.start..self.start + 4]);
                self.body = Some(body_for(prefix, self.max)?);
                self.start += 4;
                continue;
            }
            let (body, len) = self.body.as_mut().expect("checked");
            let take = (*len - body.len()).min(avail);
            body.extend_from_slice(&self.stage[self.start..self.start + take]);
            self.start += take;
            if body.len() < *len {
                break;
            }
            let (body, _) = self.body.take().expect("checked");
            frame(Buf::from_vec(body));
            self.partial_since = (self.start != self.stage.len()).then(std::time::Instant::now);
        }
        Ok(())
    }
}

/// Checks a frame's length prefix against `max` and allocates its body (empty, with room
/// for exactly the length): returns it with the length.
fn body_for(prefix: [u8; 4], max: usize) -> Result<(Vec<u8>, usize), WireError> {
    let len = u32::from_be_bytes(prefix) as usize;
    let too_large = || WireError::FrameTooLarge {
        len: len as u64,
        max,
    };
    if len > max {
        return Err(too_large());
    }
    if len == 0 {
        return Err(WireError::EmptyFrame);
    }
    let mut body = Vec::new();
    body.try_reserve_exact(len).map_err(|_| too_large())?;
    Ok((body, len))
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

/// A stream that may take bytes straight out of a pipe ([`Buf::take_pipe`]).
pub trait PipeSink {
    /// The socket to `splice` into, if this stream is one.
    fn splice_target(&mut self) -> Option<&mut super::stream::WriteHalf> {
        None
    }
}

impl PipeSink for super::stream::WriteHalf {
    fn splice_target(&mut self) -> Option<&mut super::stream::WriteHalf> {
        Some(self)
    }
}

impl PipeSink for tokio::io::DuplexStream {}
impl PipeSink for Vec<u8> {}
impl PipeSink for tokio::net::tcp::OwnedWriteHalf {}
impl PipeSink for tokio::net::TcpStream {}
impl PipeSink for tokio::net::UnixStream {}

/// Writes `frames` in as few system calls as possible (vectored, no copy of large payloads).
/// A payload whose bytes are still in a pipe goes to a socket with `splice`, never through
/// this process's memory.
pub async fn write_frames<W: AsyncWrite + Unpin + PipeSink>(
    w: &mut W,
    frames: &[OutFrame],
) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(frames.len() * 2);
    for f in frames {
        slices.push(IoSlice::new(&f.head));
        for p in &f.payload {
            if p.is_empty() {
                continue;
            }
            if w.splice_target().is_some()
                && let Some(pipe) = p.take_pipe()
            {
                write_all_vectored(w, &mut slices).await?;
                slices.clear();
                if let Some(sock) = w.splice_target() {
                    sock.splice_from(pipe, p.len()).await?;
                }
                continue;
            }
            slices.push(IoSlice::new(p));
        }
    }
    write_all_vectored(w, &mut slices).await?;
    // A no-op on a socket; TLS may hold the last record until flushed.
    tokio::io::AsyncWriteExt::flush(w).await
}

/// Writes every byte of `slices`.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    let mut rest: &mut [IoSlice<'_>] = slices;
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

    /// A non-blocking source: hands out `chunks` one read at a time (at most the spare
    /// capacity), `WouldBlock` between chunks, then end of stream.
    struct Chunks {
        chunks: std::collections::VecDeque<Vec<u8>>,
        blocked: bool,
    }

    impl Chunks {
        fn read(&mut self, v: &mut Vec<u8>) -> std::io::Result<usize> {
            assert!(v.capacity() > v.len(), "read with no spare capacity");
            if self.blocked {
                self.blocked = false;
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let Some(c) = self.chunks.front_mut() else {
                return Ok(0);
            };
            let n = c.len().min(v.capacity() - v.len());
            v.extend_from_slice(&c[..n]);
            c.drain(..n);
            if c.is_empty() {
                self.chunks.pop_front();
                self.blocked = true;
            }
            Ok(n)
        }
    }

    fn framed(bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// Pumps `bytes` split every `step` bytes; returns the frames and how it ended.
    fn pump_all(
        bytes: &[u8],
        step: usize,
        max: usize,
    ) -> (Vec<Vec<u8>>, Result<Pumped, WireError>) {
        let mut src = Chunks {
            chunks: bytes.chunks(step).map(<[u8]>::to_vec).collect(),
            blocked: false,
        };
        let mut pump = FramePump::new(Vec::new(), max);
        let mut got = Vec::new();
        loop {
            match pump.pump(|v| src.read(v), |f| got.push(f.to_vec())) {
                Ok(Pumped::Drained) => continue,
                r => return (got, r),
            }
        }
    }

    #[test]
    fn pump_reassembles_frames_from_any_split() {
        let bodies: Vec<Vec<u8>> = [1usize, 3, 4, 5, 100, 65_535, 65_536, 200_000, 7, 1 << 20]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect())
            .collect();
        let bytes = framed(&bodies);
        for step in [1, 2, 3, 5, 4096, 65_536, 70_000, 1 << 21] {
            let (got, end) = pump_all(&bytes, step, 2 << 20);
            assert_eq!(end.ok(), Some(Pumped::Closed), "step {step}");
            assert_eq!(got.len(), bodies.len(), "step {step}");
            assert!(got == bodies, "step {step}: frames differ");
        }
    }

    #[test]
    fn pump_refuses_bad_lengths_and_truncation() {
        let mut bytes = framed(&[b"ok".to_vec()]);
        bytes.extend_from_slice(&0xffff_fff0u32.to_be_bytes());
        let (got, end) = pump_all(&bytes, 3, 1 << 20);
        assert_eq!(got, vec![b"ok".to_vec()]);
        assert!(matches!(end, Err(WireError::FrameTooLarge { .. })));
        let (_, end) = pump_all(&[0, 0, 0, 0], 4, 1 << 20);
        assert!(matches!(end, Err(WireError::EmptyFrame)));
        let (_, end) = pump_all(&[0, 0, 0, 9, 1, 2], 2, 1 << 20);
        assert!(matches!(end, Err(WireError::Truncated)));
        let (_, end) = pump_all(&[0, 0], 2, 1 << 20);
        assert!(matches!(end, Err(WireError::Truncated)));
    }

    #[test]
    fn pump_starts_with_bytes_a_reader_had_buffered() {
        let bytes = framed(&[b"first".to_vec(), b"second".to_vec()]);
        let (head, tail) = bytes.split_at(11);
        let mut pump = FramePump::new(head.to_vec(), 1 << 20);
        assert!(pump.partial_since().is_some());
        let mut src = Chunks {
            chunks: [tail.to_vec()].into(),
            blocked: false,
        };
        let mut got = Vec::new();
        while pump
            .pump(|v| src.read(v), |f| got.push(f.to_vec()))
            .expect("ok")
            != Pumped::Closed
        {}
        assert_eq!(got, vec![b"first".to_vec(), b"second".to_vec()]);
        assert!(pump.partial_since().is_none());
    }
}
