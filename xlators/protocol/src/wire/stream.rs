//! The transports a connection may use: TCP, TLS over TCP ([`super::tls`]), and a Unix socket
//! for a client on the brick's own machine (same wire protocol; no TCP/IP stack on the path;
//! the kernel vouches for both ends, so no TLS there).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

use tokio::net::{TcpStream, UnixStream, tcp, unix};

use super::tls::TlsIo;

/// A connected socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Arc<TlsIo>),
}

impl Stream {
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
            Stream::Tls(t) => (ReadHalf::Tls(t.clone()), WriteHalf::Tls(t)),
        }
    }
}

/// The read side of a [`Stream`].
pub enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
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
            ReadHalf::Unix(r) => r.readable().await,
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
            ReadHalf::Unix(r) => r.as_ref().as_raw_fd(),
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
            ReadHalf::Unix(r) => r.try_read_buf(v),
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
            ReadHalf::Unix(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Tls(t) => t.poll_read(cx, buf),
        }
    }
}

/// The write side of a [`Stream`]; dropping it shuts the socket's write direction.
pub enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
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
                    let s: &UnixStream = w.as_ref();
                    s.writable().await?;
                    s.try_io(Interest::WRITABLE, || {
                        splice_out(&pipe, s.as_raw_fd(), left)
                    })
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
            WriteHalf::Unix(w) => Pin::new(w).poll_write(cx, buf),
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
            WriteHalf::Unix(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteHalf::Tls(t) => t.poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Tls(t) => t.poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Tls(t) => t.poll_shutdown(cx),
        }
    }
}

/// Where the brick listening on TCP `port` keeps its Unix socket, under `dir`.
pub fn unix_socket_path(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    dir.join(format!("brick-{port}.sock"))
}
