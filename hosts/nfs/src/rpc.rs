//! ONC RPC over TCP (RFC 5531): record marking, call headers, reply encoding.

use std::io::Cursor;

use nfs3_types::rpc::{
    RPC_VERSION_2, accept_stat_data, accepted_reply, auth_flavor, auth_stat, auth_unix, msg_body,
    opaque_auth, rejected_reply, reply_body, rpc_msg,
};
use nfs3_types::xdr_codec::{Opaque, Pack, Unpack};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest record accepted: a 1 MiB WRITE plus headers. Bigger records close the connection.
pub const MAX_RECORD: usize = (1 << 20) + (64 << 10);
/// Last-fragment bit of the record mark.
const LAST_FRAGMENT: u32 = 1 << 31;

/// Reads one record (all its fragments). `Ok(None)` at a clean end of stream.
pub async fn read_record<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut record = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        match r.read_exact(&mut mark).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && record.is_empty() => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        let mark = u32::from_be_bytes(mark);
        let len = (mark & !LAST_FRAGMENT) as usize;
        if record.len() + len > MAX_RECORD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("RPC record over {MAX_RECORD} bytes"),
            ));
        }
        let start = record.len();
        record.resize(start + len, 0);
        r.read_exact(&mut record[start..]).await?;
        if mark & LAST_FRAGMENT != 0 {
            return Ok(Some(record));
        }
    }
}

/// The header of a call; the procedure's arguments follow at `args_at`.
#[derive(Debug)]
pub struct Call {
    pub xid: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc: u32,
    /// The AUTH_UNIX credential, `None` for AUTH_NULL.
    pub auth: Option<auth_unix>,
    /// A flavor other than AUTH_NULL/AUTH_UNIX, or an undecodable AUTH_UNIX body.
    pub bad_auth: bool,
    pub args_at: usize,
}

/// Largest credential or verifier body (RFC 5531 `MAX_AUTH_BYTES`).
const MAX_AUTH_BYTES: usize = 400;
/// Longest AUTH_UNIX machine name.
const MAX_MACHINE_NAME: usize = 255;
/// Most supplementary groups in an AUTH_UNIX credential.
const MAX_AUTH_GIDS: usize = 16;

/// A bounds-checked XDR reader for the call header. The header is decoded by hand rather than
/// with `nfs3_types`, whose decoders allocate whatever length the peer claims before reading:
/// every length here is checked against its protocol limit and the bytes actually present.
struct Xdr<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Xdr<'a> {
    fn u32(&mut self) -> Option<u32> {
        let v = self.b.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }
    fn opaque(&mut self, max: usize) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > max {
            return None;
        }
        let padded = len.checked_add(3)? & !3;
        let v = self.b.get(self.pos..self.pos.checked_add(padded)?)?;
        self.pos += padded;
        Some(&v[..len])
    }
}

/// Decodes the call header; `Err` for a record that is not an RPC call (dropped without a
/// reply, as RFC 5531 servers do with garbage).
pub fn decode_call(record: &[u8]) -> Result<Call, ()> {
    let mut x = Xdr { b: record, pos: 0 };
    let mut header = || -> Option<(u32, [u32; 4], u32, &[u8])> {
        let xid = x.u32()?;
        if x.u32()? != 0 {
            return None; // not a CALL
        }
        let head = [x.u32()?, x.u32()?, x.u32()?, x.u32()?];
        let flavor = x.u32()?;
        let cred = x.opaque(MAX_AUTH_BYTES)?;
        let _verf_flavor = x.u32()?;
        x.opaque(MAX_AUTH_BYTES)?;
        Some((xid, head, flavor, cred))
    };
    let (xid, [rpcvers, prog, vers, proc], flavor, cred) = header().ok_or(())?;
    let (auth, bad_auth) = match flavor {
        f if f == auth_flavor::AUTH_UNIX as u32 => match decode_auth_unix(cred) {
            Some(a) => (Some(a), false),
            None => (None, true),
        },
        f if f == auth_flavor::AUTH_NULL as u32 => (None, false),
        _ => (None, true),
    };
    Ok(Call {
        xid,
        rpcvers,
        prog,
        vers,
        proc,
        auth,
        bad_auth,
        args_at: x.pos,
    })
}

fn decode_auth_unix(body: &[u8]) -> Option<auth_unix> {
    let mut x = Xdr { b: body, pos: 0 };
    let stamp = x.u32()?;
    let machine = x.opaque(MAX_MACHINE_NAME)?.to_vec();
    let uid = x.u32()?;
    let gid = x.u32()?;
    let n = x.u32()? as usize;
    if n > MAX_AUTH_GIDS {
        return None;
    }
    let gids = (0..n).map(|_| x.u32()).collect::<Option<Vec<u32>>>()?;
    Some(auth_unix {
        stamp,
        machinename: Opaque::owned(machine),
        uid,
        gid,
        gids,
    })
}

/// Decodes procedure arguments.
pub fn decode_args<T: Unpack>(record: &[u8], at: usize) -> Option<T> {
    let mut cur = Cursor::new(record.get(at..)?);
    T::unpack(&mut cur).ok().map(|(v, _)| v)
}

/// A reply record, record mark included.
fn reply(xid: u32, body: reply_body<'_>, result: Option<&dyn PackDyn>) -> Vec<u8> {
    let msg = rpc_msg {
        xid,
        body: msg_body::REPLY(body),
    };
    let size = 4 + msg.packed_size() + result.map_or(0, |r| r.size());
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&[0; 4]);
    // Packing into a Vec cannot fail on I/O; a value too large for XDR is a bug in the caller.
    if msg.pack(&mut out).is_err() || result.is_some_and(|r| r.pack_into(&mut out).is_err()) {
        tracing::error!(xid, "reply could not be encoded; sending SYSTEM_ERR");
        return accept_error(xid, accept_stat_data::SYSTEM_ERR);
    }
    let len = (out.len() - 4) as u32 | LAST_FRAGMENT;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// `Pack` as an object (its methods are generic over the writer).
trait PackDyn {
    fn size(&self) -> usize;
    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), ()>;
}

impl<T: Pack> PackDyn for T {
    fn size(&self) -> usize {
        self.packed_size()
    }
    fn pack_into(&self, out: &mut Vec<u8>) -> Result<(), ()> {
        self.pack(out).map(|_| ()).map_err(|_| ())
    }
}

fn accepted(data: accept_stat_data) -> reply_body<'static> {
    reply_body::MSG_ACCEPTED(accepted_reply {
        verf: opaque_auth::default(),
        reply_data: data,
    })
}

/// A successful reply carrying `result`.
pub fn success<T: Pack>(xid: u32, result: &T) -> Vec<u8> {
    reply(xid, accepted(accept_stat_data::SUCCESS), Some(result))
}

/// An accepted call that failed at the RPC level (PROC_UNAVAIL, GARBAGE_ARGS...).
pub fn accept_error(xid: u32, data: accept_stat_data) -> Vec<u8> {
    let msg = rpc_msg {
        xid,
        body: msg_body::REPLY(accepted(data)),
    };
    let mut out = Vec::with_capacity(4 + msg.packed_size());
    out.extend_from_slice(&[0; 4]);
    // Fixed-size values into a Vec: cannot fail.
    let _ = msg.pack(&mut out);
    let len = (out.len() - 4) as u32 | LAST_FRAGMENT;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// A program this server does not serve at this version.
pub fn prog_mismatch(xid: u32, vers: u32) -> Vec<u8> {
    accept_error(
        xid,
        accept_stat_data::PROG_MISMATCH {
            low: vers,
            high: vers,
        },
    )
}

/// A call refused for its credential.
pub fn auth_error(xid: u32, stat: auth_stat) -> Vec<u8> {
    reply(
        xid,
        reply_body::MSG_DENIED(rejected_reply::AUTH_ERROR(stat)),
        None,
    )
}

/// A call of another RPC version.
pub fn rpc_mismatch(xid: u32) -> Vec<u8> {
    reply(
        xid,
        reply_body::MSG_DENIED(rejected_reply::RPC_MISMATCH {
            low: RPC_VERSION_2,
            high: RPC_VERSION_2,
        }),
        None,
    )
}

#[cfg(test)]
mod tests {
    use nfs3_types::rpc::call_body;

    use super::*;

    fn call_record(cred: opaque_auth<'_>, args: &[u8]) -> Vec<u8> {
        let msg = rpc_msg {
            xid: 77,
            body: msg_body::CALL(call_body {
                rpcvers: 2,
                prog: 100_003,
                vers: 3,
                proc: 1,
                cred,
                verf: opaque_auth::default(),
            }),
        };
        let mut v = Vec::new();
        msg.pack(&mut v).expect("pack");
        v.extend_from_slice(args);
        v
    }

    #[test]
    fn decodes_auth_unix_calls() {
        let a = auth_unix {
            uid: 1000,
            gid: 100,
            gids: vec![4, 27],
            ..auth_unix::default()
        };
        let rec = call_record(opaque_auth::auth_unix(&a), &[0, 0, 0, 9]);
        let c = decode_call(&rec).expect("call");
        assert_eq!((c.xid, c.prog, c.vers, c.proc), (77, 100_003, 3, 1));
        let got = c.auth.expect("auth_unix");
        assert_eq!((got.uid, got.gid, got.gids), (1000, 100, vec![4, 27]));
        assert!(!c.bad_auth);
        assert_eq!(decode_args::<u32>(&rec, c.args_at), Some(9));
        let rec = call_record(opaque_auth::default(), &[]);
        let c = decode_call(&rec).expect("call");
        assert!(c.auth.is_none() && !c.bad_auth);
        let des = opaque_auth {
            flavor: auth_flavor::AUTH_DES,
            body: Opaque::borrowed(&[]),
        };
        assert!(decode_call(&call_record(des, &[])).expect("call").bad_auth);
        assert!(decode_call(&[1, 2, 3]).is_err());
        // A credential claiming 4 GiB, or 2^32 groups: refused, nothing allocated.
        let mut huge = rec[..24].to_vec();
        huge.extend_from_slice(&1u32.to_be_bytes());
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_call(&huge).is_err());
        let many = auth_unix {
            gids: (0..17).collect(),
            ..auth_unix::default()
        };
        let c = decode_call(&call_record(opaque_auth::auth_unix(&many), &[])).expect("call");
        assert!(c.bad_auth && c.auth.is_none());
        assert!(decode_args::<u32>(&rec, rec.len() + 4).is_none());
    }

    #[tokio::test]
    async fn record_marking() {
        // Two fragments, then a single-fragment record, then EOF.
        let mut wire = Vec::new();
        wire.extend_from_slice(&2u32.to_be_bytes());
        wire.extend_from_slice(b"ab");
        wire.extend_from_slice(&(1u32 | LAST_FRAGMENT).to_be_bytes());
        wire.extend_from_slice(b"c");
        wire.extend_from_slice(&(1u32 | LAST_FRAGMENT).to_be_bytes());
        wire.extend_from_slice(b"d");
        let mut r = &wire[..];
        assert_eq!(
            read_record(&mut r).await.expect("rec"),
            Some(b"abc".to_vec())
        );
        assert_eq!(read_record(&mut r).await.expect("rec"), Some(b"d".to_vec()));
        assert_eq!(read_record(&mut r).await.expect("eof"), None);
        let huge = ((MAX_RECORD as u32 + 1) | LAST_FRAGMENT).to_be_bytes();
        let mut r = &huge[..];
        assert!(read_record(&mut r).await.is_err());
    }

    #[test]
    fn replies_carry_their_length() {
        let r = success(5, &7u32);
        let mark = u32::from_be_bytes([r[0], r[1], r[2], r[3]]);
        assert_eq!((mark & !LAST_FRAGMENT) as usize, r.len() - 4);
        assert_ne!(mark & LAST_FRAGMENT, 0);
        // xid, REPLY, MSG_ACCEPTED, verf (AUTH_NULL, 0 bytes), SUCCESS, then the result.
        assert_eq!(&r[4..8], &5u32.to_be_bytes());
        assert_eq!(&r[r.len() - 4..], &7u32.to_be_bytes());
        let denied = auth_error(6, auth_stat::AUTH_TOOWEAK);
        assert_eq!(&denied[4..8], &6u32.to_be_bytes());
    }
}
