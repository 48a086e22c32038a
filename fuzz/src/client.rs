//! The harness's side of a connection: plain blocking sockets on libFuzzer's thread (the brick
//! runs on its own runtime), frames read with deadlines, every frame the server sends checked
//! to decode.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use xlator_api::{Buf, Gfid};
use xlfs_protocol::wire::{
    self, ClientMsg, HANDSHAKE_MAX_FRAME, Hello, MAGIC, OutFrame, PROTOCOL_VERSION, ReplyBody,
    Request, SCHEMA, ServerMsg, VOLFILE_MAX_FRAME, WireCtx,
};

/// The volume the brick serves.
pub const VOLUME: &str = "fuzz";
/// The largest frame the harness's hello says it takes.
pub const MAX_FRAME: u32 = 1 << 21;

/// A connection to the brick, TCP or Unix.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// What reading the next frame came to.
#[derive(Debug)]
pub enum Next {
    Frame(Vec<u8>),
    /// The server closed the connection or reset it (possibly in the middle of a frame: a
    /// peer that goes away may, and a reset drops what was not read yet).
    Closed,
    /// Nothing complete before the deadline.
    Timeout,
}

impl Conn {
    pub fn tcp(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        // Closed with a reset, not into TIME_WAIT: hundreds of connections a second would
        // otherwise hold tens of thousands of this machine's ephemeral ports for a minute,
        // and the tests that run after the fuzzer (CI) could not bind their brick ports.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket fd and a linger struct of the size passed.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        Ok(Conn::Tcp(s))
    }

    pub fn unix(path: &Path) -> std::io::Result<Conn> {
        UnixStream::connect(path).map(Conn::Unix)
    }

    /// Writes all of `bytes`; an error means the server closed the connection (it may, at any
    /// point of an input) and is not a finding.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(bytes),
            Conn::Unix(s) => s.write_all(bytes),
        }
    }

    /// Ends the client's side: the server reads end of stream.
    pub fn shutdown_write(&self) {
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(Shutdown::Write),
            Conn::Unix(s) => s.shutdown(Shutdown::Write),
        };
    }

    fn read_until(&mut self, buf: &mut [u8], until: Instant) -> std::io::Result<usize> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        match self {
            Conn::Tcp(s) => {
                s.set_read_timeout(Some(left))?;
                s.read(buf)
            }
            Conn::Unix(s) => {
                s.set_read_timeout(Some(left))?;
                s.read(buf)
            }
        }
    }
}

/// Frames the server sent on one connection.
pub struct Reader {
    buf: Vec<u8>,
    /// The largest frame the server may send on this connection.
    max: usize,
}

impl Default for Reader {
    fn default() -> Reader {
        // Before the handshake nobody told the server a size: a volfile answer is the largest.
        Reader {
            buf: Vec::new(),
            max: VOLFILE_MAX_FRAME,
        }
    }
}

impl Reader {
    /// After the harness's own hello: replies are bounded by what it asked for.
    pub fn after_hello() -> Reader {
        Reader {
            buf: Vec::new(),
            max: MAX_FRAME as usize,
        }
    }

    /// The next frame body, end of stream, or a timeout at `until`. A frame the server should
    /// never send (larger than allowed here, empty, or not a [`ServerMsg`]) is an `Err`
    /// naming it: a finding.
    pub fn next(&mut self, conn: &mut Conn, until: Instant) -> Result<Next, String> {
        loop {
            if let [a, b, c, d, rest @ ..] = &self.buf[..] {
                let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
                if len == 0 || len > self.max {
                    return Err(format!(
                        "the server sent a frame of {len} bytes (at most {} here)",
                        self.max
                    ));
                }
                if rest.len() >= len {
                    let body = rest[..len].to_vec();
                    self.buf.drain(..4 + len);
                    check_server_frame(&body)?;
                    return Ok(Next::Frame(body));
                }
            }
            let mut chunk = [0u8; 64 << 10];
            match conn.read_until(&mut chunk, until) {
                Ok(0) => return Ok(Next::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(Next::Timeout);
                }
                // Reset, broken pipe: the server went away mid-way (it may).
                Err(_) => return Ok(Next::Closed),
            }
        }
    }
}

/// A frame from the server must decode, payloads included: anything else is a server bug.
pub fn check_server_frame(body: &[u8]) -> Result<ServerMsg, String> {
    let (mut msg, mut payloads) = wire::decode::<ServerMsg>(Buf::copy_from_slice(body))
        .map_err(|e| format!("the server sent a frame that does not decode: {e}"))?;
    if let ServerMsg::Reply(r) = &mut msg
        && let Ok(b) = &mut r.result
    {
        b.restore_payload(&mut payloads)
            .map_err(|e| format!("the server sent a reply whose payload does not fit: {e}"))?;
    }
    Ok(msg)
}

/// The harness's hello, as a whole frame (length prefix included).
pub fn hello_frame() -> Vec<u8> {
    let hello = Hello {
        magic: MAGIC,
        version: PROTOCOL_VERSION,
        schema: SCHEMA,
        volume: VOLUME.into(),
        client: "fuzz:0:harness".into(),
        nonce: vec![0; 32],
        max_frame: MAX_FRAME,
    };
    let f = wire::encode(&ClientMsg::Hello(hello), Vec::new(), HANDSHAKE_MAX_FRAME)
        .expect("the harness's hello encodes");
    whole(&f)
}

/// An encoded frame as the bytes on the wire (length prefix included).
pub fn whole(f: &OutFrame) -> Vec<u8> {
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    v
}

/// Sends the harness's hello and waits for the welcome (at most `within`).
pub fn handshake(conn: &mut Conn, reader: &mut Reader, within: Duration) -> Result<(), String> {
    conn.send(&hello_frame())
        .map_err(|e| format!("cannot send a hello: {e}"))?;
    match reader.next(conn, Instant::now() + within)? {
        Next::Frame(body) => match check_server_frame(&body)? {
            ServerMsg::Welcome(_) => Ok(()),
            other => Err(format!("a valid hello was answered {other:?}")),
        },
        other => Err(format!(
            "no welcome to a valid hello within {within:?}: {other:?}"
        )),
    }
}

/// On a new connection: a hello answered with a welcome, then a stat of the root answered
/// with the root's attributes, all within `within`.
pub fn stat_root(mut c: Conn, within: Duration) -> Result<(), String> {
    let until = Instant::now() + within;
    let mut r = Reader::after_hello();
    handshake(&mut c, &mut r, within)?;
    let stat = wire::encode_call(
        1,
        WireCtx::default(),
        Request::Stat { gfid: Gfid::ROOT },
        MAX_FRAME as usize,
    )
    .map_err(|e| format!("encode: {e}"))?;
    c.send(&whole(&stat))
        .map_err(|e| format!("cannot send a stat: {e}"))?;
    loop {
        match r.next(&mut c, until)? {
            Next::Frame(body) => match check_server_frame(&body)? {
                ServerMsg::Reply(rep) if rep.id == 1 => {
                    return match rep.result {
                        Ok(ReplyBody::Stat(a)) if a.gfid == Gfid::ROOT => Ok(()),
                        other => Err(format!("a stat of the root answered {other:?}")),
                    };
                }
                ServerMsg::Pong(_) => {}
                other => return Err(format!("a stat of the root answered {other:?}")),
            },
            other => return Err(format!("no answer to a stat of the root: {other:?}")),
        }
    }
}
