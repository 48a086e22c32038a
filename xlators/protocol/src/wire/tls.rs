//! TLS on a TCP connection (rustls), shaped like the plain socket the rest of the wire uses:
//! non-blocking reads that say `WouldBlock` ([`TlsIo::try_read`]), readiness that accounts for
//! plaintext rustls already holds, and an `AsyncRead`/`AsyncWrite` pair for the frame reader
//! and writer. Both halves share one rustls connection under a mutex; each call holds it only
//! for a non-blocking step, never across a wait.
//!
//! The handshake itself runs with tokio-rustls; its connection is then taken over here.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use tokio::io::ReadBuf;
use tokio::net::TcpStream;

/// A TCP socket and the rustls connection over it.
pub struct TlsIo {
    sock: TcpStream,
    conn: Mutex<rustls::Connection>,
}

/// `Read` of the socket without blocking (tokio clears its readiness on `WouldBlock`).
struct SockRead<'a>(&'a TcpStream);

impl Read for SockRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

struct SockWrite<'a>(&'a TcpStream);

impl Write for SockWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsIo {
    pub fn new(sock: TcpStream, conn: impl Into<rustls::Connection>) -> Arc<TlsIo> {
        Arc::new(TlsIo {
            sock,
            conn: Mutex::new(conn.into()),
        })
    }

    fn conn(&self) -> MutexGuard<'_, rustls::Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Plaintext rustls holds, ready to be read without touching the socket.
    fn buffered(conn: &mut rustls::Connection) -> bool {
        conn.process_new_packets()
            .is_ok_and(|s| s.plaintext_bytes_to_read() > 0 || s.peer_has_closed())
    }

    /// Reads plaintext without blocking: `WouldBlock` when neither rustls nor the socket has
    /// any; `Ok(0)` at the end of the stream.
    pub fn try_read(&self, out: &mut [u8]) -> io::Result<usize> {
        let mut conn = self.conn();
        loop {
            match conn.reader().read(out) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: an end of stream all the same (the
                // frame reader tells a cut frame from a clean end).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match conn.read_tls(&mut SockRead(&self.sock)) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            conn.process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            // Messages rustls answers by itself (key updates, alerts): sent when the socket
            // takes them now, else with the next write.
            while conn.wants_write() {
                match conn.write_tls(&mut SockWrite(&self.sock)) {
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
    }

    /// Waits until a read may not block.
    pub async fn readable(&self) -> io::Result<()> {
        if Self::buffered(&mut self.conn()) {
            return Ok(());
        }
        self.sock.readable().await
    }

    /// Whether a read would not block now.
    pub fn ready_now(&self) -> bool {
        if Self::buffered(&mut self.conn()) {
            return true;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local buffer on a socket this value keeps open.
        let n = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock
    }

    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match self.sock.poll_read_ready(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Sends what rustls holds for the socket.
    fn poll_flush_tls(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            {
                let mut conn = self.conn();
                loop {
                    if !conn.wants_write() {
                        return Poll::Ready(Ok(()));
                    }
                    match conn.write_tls(&mut SockWrite(&self.sock)) {
                        Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
            }
            match self.sock.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    pub fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // What rustls still holds goes first: its buffer stays bounded.
        match self.poll_flush_tls(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        let n = self.conn().writer().write_vectored(bufs)?;
        // Start sending now; what the socket does not take waits for the next write or flush.
        let _ = self.poll_flush_tls(cx);
        Poll::Ready(Ok(n))
    }

    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush_tls(cx)
    }

    pub fn poll_shutdown(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn().send_close_notify();
        match self.poll_flush_tls(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        // SAFETY: a valid socket fd; shutdown takes no pointers.
        unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_WR) };
        Poll::Ready(Ok(()))
    }
}
