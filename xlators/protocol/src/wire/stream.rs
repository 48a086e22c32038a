//! The two transports a connection may use: TCP, and a Unix socket for a client on the
//! brick's own machine (same wire protocol; no TCP/IP stack on the path).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream, tcp, unix};

/// A connected socket.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
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
        }
    }
}

/// The read side of a [`Stream`].
pub enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
}

impl ReadHalf {
    /// `"tcp"` or `"unix"`, for messages and statedumps.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadHalf::Tcp(_) => "tcp",
            ReadHalf::Unix(_) => "unix",
        }
    }

    /// Waits until the socket may be readable.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            ReadHalf::Tcp(r) => r.readable().await,
            ReadHalf::Unix(r) => r.readable().await,
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
        }
    }
}

/// The write side of a [`Stream`]; dropping it shuts the socket's write direction.
pub enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
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
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Unix(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

/// Where the brick listening on TCP `port` keeps its Unix socket, under `dir`.
pub fn unix_socket_path(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    dir.join(format!("brick-{port}.sock"))
}
