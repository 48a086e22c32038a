//! A raw wire client: frames written and read by hand, for what protocol/client never sends
//! (forged extensions, host-only fops).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use xlator_api::Errno;
use xlfs_protocol::wire::{
    self, ClientMsg, FrameReader, HANDSHAKE_MAX_FRAME, Hello, MAGIC, OutFrame, PROTOCOL_VERSION,
    ReplyBody, Request, SCHEMA, ServerMsg, WireCtx,
};

pub struct Raw {
    r: FrameReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    next_id: u64,
}

async fn write(w: &mut OwnedWriteHalf, f: &OutFrame) {
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    w.write_all(&v).await.expect("write");
}

impl Raw {
    /// Connects and handshakes for `volume`.
    pub async fn connect(addr: SocketAddr, volume: &str) -> Raw {
        match Raw::try_connect(addr, volume).await {
            Some(r) => r,
            None => panic!("not welcomed by {addr}"),
        }
    }

    /// [`connect`](Self::connect), `None` if the server refuses or closes.
    pub async fn try_connect(addr: SocketAddr, volume: &str) -> Option<Raw> {
        let (r, mut w) = TcpStream::connect(addr)
            .await
            .expect("connect")
            .into_split();
        let hello = Hello {
            magic: MAGIC,
            version: PROTOCOL_VERSION,
            schema: SCHEMA,
            volume: volume.into(),
            client: "raw-test".into(),
            nonce: vec![0; 32],
            max_frame: 1 << 21,
        };
        let f = wire::encode(&ClientMsg::Hello(hello), Vec::new(), HANDSHAKE_MAX_FRAME)
            .expect("encode");
        write(&mut w, &f).await;
        let mut raw = Raw {
            r: FrameReader::new(r, 1 << 21),
            w,
            next_id: 1,
        };
        let body = raw.r.next(Duration::from_secs(10)).await.ok()??;
        match wire::decode::<ServerMsg>(body).ok()?.0 {
            ServerMsg::Welcome(_) => Some(raw),
            _ => None,
        }
    }

    async fn next(&mut self) -> ServerMsg {
        let body = self
            .r
            .next(Duration::from_secs(10))
            .await
            .expect("read")
            .expect("a frame");
        let (mut msg, mut payloads) = wire::decode::<ServerMsg>(body).expect("decode");
        // A reply's data (readv bytes) travels after the header: put it back.
        if let ServerMsg::Reply(r) = &mut msg
            && let Ok(body) = &mut r.result
        {
            body.restore_payload(&mut payloads).expect("reply payload");
        }
        msg
    }

    /// Sends one call and does not read its reply (a client that stopped reading); its id.
    pub async fn send_only(&mut self, ctx: WireCtx, req: Request) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let f = wire::encode_call(id, ctx, req, 1 << 21).expect("encode");
        write(&mut self.w, &f).await;
        id
    }

    /// Sends a ping without reading anything.
    pub async fn ping_only(&mut self, n: u64) -> std::io::Result<()> {
        let f = wire::encode(&ClientMsg::Ping(n), Vec::new(), HANDSHAKE_MAX_FRAME).expect("encode");
        let mut v = f.head.clone();
        for p in &f.payload {
            v.extend_from_slice(p);
        }
        self.w.write_all(&v).await
    }

    /// The next reply (pongs skipped): its call id and result.
    pub async fn reply(&mut self) -> (u64, Result<ReplyBody, Errno>) {
        loop {
            match self.next().await {
                ServerMsg::Reply(r) => return (r.id, r.result),
                ServerMsg::Pong(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// Sends one call with `ctx` and waits for its reply.
    pub async fn call(&mut self, ctx: WireCtx, req: Request) -> Result<ReplyBody, Errno> {
        let id = self.next_id;
        self.next_id += 1;
        let f = wire::encode_call(id, ctx, req, 1 << 21).expect("encode");
        write(&mut self.w, &f).await;
        loop {
            match self.next().await {
                ServerMsg::Reply(r) if r.id == id => return r.result,
                ServerMsg::Pong(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}
