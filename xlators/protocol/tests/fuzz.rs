//! Fuzzing the frame reader and header decoder (bounded: proptest cases), and interoperation
//! with `tokio_util`'s `LengthDelimitedCodec`, whose frame layout the wire uses.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use proptest::prelude::*;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};
use xlator_api::{Buf, Errno, Fd, FdId, Flock, Gfid, LkCmd, LkOwner, Loc, LockKind};
use xlfs_protocol::wire::{
    self, ClientMsg, FrameReader, OutFrame, ReplyBody, Request, ServerMsg, WireCtx,
};

fn flatten(f: &OutFrame) -> Vec<u8> {
    let mut v = f.head.clone();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    v
}

/// Valid frames to mutate.
fn samples() -> Vec<Vec<u8>> {
    let fd = Fd {
        id: FdId(3),
        gfid: Gfid::ROOT,
        flags: 2,
    };
    let lock = Flock {
        kind: LockKind::Write,
        start: 1,
        len: 2,
        pid: 3,
        owner: LkOwner(4),
    };
    let calls = vec![
        Request::Writev {
            fd,
            offset: 9,
            data: Buf::zeroed(5000),
            flags: 0,
        },
        Request::Lookup {
            loc: Loc::new(Gfid::ROOT, "name"),
        },
        Request::Lk {
            fd,
            cmd: LkCmd::SetWait,
            lock,
        },
        Request::Readv {
            fd,
            offset: 0,
            size: 4096,
        },
    ];
    let mut out: Vec<Vec<u8>> = calls
        .into_iter()
        .map(|r| flatten(&wire::encode_call(1, WireCtx::default(), r, 1 << 20).expect("call")))
        .collect();
    for result in [
        Ok(ReplyBody::Readv(xlator_api::ReadReply::data(Buf::zeroed(
            6000,
        )))),
        Ok(ReplyBody::Writev(xlator_api::WriteReply::written(5))),
        Err(Errno::ENOENT),
    ] {
        out.push(flatten(
            &wire::encode_reply(2, result, 1 << 20).expect("reply"),
        ));
    }
    out
}

/// Decodes a frame body both ways and restores payloads; must never panic.
fn decode_all(body: &[u8]) {
    if let Ok((ClientMsg::Call(mut c), mut p)) =
        wire::decode::<ClientMsg>(Buf::copy_from_slice(body))
    {
        let _ = c.req.restore_payload(&mut p);
        let _ = c.req.visit_fds(&mut |_| Ok(()));
    }
    if let Ok((ServerMsg::Reply(r), mut p)) = wire::decode::<ServerMsg>(Buf::copy_from_slice(body))
        && let Ok(mut b) = r.result
    {
        let _ = b.restore_payload(&mut p);
    }
}

fn read_all(bytes: Vec<u8>, max: usize) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("rt");
    rt.block_on(async move {
        let mut r = FrameReader::new(&bytes[..], max);
        let mut n = 0;
        while let Ok(Some(body)) = r.next(Duration::from_secs(1)).await {
            decode_all(&body);
            n += 1;
        }
        n
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        decode_all(&body);
    }

    #[test]
    fn random_streams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        read_all(bytes, 1 << 16);
    }

    #[test]
    fn mutated_frames_never_panic(
        which in 0usize..7,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut f = samples().swap_remove(which);
        for (at, x) in flips {
            let i = at % f.len();
            f[i] ^= x;
        }
        if cut % 3 == 0 {
            f.truncate(cut % (f.len() + 1));
        }
        read_all(f.clone(), 1 << 20);
        if f.len() > 4 {
            decode_all(&f[4..]);
        }
    }
}

#[test]
fn valid_samples_decode() {
    for s in samples() {
        assert_eq!(read_all(s, 1 << 20), 1);
    }
}

#[tokio::test]
async fn frames_interoperate_with_length_delimited_codec() {
    let max = (1 << 20) + wire::HEADER_ROOM;
    let req = Request::Writev {
        fd: Fd::default(),
        offset: 1,
        data: Buf::from_vec(vec![3; 300_000]),
        flags: 0,
    };
    let ours = wire::encode_call(9, WireCtx::default(), req, max).expect("encode");
    // Ours -> codec.
    let mut bytes = Vec::new();
    wire::write_frames(&mut bytes, std::slice::from_ref(&ours))
        .await
        .expect("write");
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(max)
        .new_codec();
    let mut rd = FramedRead::new(&bytes[..], codec.clone());
    let body: BytesMut = rd.next().await.expect("a frame").expect("decodes");
    assert_eq!(&body[..], &bytes[4..]);
    assert!(rd.next().await.is_none());
    // Codec -> ours.
    let mut out = Vec::new();
    let mut wr = FramedWrite::new(&mut out, codec);
    wr.send(Bytes::copy_from_slice(&bytes[4..]))
        .await
        .expect("send");
    drop(wr);
    assert_eq!(out, bytes);
    let mut r = FrameReader::new(&out[..], max);
    let got = r
        .next(Duration::from_secs(1))
        .await
        .expect("read")
        .expect("frame");
    let (msg, mut p) = wire::decode::<ClientMsg>(got).expect("decode");
    let ClientMsg::Call(mut c) = msg else {
        panic!("not a call")
    };
    c.req.restore_payload(&mut p).expect("payload");
    assert!(matches!(c.req, Request::Writev { data, .. } if data.len() == 300_000));
    // The codec refuses the hostile length at once too.
    let mut rd = FramedRead::new(
        &[0xff, 0xff, 0xff, 0xf0, 0][..],
        LengthDelimitedCodec::builder()
            .max_frame_length(max)
            .new_codec(),
    );
    assert!(rd.next().await.expect("item").is_err());
}
