//! Frames the harness rewrites before they reach the brick: valid requests whose effect
//! outlives the input and costs the machine rather than exercising the server. The server
//! lets them through on purpose (protocol/server's README: `fallocate` and `zerofill` pass
//! their 64-bit lengths unchanged), so they are not findings; unchecked, a fuzzer finds them
//! within minutes and fills the disk or makes every later input wait.
//!
//! - `fallocate` and `zerofill` of more than [`MAX_ALLOCATE`] bytes: the length is cut to it
//!   (the files stay in the brick from one input to the next; 1 MiB of each is enough to
//!   exercise the path).
//! - a volfile watch's `hold_ms`: set to 0, answered at once (a held watch keeps its
//!   connection up to 60 s after the client left, and the harness waits for each input's
//!   connection to end).
//!
//! Frames of a [`Step::Raw`](crate::input::Step) chunk cannot be rewritten in place: an input
//! whose raw bytes hold such a frame is not run at all ([`wild`]).

use xlfs_protocol::wire::{self, ClientMsg, OutFrame, Request, VOLFILE_MAX_FRAME};

use xlator_api::Buf;

/// The most `fallocate` or `zerofill` may ask for in one call.
pub const MAX_ALLOCATE: u64 = 1 << 20;

/// The body of an encoded frame (without its length prefix).
pub fn body(f: &OutFrame) -> Vec<u8> {
    let mut v = f.head[4..].to_vec();
    for p in &f.payload {
        v.extend_from_slice(p);
    }
    v
}

/// The message in `body` as the server would decode it, with its payloads restored; `None`
/// if the server would refuse it.
fn decoded(body: &[u8]) -> Option<ClientMsg> {
    let (mut msg, mut payloads) = wire::decode::<ClientMsg>(Buf::copy_from_slice(body)).ok()?;
    if let ClientMsg::Call(c) = &mut msg {
        c.req.restore_payload(&mut payloads).ok()?;
    }
    Some(msg)
}

/// Applies the rules to `msg`; true if it changed.
fn apply(msg: &mut ClientMsg) -> bool {
    match msg {
        ClientMsg::Call(c) => match &mut c.req {
            Request::Fallocate { len, .. } | Request::Zerofill { len, .. }
                if *len > MAX_ALLOCATE =>
            {
                *len = MAX_ALLOCATE;
                true
            }
            _ => false,
        },
        ClientMsg::WatchVolfile(w) if w.hold_ms > 0 => {
            w.hold_ms = 0;
            true
        }
        _ => false,
    }
}

/// `body` with the rules applied, or `None` if none applies (send it as it is).
pub fn tame(frame_body: &[u8]) -> Option<Vec<u8>> {
    let mut msg = decoded(frame_body)?;
    if !apply(&mut msg) {
        return None;
    }
    let frame = match msg {
        ClientMsg::Call(c) => wire::encode_call(c.id, c.ctx, c.req, usize::MAX),
        other => wire::encode(&other, Vec::new(), VOLFILE_MAX_FRAME),
    };
    // Re-encoding what just decoded does not fail; if it ever did, the frame would stay as it
    // is, and the input would not be run ([`wild`] holds for it).
    frame.ok().map(|f| body(&f))
}

/// True if a rule applies to `body`: such a frame must not be sent as it is.
pub fn wild(body: &[u8]) -> bool {
    decoded(body).is_some_and(|mut m| apply(&mut m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{Fd, FdId, Gfid};
    use xlfs_protocol::wire::WireCtx;

    fn call(req: Request) -> Vec<u8> {
        body(&wire::encode_call(7, WireCtx::default(), req, 1 << 20).expect("encode"))
    }

    fn fd() -> Fd {
        Fd {
            id: FdId(1),
            gfid: Gfid::ROOT,
            flags: libc::O_RDWR,
        }
    }

    #[test]
    fn large_allocations_are_cut_and_nothing_else_changes() {
        let big = call(Request::Fallocate {
            fd: fd(),
            mode: 0,
            offset: 5,
            len: 50 << 30,
        });
        assert!(wild(&big));
        let tamed = tame(&big).expect("rewritten");
        assert!(!wild(&tamed));
        assert_eq!(
            tamed,
            call(Request::Fallocate {
                fd: fd(),
                mode: 0,
                offset: 5,
                len: MAX_ALLOCATE,
            })
        );
        let zero = call(Request::Zerofill {
            fd: fd(),
            offset: 0,
            len: MAX_ALLOCATE + 1,
        });
        assert!(wild(&zero));
        // At the bound, and other fops, pass as they are.
        for ok in [
            call(Request::Zerofill {
                fd: fd(),
                offset: 0,
                len: MAX_ALLOCATE,
            }),
            call(Request::Discard {
                fd: fd(),
                offset: 0,
                len: u64::MAX,
            }),
            call(Request::Stat { gfid: Gfid::ROOT }),
        ] {
            assert!(!wild(&ok));
            assert_eq!(tame(&ok), None);
        }
    }

    #[test]
    fn frames_the_server_would_refuse_are_left_alone() {
        let mut big = call(Request::Fallocate {
            fd: fd(),
            mode: 0,
            offset: 5,
            len: 50 << 30,
        });
        // A byte more than the header's payload lengths declare: the server closes.
        big.push(0);
        assert!(!wild(&big));
        assert_eq!(tame(&big), None);
        assert_eq!(tame(b"junk"), None);
    }
}
