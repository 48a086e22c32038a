//! How one fuzz input becomes what a client sends on one connection.
//!
//! ```text
//! input := mode:u8 chunk*
//! mode   bit 0 HANDSHAKE  the harness first sends a valid hello and reads the welcome: the
//!                         input's frames arrive in an established session. Clear: the
//!                         input's bytes are the first the server sees (its own hello, a
//!                         volfile request, or junk).
//!        bit 1 UNIX       over the brick's Unix socket (the kernel vouches for the peer:
//!                         root is believed, backing files may be handed out) instead of TCP.
//!        other bits are ignored.
//! chunk  tag:u8, by tag & 3:
//!        0 FRAME  len:u16 BE, then len bytes, sent as one frame: a u32 BE length, the bytes.
//!        1 RAW    len:u16 BE, then len bytes, sent as they are (lengths of their own, junk).
//!        2 FLUSH  what is queued is written now, then a short pause: later bytes arrive in
//!                 another read (frames split across reads, a frame's length before its body).
//!        3 AWAIT  what is queued is written, then the harness waits (briefly) for one frame
//!                 from the server: a reply, so that later frames find what earlier ones set
//!                 up (an fd opened, a lock held, a file created).
//! ```
//!
//! After the last chunk the harness ends the connection's input. On the Unix socket: end of
//! stream. Over TCP: an empty frame, which the server refuses and closes on, so that the server
//! sends the first FIN and the harness answers it with a reset, and no TIME_WAIT is left behind
//! (an input that ends inside a frame first gets that frame completed with zero bytes: the
//! empty frame would only extend its body). Either way the server has read everything before
//! it closes.
//!
//! A length past the end of the input takes what is left. Every input parses: the format never
//! rejects bytes, so mutations stay meaningful. [`Plan::to_bytes`] is the inverse, for the seed
//! corpus.

/// Mode bit: the harness handshakes first.
pub const HANDSHAKE: u8 = 1;
/// Mode bit: the Unix socket instead of TCP.
pub const UNIX: u8 = 2;

/// One step of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A frame body; the harness adds its length.
    Frame(Vec<u8>),
    /// Bytes sent as they are.
    Raw(Vec<u8>),
    Flush,
    Await,
}

/// What one input asks the harness to do.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Plan {
    pub handshake: bool,
    pub unix: bool,
    pub steps: Vec<Step>,
}

impl Plan {
    /// Parses an input (never fails; see the module docs).
    pub fn parse(data: &[u8]) -> Plan {
        let Some((&mode, mut rest)) = data.split_first() else {
            return Plan::default();
        };
        let mut plan = Plan {
            handshake: mode & HANDSHAKE != 0,
            unix: mode & UNIX != 0,
            steps: Vec::new(),
        };
        while let Some((&tag, after)) = rest.split_first() {
            rest = after;
            let step = match tag & 3 {
                0 | 1 => {
                    // Fewer than two length bytes left: an empty chunk.
                    let len = match rest {
                        [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
                        _ => 0,
                    };
                    rest = rest.get(2..).unwrap_or(&[]);
                    let (bytes, after) = rest.split_at(len.min(rest.len()));
                    rest = after;
                    if tag & 3 == 0 {
                        Step::Frame(bytes.to_vec())
                    } else {
                        Step::Raw(bytes.to_vec())
                    }
                }
                2 => Step::Flush,
                _ => Step::Await,
            };
            plan.steps.push(step);
        }
        plan
    }

    /// The input that parses back to this plan. Panics on a frame or raw chunk over 65,535
    /// bytes (seeds are small).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mode = (u8::from(self.handshake) * HANDSHAKE) | (u8::from(self.unix) * UNIX);
        let mut out = vec![mode];
        for step in &self.steps {
            let (tag, bytes) = match step {
                Step::Frame(b) => (0, Some(b)),
                Step::Raw(b) => (1, Some(b)),
                Step::Flush => (2, None),
                Step::Await => (3, None),
            };
            out.push(tag);
            if let Some(b) = bytes {
                let len = u16::try_from(b.len()).expect("a seed chunk over 65,535 bytes");
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(b);
            }
        }
        out
    }

    /// Every byte the connection sends after the harness's own hello, in order: what the
    /// server's frame reader sees (used to check the frames it will cut out of it).
    pub fn stream(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for step in &self.steps {
            match step {
                Step::Frame(b) => {
                    out.extend_from_slice(&frame_len(b.len()));
                    out.extend_from_slice(b);
                }
                Step::Raw(b) => out.extend_from_slice(b),
                Step::Flush | Step::Await => {}
            }
        }
        out
    }
}

/// The length prefix of a frame body of `len` bytes.
pub fn frame_len(len: usize) -> [u8; 4] {
    // Bodies come from a u16 length: always fits.
    u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes()
}

/// The frame bodies a reader cuts out of `stream` (u32 BE length, then that many bytes), up to
/// the first incomplete one. Empty frames are skipped (a reader refuses them and stops; this is
/// only an upper bound of what the server may see).
pub fn frames(stream: &[u8]) -> Vec<&[u8]> {
    cut(stream).0
}

/// [`frames`], and the bytes after the last whole frame: the start of a frame the reader is
/// still waiting for the rest of.
pub fn cut(stream: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut out = Vec::new();
    let mut rest = stream;
    while let [a, b, c, d, after @ ..] = rest {
        let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
        if len > after.len() {
            break;
        }
        let (body, after) = after.split_at(len);
        if !body.is_empty() {
            out.push(body);
        }
        rest = after;
    }
    (out, rest)
}

/// The largest frame any reader of the server takes (`max-write` 1 MiB + 64 KiB of headers):
/// a longer length is refused as soon as it is read.
pub const LARGEST_FRAME: usize = (1 << 20) + (64 << 10);

/// Zero bytes that complete `partial` (what [`cut`] left: the start of a frame) into a whole
/// frame; none if its length is over [`LARGEST_FRAME`] (the server closes on the length
/// alone).
pub fn completion(partial: &[u8]) -> Vec<u8> {
    if partial.is_empty() {
        return Vec::new();
    }
    let mut head = [0u8; 4];
    let n = partial.len().min(4);
    head[..n].copy_from_slice(&partial[..n]);
    let len = u32::from_be_bytes(head) as usize;
    if len > LARGEST_FRAME {
        return vec![0; 4 - n];
    }
    vec![0; 4 - n + len - (partial.len() - n)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_through_its_bytes() {
        let plan = Plan {
            handshake: true,
            unix: true,
            steps: vec![
                Step::Frame(vec![1, 2, 3]),
                Step::Flush,
                Step::Raw(vec![9; 300]),
                Step::Await,
                Step::Frame(Vec::new()),
            ],
        };
        assert_eq!(Plan::parse(&plan.to_bytes()), plan);
    }

    #[test]
    fn every_input_parses_and_short_lengths_take_what_is_left() {
        assert_eq!(Plan::parse(&[]), Plan::default());
        // Mode 0xfc: both bits clear, the others ignored. A frame chunk whose length says 10
        // with 2 bytes left takes those 2.
        let p = Plan::parse(&[0xfc, 4, 0, 10, 7, 8]);
        assert_eq!(
            p,
            Plan {
                handshake: false,
                unix: false,
                steps: vec![Step::Frame(vec![7, 8])],
            }
        );
        // A chunk with a single length byte left is empty.
        assert_eq!(Plan::parse(&[1, 1, 5]).steps, vec![Step::Raw(Vec::new())]);
        // Tags 2 and 3 (any high bits): flush and await.
        assert_eq!(
            Plan::parse(&[3, 0x06, 0xff]).steps,
            vec![Step::Flush, Step::Await]
        );
    }

    #[test]
    fn frames_are_cut_out_of_the_stream_as_a_reader_would() {
        let plan = Plan {
            steps: vec![
                Step::Frame(vec![1, 2]),
                // A raw chunk holding a whole frame of its own, then the start of another.
                Step::Raw(vec![0, 0, 0, 1, 5, 0, 0, 0, 9, 1]),
            ],
            ..Plan::default()
        };
        let stream = plan.stream();
        assert_eq!(frames(&stream), vec![&[1u8, 2][..], &[5u8][..]]);
        assert_eq!(cut(&stream).1, &[0, 0, 0, 9, 1]);
        assert_eq!(cut(&[0, 0, 0, 1, 7]).1, &[] as &[u8]);
    }

    #[test]
    fn an_unfinished_frame_is_completed_with_zeros() {
        let done = |p: &[u8]| {
            let mut s = p.to_vec();
            s.extend(completion(p));
            s
        };
        assert!(completion(&[]).is_empty());
        // Three bytes of a five-byte body: two more.
        assert_eq!(done(&[0, 0, 0, 5, 1, 2, 3]), [0, 0, 0, 5, 1, 2, 3, 0, 0]);
        // Half a length: the rest of it, then its body.
        assert_eq!(done(&[0, 0]), [0, 0, 0, 0]);
        assert_eq!(done(&[0, 0, 1]), [vec![0, 0, 1, 0], vec![0; 256]].concat());
        // A length no server takes: only the length is finished, no body follows.
        assert_eq!(done(&[0xff, 0xff]), [0xff, 0xff, 0, 0]);
        for p in [&[0, 0, 0, 5, 1, 2, 3][..], &[0, 0, 1], &[0]] {
            assert!(cut(&done(p)).1.is_empty(), "{p:?}");
        }
    }
}
