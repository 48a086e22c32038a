//! The wire between protocol/client and protocol/server.
//!
//! A frame is `u32 big-endian length | postcard header | raw payload`, the length counting the
//! header and the payload (the default layout of `tokio_util`'s `LengthDelimitedCodec`). The
//! header is a [`ClientMsg`] or a [`ServerMsg`]; a fop call or reply lists the lengths of the
//! payloads appended after it (the `Buf` arguments or reply: `writev` data, `readv` bytes), so
//! bulk data is never serialized or copied by the codec. Every frame is checked against a hard
//! maximum size before anything is allocated, and the payload lengths must add up to exactly the
//! bytes after the header.
//!
//! A connection starts with [`Hello`] (protocol version, fop table fingerprint, volume name,
//! client identity, a nonce) answered by [`Welcome`] or by a [`ServerMsg::Refused`]
//! message meant for the user. A brick with a secret answers first with a [`Challenge`] (its
//! proof over the nonces), which the client checks and answers with [`ClientMsg::Prove`]
//! before the welcome (see [`crate::creds`]).
//!
//! Instead of a hello, a connection may start with a [`VolfileRequest`] (how
//! `xlfs-mount HOST:/VOLUME` gets its graph): the server checks it like a hello (address,
//! version, fop table, the secret's challenge-response), answers [`ServerMsg::Volfile`] or [`ServerMsg::Refused`] and
//! closes the connection; no session is attached.

mod fops;
mod frame;
mod sender;
pub mod spin;
mod stream;
pub mod tls;

use serde::{Deserialize, Serialize};
use xlator_api::{Buf, Ctx, CtxBuilder, Errno, ExtScope, LkOwner};

pub use fops::{FdVisitor, ReplyBody, Request, SCHEMA, SCHEMA_TEXT};
pub use frame::{FramePump, FrameReader, OutFrame, Pumped, write_frames};
pub use sender::{FrameSender, SendError};
pub use stream::{ReadHalf, Stream, WriteHalf, unix_socket_path};

/// Version of this wire protocol; peers with different versions refuse each other. 2: entry
/// replies carry the parent's attributes (`Entry::postparent`). 3: backing files
/// ([`WireCtx::backing_wanted`], [`Reply::backing`]). 4: the request's wire-scoped `Ctx`
/// extensions ([`WireCtx::ext`]: `GfidReq`, `XattrReq`, `CreateXattrs`, plugins' keys),
/// xattrs in entry replies (`Entry::xattrs`, `DirEntry::xattrs`), the fops of xlator-api 0.2
/// (`rchecksum`, `getxattrs`, `setxattrs`; `forget_client` is refused from the wire) and
/// [`ClientMsg::Cancel`] for abandoned calls. 5: the secret never crosses the wire: a
/// challenge-response both ways ([`Challenge`], [`ClientMsg::Prove`]; see [`crate::creds`]);
/// the brick's boot id in the [`Welcome`]. 6: [`ServerMsg::Upcall`], the brick telling a
/// client that another client changed an inode it looked at.
pub const PROTOCOL_VERSION: u32 = 6;

/// The protocol version a client's first frame claims, when the frame is a hello or a
/// volfile request of any version (variant 0, 3 or 5; the magic; the version as one varint
/// byte): how a brick names an older client's version although it cannot decode its hello.
pub fn claimed_version(first: &[u8]) -> Option<u32> {
    match first {
        [0 | 3 | 5, m0, m1, m2, m3, v, ..] if [*m0, *m1, *m2, *m3] == MAGIC && *v < 0x80 => {
            Some(u32::from(*v))
        }
        _ => None,
    }
}
/// Most extensions one call carries.
pub const MAX_WIRE_EXTENSIONS: usize = 32;
/// Most bytes (keys and values) the extensions of one call carry.
pub const MAX_WIRE_EXT_BYTES: usize = 32 << 10;
/// First bytes of a [`Hello`], to tell an xlfs client from a stray connection.
pub const MAGIC: [u8; 4] = *b"XLFS";
/// Headroom above the largest write/read payload for headers.
pub const HEADER_ROOM: usize = 64 << 10;
/// Frames before the handshake completes (hello, welcome, refusal) are at most this big, so an
/// unauthenticated peer cannot make the server allocate more.
pub const HANDSHAKE_MAX_FRAME: usize = 64 << 10;
/// Largest [`ServerMsg::Volfile`] frame (the server refuses to send a bigger volfile; the
/// client accepts up to this from the server it asked).
pub const VOLFILE_MAX_FRAME: usize = 4 << 20;
/// Payloads smaller than this are copied into the header buffer (one write, one iovec);
/// larger ones are written straight from their `Buf`.
pub const INLINE_PAYLOAD: usize = 4 << 10;

/// Why a frame could not be read or decoded. Any of these closes the connection.
#[derive(thiserror::Error, Debug)]
pub enum WireError {
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge { len: u64, max: usize },
    #[error("empty frame")]
    EmptyFrame,
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("frame body not received within {0:?} (slow or stalled sender)")]
    SlowSender(std::time::Duration),
    #[error("bad header: {0}")]
    Header(#[from] postcard::Error),
    #[error("payload lengths in the header add up to {declared} bytes, but {actual} follow it")]
    PayloadMismatch { declared: u64, actual: usize },
    #[error("a payload argument carried inline bytes")]
    InlinePayload,
    #[error("fewer or more payloads than the message has payload arguments")]
    PayloadCount,
    #[error("payload of {0} bytes does not fit a frame")]
    PayloadTooLarge(usize),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The caller identity carried with every call, and the request's extensions that cross the
/// wire (the server rebuilds a [`Ctx`] from it).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct WireCtx {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub pid: u32,
    pub lk_owner: LkOwner,
    pub request_id: u64,
    /// On an `open`: the caller wants a backing file ([`xlator_api::BackingWanted`]); a
    /// server honours it only from a client on its Unix socket.
    pub backing_wanted: bool,
    /// The `Ctx` extensions of [`ExtScope::Wire`] (key, encoded value), in the order they
    /// were set; at most [`MAX_WIRE_EXTENSIONS`] and [`MAX_WIRE_EXT_BYTES`]. Never `srv/` or
    /// `local/` keys: a server drops any that a client sends anyway.
    pub ext: Vec<(String, Buf)>,
}

impl WireCtx {
    /// The wire form of `cx`: E2BIG if its wire extensions exceed the limits (the call is
    /// refused before anything is sent).
    pub fn from_ctx(cx: &Ctx) -> Result<WireCtx, Errno> {
        let ext: Vec<(String, Buf)> = cx
            .extensions()
            .filter(|(k, _)| ExtScope::of(k) == ExtScope::Wire)
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect();
        let w = WireCtx {
            uid: cx.uid(),
            gid: cx.gid(),
            groups: cx.groups().to_vec(),
            pid: cx.pid(),
            lk_owner: cx.lk_owner(),
            request_id: cx.request_id(),
            backing_wanted: false,
            ext,
        };
        w.check_ext()?;
        Ok(w)
    }

    /// E2BIG if the extensions exceed [`MAX_WIRE_EXTENSIONS`] or [`MAX_WIRE_EXT_BYTES`].
    pub fn check_ext(&self) -> Result<(), Errno> {
        let bytes: usize = self.ext.iter().map(|(k, v)| k.len() + v.len()).sum();
        if self.ext.len() > MAX_WIRE_EXTENSIONS || bytes > MAX_WIRE_EXT_BYTES {
            return Err(Errno::E2BIG);
        }
        Ok(())
    }

    pub fn to_ctx(&self) -> Ctx {
        self.to_builder().build()
    }

    /// A builder holding this context and its wire-scoped extensions, for a server that adds
    /// its own (server-set) ones before building. Keys a client may not set (`srv/`, which
    /// only the server knows, and `local/`) are dropped here, so a client cannot forge a
    /// `ClientId` or `PipePayloadOk`.
    pub fn to_builder(&self) -> CtxBuilder {
        let b = Ctx::builder(self.uid, self.gid)
            .groups(&self.groups)
            .pid(self.pid)
            .lk_owner(self.lk_owner)
            .request_id(self.request_id);
        self.ext
            .iter()
            .filter(|(k, _)| ExtScope::of(k) == ExtScope::Wire)
            .fold(b, |b, (k, v)| b.ext_raw(k, v.clone()))
    }
}

/// First frame of a connection, from the client.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub magic: [u8; 4],
    pub version: u32,
    /// Fingerprint of the fop table ([`SCHEMA`]).
    pub schema: u64,
    /// The volume (brick) the client wants: its `remote-subvolume`.
    pub volume: String,
    /// Who is connecting (host, process, translator), for logs and statedumps.
    pub client: String,
    /// A fresh random nonce ([`crate::creds::NONCE_LEN`] bytes): a brick with a secret proves
    /// it holds the secret over it ([`ServerMsg::Challenge`]).
    pub nonce: Vec<u8>,
    /// The largest frame the client accepts.
    pub max_frame: u32,
}

/// The server's acceptance.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    pub volume: String,
    /// The server's identity (host, process, translator).
    pub server: String,
    /// The largest frame the server accepts.
    pub max_frame: u32,
    /// Changes when what the brick acknowledged but did not sync may have been lost (its
    /// machine rebooted, or, with `boot-id process`, its process restarted): a client whose
    /// writes were acknowledged under another boot id fails their fd's next fsync and flush
    /// with EIO instead of reporting them safe.
    pub boot_id: u64,
}

/// Asks for the client volfile of a volume, instead of a [`Hello`]. Checked like a hello
/// (address allow-list, magic, version, fop table, secret's challenge); the connection closes after the
/// answer.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct VolfileRequest {
    pub magic: [u8; 4],
    pub version: u32,
    /// Fingerprint of the fop table ([`SCHEMA`]).
    pub schema: u64,
    /// The volume whose client volfile is wanted (`xlfs-mount HOST:/VOLUME`).
    pub volume: String,
    /// Who asks (host, process), for logs.
    pub client: String,
    /// A fresh random nonce, as in [`Hello`].
    pub nonce: Vec<u8>,
}

/// A brick with a secret answers a [`Hello`] or a volfile request with this: its own nonce,
/// and its proof ([`crate::creds::proof`], role server) over both nonces. The client checks
/// the proof (an impostor brick cannot make it) and answers with [`ClientMsg::Prove`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub nonce: Vec<u8>,
    pub proof: Vec<u8>,
}

/// The answer to a [`VolfileRequest`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct VolfileReply {
    pub volume: String,
    /// The client volfile (RON), as the brick has it now.
    pub text: String,
}

/// One fop call.
#[derive(Serialize, Deserialize, Debug)]
pub struct Call {
    pub id: u64,
    pub ctx: WireCtx,
    /// Lengths of the payloads after the header.
    pub payload: Vec<u32>,
    pub req: Request,
}

/// The answer to the [`Call`] with the same id.
#[derive(Serialize, Deserialize, Debug)]
pub struct Reply {
    pub id: u64,
    pub payload: Vec<u32>,
    pub result: Result<ReplyBody, Errno>,
    /// An `open` reply's backing file, as a descriptor number in the server process (the
    /// client takes its own copy with `pidfd_getfd(2)` and checks device and inode).
    pub backing: Option<WireBacking>,
}

/// A backing file on the wire (see [`Reply::backing`]).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireBacking {
    pub fd: i32,
    pub dev: u64,
    pub ino: u64,
}

/// Frames a client sends.
#[derive(Serialize, Deserialize, Debug)]
pub enum ClientMsg {
    Hello(Hello),
    Ping(u64),
    Call(Call),
    /// First (and only) frame of a volfile fetch.
    GetVolfile(VolfileRequest),
    /// The client abandoned call `id` (its frame timeout fired or its caller went away): the
    /// server drops the request if it is still running (a waiting lock request stops
    /// waiting) and answers it with EINTR. New variants go last, so the older ones keep
    /// their encoding.
    Cancel(u64),
    /// First (and only) frame of a volfile watch: like [`ClientMsg::GetVolfile`], but the
    /// server answers only once the volfile's text differs from the one the client has
    /// ([`VolfileWatch::known`]), or after [`VolfileWatch::hold_ms`] with the same text.
    WatchVolfile(VolfileWatch),
    /// The client's answer to a [`ServerMsg::Challenge`]: its proof over both nonces.
    Prove(Vec<u8>),
}

/// A long poll for a client volfile: how clients learn that a volume's graph changed
/// (`xlfs volume set`, and later add-brick) without polling the brick in a loop.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct VolfileWatch {
    pub request: VolfileRequest,
    /// `fetch::volfile_version` of the text the client has.
    pub known: u64,
    /// The longest the server holds the answer back (it caps it).
    pub hold_ms: u32,
}

/// Frames a server sends.
// Replies are the common case and each message is decoded and consumed on its own: boxing
// the big one would only add an allocation per reply.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize, Debug)]
pub enum ServerMsg {
    Welcome(Welcome),
    /// The handshake was refused; the text tells the user what to fix. The server closes the
    /// connection after sending it.
    Refused(String),
    Pong(u64),
    Reply(Reply),
    /// The answer to [`ClientMsg::GetVolfile`]; the server closes the connection after it.
    Volfile(VolfileReply),
    /// See [`Challenge`].
    Challenge(Challenge),
    /// Another client changed inodes or entries this client looked at recently (see
    /// `docs/consistency.md`): advisory, sent unasked, never answered.
    Upcall(Vec<xlator_api::Upcall>),
}

/// The client's half of the secret's challenge-response (see [`crate::creds`]), given the
/// brick's first answer to a hello or volfile request: a [`Challenge`] is checked against
/// `secret` and answered with the client's proof, and the brick's next answer returned; any
/// other answer is returned as it is, unless the client holds a secret and the brick did not
/// ask for it (then the brick has none, or is not the brick it claims to be: refused). `from`
/// names where the client's secret comes from, for messages.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn answer_challenge<R, W>(
    reader: &mut FrameReader<R>,
    w: &mut W,
    first: ServerMsg,
    secret: Option<&str>,
    volume: &str,
    client_nonce: &[u8],
    timeout: std::time::Duration,
    from: &str,
) -> Result<ServerMsg, String>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin + frame::PipeSink,
{
    use crate::creds::{self, Role};
    let challenge = match (first, secret) {
        (ServerMsg::Challenge(c), _) => c,
        (m @ ServerMsg::Refused(_), _) | (m, None) => return Ok(m),
        (_, Some(_)) => {
            return Err(format!(
                "the brick did not ask for the volume's secret: it has none, or it is not the \
                 brick it claims to be (remove {from} only if that brick really has no secret)"
            ));
        }
    };
    let Some(secret) = secret else {
        return Err(format!(
            "this brick requires the volume's secret: give it with {from} (a file whose first \
             line is the secret, mode 0600; `xlfs volume create` keeps it in \
             <state>/volumes/<VOLUME>/secret)"
        ));
    };
    if !creds::verify(
        secret,
        Role::Server,
        volume,
        client_nonce,
        &challenge.nonce,
        &challenge.proof,
    ) {
        return Err(format!(
            "the brick could not prove it holds the secret of {from}: that is another \
             volume's secret, or this is not the brick it claims to be"
        ));
    }
    let proof = creds::proof(secret, Role::Client, volume, client_nonce, &challenge.nonce);
    let f = encode(&ClientMsg::Prove(proof), Vec::new(), HANDSHAKE_MAX_FRAME)
        .map_err(|e| e.to_string())?;
    write_frames(w, std::slice::from_ref(&f))
        .await
        .map_err(|e| format!("cannot send the proof: {e}"))?;
    match reader.next(timeout).await {
        Ok(Some(body)) => decode::<ServerMsg>(body)
            .map(|m| m.0)
            .map_err(|e| format!("bad answer to the proof: {e}")),
        Ok(None) | Err(WireError::Truncated) => {
            Err("the server closed the connection after the proof (restarting?)".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Messages that may carry payloads.
pub trait Message: Serialize + for<'de> Deserialize<'de> {
    fn payload_lens(&self) -> &[u32];
}

impl Message for ClientMsg {
    fn payload_lens(&self) -> &[u32] {
        match self {
            ClientMsg::Call(c) => &c.payload,
            _ => &[],
        }
    }
}

impl Message for ServerMsg {
    fn payload_lens(&self) -> &[u32] {
        match self {
            ServerMsg::Reply(r) => &r.payload,
            _ => &[],
        }
    }
}

/// The payloads of a received frame, as zero-copy slices of it.
pub struct Payloads {
    bufs: std::vec::IntoIter<Buf>,
}

impl Payloads {
    pub fn new(bufs: Vec<Buf>) -> Payloads {
        Payloads {
            bufs: bufs.into_iter(),
        }
    }

    pub(crate) fn next_payload(&mut self) -> Result<Buf, WireError> {
        self.bufs.next().ok_or(WireError::PayloadCount)
    }

    /// Errors if payloads are left over.
    pub(crate) fn finish(&mut self) -> Result<(), WireError> {
        match self.bufs.next() {
            Some(_) => Err(WireError::PayloadCount),
            None => Ok(()),
        }
    }
}

/// Encodes `msg` with `payload` appended. Fails if the frame would exceed `max_frame`.
pub fn encode<M: Serialize>(
    msg: &M,
    payload: Vec<Buf>,
    max_frame: usize,
) -> Result<OutFrame, WireError> {
    let head = postcard::to_extend(msg, vec![0u8; 4])?;
    let payload_len: usize = payload.iter().map(Buf::len).sum();
    let len = head.len() - 4 + payload_len;
    if len > max_frame {
        return Err(WireError::FrameTooLarge {
            len: len as u64,
            max: max_frame,
        });
    }
    let prefix = u32::try_from(len).map_err(|_| WireError::PayloadTooLarge(len))?;
    let mut frame = OutFrame { head, payload };
    frame.head[..4].copy_from_slice(&prefix.to_be_bytes());
    frame.inline_small_payloads();
    Ok(frame)
}

/// Lengths of `bufs` for a header.
pub fn payload_lens(bufs: &[Buf]) -> Result<Vec<u32>, WireError> {
    bufs.iter()
        .map(|b| u32::try_from(b.len()).map_err(|_| WireError::PayloadTooLarge(b.len())))
        .collect()
}

/// Decodes a frame body (without its length prefix): the header, then the payloads it
/// declares, which must cover the rest of the frame exactly.
pub fn decode<M: Message>(frame: Buf) -> Result<(M, Payloads), WireError> {
    if frame.is_empty() {
        return Err(WireError::EmptyFrame);
    }
    let (msg, rest) = postcard::take_from_bytes::<M>(&frame)?;
    let head_len = frame.len() - rest.len();
    let declared = msg
        .payload_lens()
        .iter()
        .map(|&l| u64::from(l))
        .sum::<u64>();
    if declared != rest.len() as u64 {
        return Err(WireError::PayloadMismatch {
            declared,
            actual: rest.len(),
        });
    }
    let mut bufs = Vec::with_capacity(msg.payload_lens().len());
    let mut at = head_len;
    for &l in msg.payload_lens() {
        let end = at + l as usize;
        bufs.push(frame.slice(at..end));
        at = end;
    }
    Ok((msg, Payloads::new(bufs)))
}

/// Encodes a fop call, moving its `Buf` arguments to the payload.
pub fn encode_call(
    id: u64,
    ctx: WireCtx,
    mut req: Request,
    max_frame: usize,
) -> Result<OutFrame, WireError> {
    let mut bufs = Vec::new();
    req.take_payload(&mut bufs);
    let payload = payload_lens(&bufs)?;
    encode(
        &ClientMsg::Call(Call {
            id,
            ctx,
            payload,
            req,
        }),
        bufs,
        max_frame,
    )
}

/// Encodes a fop reply, moving a `Buf` reply to the payload.
pub fn encode_reply(
    id: u64,
    mut result: Result<ReplyBody, Errno>,
    max_frame: usize,
) -> Result<OutFrame, WireError> {
    let mut bufs = Vec::new();
    if let Ok(body) = &mut result {
        body.take_payload(&mut bufs);
    }
    let backing = match &result {
        Ok(ReplyBody::Open(o)) => o.backing.as_ref().into_option().map(|b| WireBacking {
            fd: b.raw_fd(),
            dev: b.dev(),
            ino: b.ino(),
        }),
        _ => None,
    };
    let payload = payload_lens(&bufs)?;
    encode(
        &ServerMsg::Reply(Reply {
            id,
            payload,
            result,
            backing,
        }),
        bufs,
        max_frame,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{Fd, FdId, Gfid};

    fn body(f: &OutFrame) -> Buf {
        let mut v = f.head[4..].to_vec();
        for p in &f.payload {
            v.extend_from_slice(p);
        }
        Buf::from_vec(v)
    }

    #[test]
    fn call_round_trips_with_big_payload_outside_the_header() {
        let data = Buf::from_vec((0..200_000u32).map(|i| i as u8).collect());
        let fd = Fd {
            id: FdId(9),
            gfid: Gfid::ROOT,
            flags: 1,
        };
        let req = Request::Writev {
            fd,
            offset: 42,
            data: data.clone(),
            flags: 0,
        };
        let f = encode_call(7, WireCtx::default(), req, 1 << 20).expect("encode");
        assert!(f.head.len() < 100, "header {} bytes", f.head.len());
        assert!(f.payload[0].shares_storage_with(&data));
        let len = u32::from_be_bytes([f.head[0], f.head[1], f.head[2], f.head[3]]) as usize;
        assert_eq!(len, f.len() - 4);
        let (msg, mut p) = decode::<ClientMsg>(body(&f)).expect("decode");
        let ClientMsg::Call(mut call) = msg else {
            panic!("not a call")
        };
        call.req.restore_payload(&mut p).expect("restore");
        match call.req {
            Request::Writev {
                data: d, offset, ..
            } => {
                assert_eq!(offset, 42);
                assert_eq!(d, data);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn limits_and_mismatches_are_errors() {
        let req = Request::Writev {
            fd: Fd::default(),
            offset: 0,
            data: Buf::zeroed(10_000),
            flags: 0,
        };
        assert!(matches!(
            encode_call(1, WireCtx::default(), req, 5000),
            Err(WireError::FrameTooLarge { .. })
        ));
        let f = encode_call(
            1,
            WireCtx::default(),
            Request::Stat { gfid: Gfid::ROOT },
            1 << 20,
        )
        .expect("encode");
        let mut b = body(&f).to_vec();
        b.push(0);
        assert!(matches!(
            decode::<ClientMsg>(Buf::from_vec(b)),
            Err(WireError::PayloadMismatch { .. })
        ));
        assert!(matches!(
            decode::<ClientMsg>(Buf::new()),
            Err(WireError::EmptyFrame)
        ));
    }

    #[test]
    fn volfile_messages_round_trip_and_keep_older_variants_stable() {
        let req = VolfileRequest {
            magic: MAGIC,
            version: PROTOCOL_VERSION,
            schema: SCHEMA,
            volume: "gv0".into(),
            client: "host:1:xlfs-mount".into(),
            nonce: vec![7; 32],
        };
        let f = encode(&ClientMsg::GetVolfile(req.clone()), Vec::new(), 1 << 20).expect("enc");
        assert_eq!(claimed_version(&f.head[4..]), Some(PROTOCOL_VERSION));
        // A version-4 hello (the secret where the nonce is now) still shows its version.
        let mut v4 = vec![0u8];
        v4.extend_from_slice(&MAGIC);
        v4.extend_from_slice(&[4, 1, 2, 3]);
        assert_eq!(claimed_version(&v4), Some(4));
        assert_eq!(claimed_version(b"\x00XLFZ\x05"), None);
        assert_eq!(claimed_version(&[1, 5]), None, "a ping is not a hello");
        match decode::<ClientMsg>(body(&f)).expect("decode").0 {
            ClientMsg::GetVolfile(r) => assert_eq!(r, req),
            other => panic!("{other:?}"),
        }
        let text = "( volumes: [ (name: \"gv0\", type: \"debug/io-stats\") ] )".repeat(2000);
        let reply = VolfileReply {
            volume: "gv0".into(),
            text,
        };
        let f = encode(
            &ServerMsg::Volfile(reply.clone()),
            Vec::new(),
            VOLFILE_MAX_FRAME,
        )
        .expect("enc");
        assert!(
            f.len() > HANDSHAKE_MAX_FRAME,
            "a volfile may exceed the handshake limit"
        );
        match decode::<ServerMsg>(body(&f)).expect("decode").0 {
            ServerMsg::Volfile(r) => assert_eq!(r, reply),
            other => panic!("{other:?}"),
        }
        // The new variants come last: the first bytes of the older ones are unchanged.
        let ping = encode(&ClientMsg::Ping(5), Vec::new(), 1 << 20).expect("enc");
        assert_eq!(&ping.head[4..], &[1, 5]);
        let cancel = encode(&ClientMsg::Cancel(5), Vec::new(), 1 << 20).expect("enc");
        assert_eq!(&cancel.head[4..], &[4, 5]);
        let pong = encode(&ServerMsg::Pong(5), Vec::new(), 1 << 20).expect("enc");
        assert_eq!(&pong.head[4..], &[2, 5]);
    }

    #[test]
    fn wire_extensions_round_trip_and_server_set_ones_are_dropped() {
        use xlator_api::{BackingWanted, ClientId, CtxExtension, GfidReq, PipePayloadOk};
        let g = Gfid::random();
        let cx = Ctx::builder(1, 2)
            .ext(&GfidReq(g))
            .ext(&ClientId(9))
            .ext(&BackingWanted)
            .ext_raw("plugin/x", Buf::from("v"))
            .build();
        let w = WireCtx::from_ctx(&cx).expect("within limits");
        let keys: Vec<&str> = w.ext.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["xlfs/gfid-req", "plugin/x"],
            "only wire-scoped keys are sent"
        );
        let f = encode_call(1, w, Request::Stat { gfid: g }, 1 << 20).expect("encode");
        let ClientMsg::Call(call) = decode::<ClientMsg>(body(&f)).expect("decode").0 else {
            panic!("not a call")
        };
        let back = call.ctx.to_ctx();
        assert_eq!(back.ext::<GfidReq>(), Some(GfidReq(g)));
        assert!(back.has_ext("plugin/x"));
        // A forged server-set or local key is dropped when the server rebuilds the context.
        let mut forged = call.ctx.clone();
        forged
            .ext
            .push((ClientId::KEY.into(), Buf::from_vec(ClientId(1).encode())));
        forged.ext.push((PipePayloadOk::KEY.into(), Buf::new()));
        forged.ext.push((BackingWanted::KEY.into(), Buf::new()));
        let rebuilt = forged.to_ctx();
        assert_eq!(rebuilt.ext::<ClientId>(), None);
        assert!(!rebuilt.has_ext(PipePayloadOk::KEY) && !rebuilt.has_ext(BackingWanted::KEY));
    }

    #[test]
    fn extensions_over_the_limits_are_e2big() {
        let many = (0..=MAX_WIRE_EXTENSIONS)
            .fold(Ctx::builder(0, 0), |b, i| {
                b.ext_raw(&format!("k{i}"), Buf::new())
            })
            .build();
        assert_eq!(WireCtx::from_ctx(&many), Err(Errno::E2BIG));
        let big = Ctx::builder(0, 0)
            .ext_raw("k", Buf::zeroed(MAX_WIRE_EXT_BYTES))
            .build();
        assert_eq!(WireCtx::from_ctx(&big), Err(Errno::E2BIG));
        let ok = Ctx::builder(0, 0)
            .ext_raw("k", Buf::zeroed(MAX_WIRE_EXT_BYTES - 1))
            .build();
        assert!(WireCtx::from_ctx(&ok).is_ok());
    }

    /// Entry and DirEntry xattrs are part of the replies' encoding.
    #[test]
    fn entry_xattrs_cross_in_replies() {
        use xlator_api::{DirEntry, Entry, Iatt, Xattr};
        let x = Xattr {
            name: "trusted.afr.c-0".into(),
            value: Buf::from_vec(vec![0, 0, 0, 1]),
        };
        let mut e = Entry::new(Iatt::default());
        e.xattrs.push(x.clone());
        let f = encode_reply(3, Ok(ReplyBody::Lookup(e.clone())), 1 << 20).expect("encode");
        match decode::<ServerMsg>(body(&f)).expect("decode").0 {
            ServerMsg::Reply(Reply {
                result: Ok(ReplyBody::Lookup(got)),
                ..
            }) => assert_eq!(got, e),
            other => panic!("{other:?}"),
        }
        let d = DirEntry {
            name: "f".into(),
            next_offset: 1,
            attr: Iatt::default(),
            xattrs: vec![x].into(),
        };
        let f = encode_reply(4, Ok(ReplyBody::Readdirp(vec![d.clone()].into())), 1 << 20)
            .expect("encode");
        match decode::<ServerMsg>(body(&f)).expect("decode").0 {
            ServerMsg::Reply(Reply {
                result: Ok(ReplyBody::Readdirp(got)),
                ..
            }) => assert_eq!(got.to_vec(), vec![d]),
            other => panic!("{other:?}"),
        }
    }
}
