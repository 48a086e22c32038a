//! The transports a connection may use: TCP, TLS over TCP ([`super::tls`]), and a Unix socket
//! for a client on the brick's own machine (same wire protocol; no TCP/IP stack on the path;
//! the kernel vouches for both ends, so no TLS there).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream, tcp};

use super::tls::TlsIo;

/// A connected socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Arc<TlsIo>),
}

impl Stream {
    /// The two directions, for the reader and the sender. Within the runtime (a Unix socket
    /// is registered with its reactor again, for reads only: see [`UnixWrite`]).
    pub fn into_split(self) -> io::Result<(ReadHalf, WriteHalf)> {
        Ok(match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let sock = Arc::new(register(s.into_std()?, Interest::READABLE)?);
                let w = UnixWrite {
                    sock: sock.clone(),
                    room: None,
                    rt: tokio::runtime::Handle::current(),
                };
                (ReadHalf::Unix(sock), WriteHalf::Unix(w))
            }
            Stream::Tls(t) => (ReadHalf::Tls(t.clone()), WriteHalf::Tls(t)),
        })
    }
}

/// A Unix socket, registered with the reactor for reads only.
type UnixSock = Arc<AsyncFd<std::os::unix::net::UnixStream>>;

/// The write side of a Unix socket. Linux tells a Unix socket's waiters it has room again
/// every time its peer reads (`unix_write_space`), and the runtime's stream waits for both
/// directions: each frame the peer took woke this side's reactor thread for nothing, one
/// needless wakeup per call at each end. Writes go straight to the socket instead; one that
/// finds it full registers a duplicate of the descriptor for room until it has written.
pub struct UnixWrite {
    sock: UnixSock,
    /// The registration for room, while a write waits for it.
    room: Option<AsyncFd<OwnedFd>>,
    /// The runtime to register with (a write may be polled on a host thread).
    rt: tokio::runtime::Handle,
}

impl UnixWrite {
    fn fd(&self) -> RawFd {
        self.sock.get_ref().as_raw_fd()
    }

    /// Runs the non-blocking `op` on the socket until it does not find it full, waiting for
    /// room in between.
    fn poll_io<R>(
        &mut self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            match op(self.fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => {
                    self.room = None;
                    return Poll::Ready(r);
                }
            }
            if self.room.is_none() {
                let dup = self.sock.get_ref().as_fd().try_clone_to_owned()?;
                let _rt = self.rt.enter();
                self.room = Some(register(dup, Interest::WRITABLE)?);
            }
            let room = self.room.as_ref().expect("registered above");
            // Registered while full, it reports room when room comes; registered after room
            // came back, at once (an edge-triggered registration reports the present state).
            ready!(room.poll_write_ready(cx))?.clear_ready();
        }
    }

    fn shutdown(&self) -> io::Result<()> {
        self.sock.get_ref().shutdown(std::net::Shutdown::Write)
    }
}

impl Drop for UnixWrite {
    /// As the runtime's write half: the peer sees the end of the stream.
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// `inner` registered with the current runtime's reactor for `interest`.
fn register<T: AsRawFd>(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `inner` owns its descriptor, and the `AsyncFd` owns `inner` until dropped.
    Ok(unsafe { AsyncFd::register_with_interest(inner, interest) }?)
}

/// `readv`/`writev`-style results of a libc call.
fn io_result(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// A non-blocking read of `sock` into `buf` (`WouldBlock` when nothing waits).
fn read_into(sock: RawFd, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length; the socket is open while its halves live.
    io_result(unsafe { libc::read(sock, buf.as_mut_ptr().cast(), buf.len()) })
}

/// A non-blocking read of a Unix socket into `dst` (`WouldBlock` when nothing waits). The
/// socket is read whatever the reactor last saw (a thread spinning for a reply reads it
/// before the reactor notices it); a second read under the reactor's flag, when the first
/// found nothing, clears a flag that still says readable, so a waiter sleeps again.
fn read_unix(sock: &UnixSock, dst: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    match read_into(sock.get_ref().as_raw_fd(), dst) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            sock.try_io(Interest::READABLE, |s| read_into(s.as_raw_fd(), dst))
        }
        r => r,
    }
}

/// The read side of a [`Stream`].
pub enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(UnixSock),
    Tls(Arc<TlsIo>),
}

impl ReadHalf {
    /// `"tcp"` or `"unix"`, for messages and statedumps.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadHalf::Tcp(_) => "tcp",
            ReadHalf::Unix(_) => "unix",
            ReadHalf::Tls(_) => "tls",
        }
    }

    /// Waits until the socket may be readable.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            ReadHalf::Tcp(r) => r.readable().await,
            ReadHalf::Unix(s) => s.readable().await.map(drop),
            ReadHalf::Tls(t) => t.readable().await,
        }
    }

    /// Whether a read would not block now (data, end of stream or an error waits), asked
    /// of the socket itself: the runtime's readiness flags are only updated when a thread
    /// polls the reactor.
    pub fn ready_now(&self) -> bool {
        use std::os::fd::AsRawFd;
        let fd = match self {
            ReadHalf::Tcp(r) => r.as_ref().as_raw_fd(),
            ReadHalf::Unix(s) => s.get_ref().as_raw_fd(),
            ReadHalf::Tls(t) => return t.ready_now(),
        };
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local buffer on a socket this half keeps open.
        let n = unsafe {
            libc::recv(
                fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n >= 0 || std::io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock
    }

    /// A non-blocking read appended to `v`'s spare capacity (`WouldBlock` if none waits).
    pub fn try_read_buf(&self, v: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            ReadHalf::Tcp(r) => r.try_read_buf(v),
            ReadHalf::Unix(s) => {
                let n = read_unix(s, v.spare_capacity_mut())?;
                // SAFETY: the kernel wrote `n` bytes into the spare capacity.
                unsafe { v.set_len(v.len() + n) };
                Ok(n)
            }
            ReadHalf::Tls(t) => {
                let mut chunk = [0u8; 16 << 10];
                let n = t.try_read(&mut chunk)?;
                v.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Unix(s) => loop {
                // SAFETY: `read_unix` only writes initialised bytes into the unfilled part.
                match read_unix(s, unsafe { buf.unfilled_mut() }) {
                    Ok(n) => {
                        // SAFETY: the kernel initialised `n` bytes.
                        unsafe { buf.assume_init(n) };
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    // The flag is clear now (or was): wait for the reactor to see bytes.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        drop(ready!(s.poll_read_ready(cx))?);
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            },
            ReadHalf::Tls(t) => t.poll_read(cx, buf),
        }
    }
}

/// The write side of a [`Stream`]; dropping it shuts the socket's write direction.
pub enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(UnixWrite),
    Tls(Arc<TlsIo>),
}

impl WriteHalf {
    /// Moves exactly `len` bytes out of `pipe` into the socket with `splice` (a Unix socket
    /// takes the pipe's pages by reference, TCP sends from them), waiting for room as needed.
    /// If the kernel refuses to splice into this socket before any byte has moved, the bytes
    /// are read out of the pipe and written instead.
    pub async fn splice_from(&mut self, pipe: OwnedFd, len: usize) -> io::Result<()> {
        if let WriteHalf::Tls(_) = self {
            // Bytes must pass through rustls to be encrypted.
            let bytes = xlator_api::Buf::from_pipe(pipe, len);
            return tokio::io::AsyncWriteExt::write_all(self, &bytes).await;
        }
        let mut left = len;
        while left > 0 {
            let r = match self {
                WriteHalf::Tcp(w) => {
                    let s: &TcpStream = w.as_ref();
                    s.writable().await?;
                    s.try_io(Interest::WRITABLE, || {
                        splice_out(&pipe, s.as_raw_fd(), left)
                    })
                }
                WriteHalf::Unix(w) => {
                    std::future::poll_fn(|cx| w.poll_io(cx, |fd| splice_out(&pipe, fd, left))).await
                }
                WriteHalf::Tls(_) => unreachable!("TLS returned above"),
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if left == len && e.raw_os_error() == Some(libc::EINVAL) => {
                    let bytes = xlator_api::Buf::from_pipe(pipe, len);
                    return tokio::io::AsyncWriteExt::write_all(self, &bytes).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// One `splice` from `pipe` to the socket `sock` (non-blocking on both sides).
fn splice_out(pipe: &OwnedFd, sock: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both fds are open for the call; no offsets (neither is seekable).
    let r = unsafe {
        libc::splice(
            pipe.as_raw_fd(),
            std::ptr::null_mut(),
            sock,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Unix(w) => w.poll_io(cx, |fd| {
                // SAFETY: `buf` is readable for its length.
                io_result(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })
            }),
            WriteHalf::Tls(t) => t.poll_write_vectored(cx, &[IoSlice::new(buf)]),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteHalf::Unix(w) => w.poll_io(cx, |fd| {
                let n = bufs.len().min(libc::UIO_MAXIOV as usize);
                // SAFETY: `IoSlice` has `iovec`'s layout; the slices are readable.
                io_result(unsafe { libc::writev(fd, bufs.as_ptr().cast(), n as libc::c_int) })
            }),
            WriteHalf::Tls(t) => t.poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Unix(_) => Poll::Ready(Ok(())),
            WriteHalf::Tls(t) => t.poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Unix(w) => Poll::Ready(w.shutdown()),
            WriteHalf::Tls(t) => t.poll_shutdown(cx),
        }
    }
}

/// Where the brick listening on TCP `port` keeps its Unix socket, under `dir`.
pub fn unix_socket_path(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    dir.join(format!("brick-{port}.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn unix_pair() -> (ReadHalf, WriteHalf, UnixStream) {
        let (a, b) = UnixStream::pair().expect("socketpair");
        let (r, w) = Stream::Unix(a).into_split().expect("split");
        (r, w, b)
    }

    #[tokio::test]
    async fn a_write_that_fills_the_socket_waits_for_room_and_finishes() {
        let (_r, mut w, mut peer) = unix_pair();
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 + i / 4099) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&sent).await.expect("write");
            assert!(
                w_room_gone(&w),
                "the registration for room outlived the write"
            );
            w
        });
        // The socket holds far less than 8 MiB: the writer has to wait for room, more than
        // once, while this side reads slowly.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut got = vec![0u8; data.len()];
        let mut at = 0;
        while at < got.len() {
            let n = peer.read(&mut got[at..]).await.expect("read");
            assert!(n > 0, "early end of stream at {at}");
            at += n;
            if at < 1 << 20 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        assert!(got == data, "the bytes arrived changed");
        let w = writer.await.expect("writer");
        drop(w);
        assert_eq!(peer.read(&mut [0u8; 1]).await.expect("eof"), 0);
    }

    fn w_room_gone(w: &WriteHalf) -> bool {
        matches!(w, WriteHalf::Unix(u) if u.room.is_none())
    }

    #[tokio::test]
    async fn dropping_the_write_half_ends_the_peers_stream_and_reads_go_on() {
        let (mut r, w, mut peer) = unix_pair();
        drop(w);
        assert_eq!(peer.read(&mut [0u8; 1]).await.expect("read"), 0);
        peer.write_all(b"still").await.expect("write");
        let mut got = [0u8; 5];
        r.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"still");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_the_reactor_has_not_seen_are_read_and_a_drained_socket_sleeps() {
        let (r, _w, mut peer) = unix_pair();
        peer.write_all(b"abc").await.expect("write");
        // No await between the peer's write and these reads: on this runtime's one thread
        // the reactor has not polled since, so only a read of the socket itself finds them
        // (a thread spinning for its reply does this).
        let mut v = Vec::with_capacity(64);
        assert_eq!(r.try_read_buf(&mut v).expect("read"), 3);
        assert_eq!(v, b"abc");
        // Nothing left: a waiter sleeps until more comes, then reads it; drained again (the
        // reactor's flag cleared by the read that found nothing), it sleeps again.
        for more in [&b"d"[..], b"ef"] {
            assert!(
                tokio::time::timeout(Duration::from_millis(50), r.readable())
                    .await
                    .is_err(),
                "readable with nothing to read"
            );
            peer.write_all(more).await.expect("write");
            tokio::time::timeout(Duration::from_secs(5), r.readable())
                .await
                .expect("woken by the next bytes")
                .expect("readable");
            assert_eq!(r.try_read_buf(&mut v).expect("read"), more.len());
            let e = r.try_read_buf(&mut v).expect_err("drained");
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        }
        assert_eq!(v, b"abcdef");
    }
}
