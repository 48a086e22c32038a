//! The pure logic of one file's write-behind state: the ordered queue of requests, window
//! accounting, aggregation of contiguous writes, conflict detection and the choice of what may
//! be sent to the child now. No I/O and no waiting here; [`crate::engine`] drives it.
//!
//! Every request on a file gets a sequence number when it arrives (its linearisation point; for
//! a cached write, the moment it is acknowledged). A queued request is sent to the child only
//! when no *earlier* unfinished request conflicts with it ([`conflicts`]), so conflicting
//! requests reach the child in arrival order and never overlap in flight. Aggregation only ever
//! appends a strictly contiguous write to the *last* queued request, so it cannot move a write
//! past anything (the GlusterFS #884 corruption was a collapse that let an older write land on
//! top of a newer overlapping one).
//!
//! ```
//! use xlator_api::Buf;
//! use xlfs_write_behind::window::{Admit, Limits, Window};
//!
//! let limits = Limits { window: 1 << 20, aggregate: 128 << 10, trickle: false };
//! let mut w = Window::<u8>::new();
//! let mut ticket = None;
//! for i in 0..4u64 {
//!     let r = w.admit(&mut ticket, &limits, 0, i * 4096, Buf::zeroed(4096), false);
//!     assert!(matches!(r, Admit::Acked(_)));
//! }
//! assert!(w.dispatch(&limits).sends.is_empty()); // still growing, nothing forces it out
//! w.request_flush();
//! let out = w.dispatch(&limits);
//! assert_eq!(out.sends.len(), 1);
//! assert_eq!(out.sends[0].data.len(), 4 * 4096); // one aggregated write
//! ```

use std::collections::VecDeque;

use xlator_api::{Buf, Errno};

/// Arrival order of requests on one file.
pub type Seq = u64;

/// A byte range `[start, end)`; `end == u64::MAX` reaches past any end of file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub end: u64,
}

impl Span {
    /// The whole file, size included.
    pub const ALL: Span = Span {
        start: 0,
        end: u64::MAX,
    };

    /// `len` bytes at `start` (saturating at the end of the offset space).
    pub fn at(start: u64, len: u64) -> Span {
        Span {
            start,
            end: start.saturating_add(len),
        }
    }

    /// From `start` to past the end of file: what a read at `start` depends on, since a write
    /// anywhere past `start` moves the end of file the read sees.
    pub fn from(start: u64) -> Span {
        Span {
            start,
            end: u64::MAX,
        }
    }

    pub fn overlaps(&self, other: &Span) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// What a request owned by a waiting fop does, for ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads data or attributes (readv, seek, stat, link): waits for earlier overlapping
    /// writes and holds back later ones until it has its answer.
    Observe,
    /// Changes data or size other than by writing (truncate, setattr, fallocate, discard,
    /// zerofill, open with O_TRUNC): ordered against everything overlapping.
    Modify,
    /// A write its caller sends itself (O_SYNC, O_DSYNC, strict O_DIRECT): waits for every
    /// earlier write of the file, overlapping or not, and for overlapping requests.
    WriteThrough,
    /// A deferred flush (flush-behind): waits for earlier writes, holds back nothing.
    Flush,
}

/// Ordering classes of [`conflicts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Write,
    Observe,
    Modify,
    Sync,
}

/// The limits in force; passed to each call so a reconfigure applies at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of acknowledged, unfinished writes a file may hold.
    pub window: u64,
    /// Largest write built by aggregating contiguous writes.
    pub aggregate: u64,
    /// Send a write at once when nothing of the file is in flight.
    pub trickle: bool,
}

/// Who issued a cached write; contiguous writes aggregate only between mergeable origins.
pub trait Origin {
    fn can_merge(&self, other: &Self) -> bool;
}

impl Origin for u8 {
    fn can_merge(&self, other: &Self) -> bool {
        self == other
    }
}

/// An acknowledged write not yet finished at the child.
struct Cached<O> {
    origin: O,
    /// Where the (first) write goes; for an append, only what the caller said.
    offset: u64,
    /// The buffers of the aggregated writes, in offset order; emptied once sent.
    parts: Vec<Buf>,
    len: u64,
    /// O_APPEND: the offset is decided by the child; never aggregated, conflicts with all.
    append: bool,
}

enum Kind<O> {
    Cached(Cached<O>),
    Owned(Access),
}

struct Req<O> {
    seq: Seq,
    span: Span,
    kind: Kind<O>,
    /// Sent to the child (cached writes) or granted to its owner (owned requests).
    sent: bool,
}

impl<O> Req<O> {
    fn class(&self) -> Class {
        match self.kind {
            Kind::Cached(_) | Kind::Owned(Access::WriteThrough) => Class::Write,
            Kind::Owned(Access::Observe) => Class::Observe,
            Kind::Owned(Access::Modify) => Class::Modify,
            Kind::Owned(Access::Flush) => Class::Sync,
        }
    }

    fn is_write(&self) -> bool {
        self.class() == Class::Write
    }
}

/// Whether `later` must wait until `earlier` has finished.
///
/// | earlier \ later | write | observe | modify | flush |
/// |---|---|---|---|---|
/// | write   | yes | yes | yes | yes |
/// | observe | yes | no  | yes | no  |
/// | modify  | yes | yes | yes | yes |
/// | flush   | no  | no  | no  | no  |
///
/// "yes" applies when the spans overlap; a write-through waits for every earlier write.
fn conflicts<O>(earlier: &Req<O>, later: &Req<O>) -> bool {
    if matches!(later.kind, Kind::Owned(Access::WriteThrough)) && earlier.is_write() {
        return true;
    }
    if !earlier.span.overlaps(&later.span) {
        return false;
    }
    !matches!(
        (earlier.class(), later.class()),
        (Class::Sync, _) | (Class::Observe, Class::Observe) | (Class::Observe, Class::Sync)
    )
}

/// The answer to [`Window::admit`].
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Acknowledged: the write is cached under this sequence number.
    Acked(Seq),
    /// The window is full or earlier writers wait: try again after a change.
    Wait,
    /// An earlier background write failed; the write is refused with its errno.
    Failed(Errno),
}

/// A cached write to send to the child now.
#[derive(Debug)]
pub struct Send<O> {
    pub seq: Seq,
    pub origin: O,
    pub offset: u64,
    /// The data: the write's own buffer, or one buffer built from the aggregated writes.
    pub data: Buf,
    pub append: bool,
}

/// What [`Window::dispatch`] decided.
#[derive(Debug)]
pub struct Dispatch<O> {
    /// Cached writes to send.
    pub sends: Vec<Send<O>>,
    /// Whether an owned request was granted (its owner must be woken).
    pub granted: bool,
    /// Whether a cached write was left to grow (the caller bounds how long: `aggregate-wait`).
    pub holding: bool,
}

/// Counters for statedumps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    pub requests: usize,
    pub in_flight: usize,
    pub cached_bytes: u64,
    pub waiting_writers: usize,
    pub error: Option<Errno>,
}

/// One file's write-behind state.
pub struct Window<O> {
    next_seq: Seq,
    /// Unfinished requests in sequence order (sent or not).
    reqs: VecDeque<Req<O>>,
    /// Bytes of cached (acknowledged, unfinished) writes.
    used: u64,
    /// Cached writes with a smaller sequence number must go now instead of waiting to grow.
    flush_upto: Seq,
    /// The first failure of a background write, until reported.
    error: Option<Errno>,
    /// Writers waiting for window space, first come first served.
    tickets: VecDeque<u64>,
    next_ticket: u64,
}

impl<O> Default for Window<O> {
    fn default() -> Self {
        Window::new()
    }
}

impl<O> Window<O> {
    pub fn new() -> Window<O> {
        Window {
            next_seq: 0,
            reqs: VecDeque::new(),
            used: 0,
            flush_upto: 0,
            error: None,
            tickets: VecDeque::new(),
            next_ticket: 0,
        }
    }

    fn bump(&mut self) -> Seq {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// The recorded failure of a background write, left in place.
    pub fn error(&self) -> Option<Errno> {
        self.error
    }

    /// The recorded failure, cleared: it has been reported.
    pub fn take_error(&mut self) -> Option<Errno> {
        self.error.take()
    }

    /// Records the failure of a background write (the first one is kept until reported).
    pub fn record_error(&mut self, e: Errno) {
        self.error.get_or_insert(e);
    }

    /// Nothing cached, queued, in flight, waiting or unreported: the state can be dropped.
    pub fn is_idle(&self) -> bool {
        self.reqs.is_empty() && self.error.is_none() && self.tickets.is_empty() && self.used == 0
    }

    /// Whether any write (cached or write-through) is unfinished.
    pub fn has_writes(&self) -> bool {
        self.reqs.iter().any(Req::is_write)
    }

    /// Whether any request at all is unfinished.
    pub fn is_busy(&self) -> bool {
        !self.reqs.is_empty()
    }

    pub fn stats(&self) -> WindowStats {
        WindowStats {
            requests: self.reqs.len(),
            in_flight: self.reqs.iter().filter(|r| r.sent).count(),
            cached_bytes: self.used,
            waiting_writers: self.tickets.len(),
            error: self.error,
        }
    }

    /// Makes every request queued so far go as soon as it may (no more waiting to grow).
    pub fn request_flush(&mut self) {
        self.flush_upto = self.next_seq;
    }

    /// Starts a one-sided barrier: returns the sequence number below which every request must
    /// finish ([`Window::done_upto`]) and makes the cached writes among them go now.
    pub fn barrier(&mut self) -> Seq {
        self.request_flush();
        self.next_seq
    }

    /// Whether every request that arrived before `upto` has finished.
    pub fn done_upto(&self, upto: Seq) -> bool {
        self.reqs.front().is_none_or(|r| r.seq >= upto)
    }

    /// Queues a request its caller will send itself once [`Window::is_granted`]; earlier
    /// cached writes are made to go now.
    pub fn enqueue(&mut self, access: Access, span: Span) -> Seq {
        let seq = self.bump();
        self.flush_upto = self.next_seq;
        self.reqs.push_back(Req {
            seq,
            span,
            kind: Kind::Owned(access),
            sent: false,
        });
        seq
    }

    /// Whether owned request `seq` may be sent (a finished or unknown request counts as
    /// granted, so a waiter can never hang on it).
    pub fn is_granted(&self, seq: Seq) -> bool {
        self.reqs
            .iter()
            .find(|r| r.seq == seq)
            .is_none_or(|r| r.sent)
    }

    /// Removes request `seq` (its reply arrived, or its owner gave up); frees its window bytes.
    pub fn complete(&mut self, seq: Seq) {
        if let Some(pos) = self.reqs.iter().position(|r| r.seq == seq)
            && let Some(req) = self.reqs.remove(pos)
            && let Kind::Cached(c) = req.kind
        {
            self.used = self.used.saturating_sub(c.len);
        }
    }

    /// Gives up a place in the window queue (the writer went away).
    pub fn cancel_ticket(&mut self, ticket: u64) {
        self.tickets.retain(|t| *t != ticket);
    }

    fn fits(&self, len: u64, limits: &Limits) -> bool {
        self.used == 0 || self.used.saturating_add(len) <= limits.window
    }
}

impl<O: Origin> Window<O> {
    /// Tries to acknowledge a write of `data` at `offset`. A full window (or earlier writers
    /// still waiting for space, served in order) answers [`Admit::Wait`] and hands out a
    /// ticket in `ticket`: call again with the same ticket after a change, or give it back with
    /// [`Window::cancel_ticket`]. A write larger than the window is taken when the window is
    /// empty.
    pub fn admit(
        &mut self,
        ticket: &mut Option<u64>,
        limits: &Limits,
        origin: O,
        offset: u64,
        data: Buf,
        append: bool,
    ) -> Admit {
        if let Some(e) = self.error {
            if let Some(t) = ticket.take() {
                self.cancel_ticket(t);
            }
            return Admit::Failed(e);
        }
        let len = data.len() as u64;
        let my_turn = match *ticket {
            None => self.tickets.is_empty(),
            Some(t) => self.tickets.front() == Some(&t),
        };
        if !my_turn || !self.fits(len, limits) {
            if ticket.is_none() {
                let t = self.next_ticket;
                self.next_ticket += 1;
                self.tickets.push_back(t);
                *ticket = Some(t);
            }
            // Drain: the space comes back only when cached writes finish.
            self.request_flush();
            return Admit::Wait;
        }
        if ticket.take().is_some() {
            self.tickets.pop_front();
        }
        self.used += len;
        if !append
            && let Some(last) = self.reqs.back_mut()
            && !last.sent
            && let Kind::Cached(c) = &mut last.kind
            && !c.append
            && last.span.end == offset
            && c.len + len <= limits.aggregate
            && c.origin.can_merge(&origin)
        {
            c.parts.push(data);
            c.len += len;
            last.span.end = offset + len;
            return Admit::Acked(last.seq);
        }
        let seq = self.bump();
        let span = if append {
            Span::ALL
        } else {
            Span::at(offset, len)
        };
        let cached = Cached {
            origin,
            offset,
            parts: vec![data],
            len,
            append,
        };
        self.reqs.push_back(Req {
            seq,
            span,
            kind: Kind::Cached(cached),
            sent: false,
        });
        Admit::Acked(seq)
    }
}

impl<O: Clone> Window<O> {
    /// Decides what goes to the child now: every queued request with no earlier conflicting
    /// unfinished request, except a cached write that may still grow (the last request, not
    /// an append, not full, not asked to flush, and either trickling is off or a write of this
    /// file is in flight).
    pub fn dispatch(&mut self, limits: &Limits) -> Dispatch<O> {
        let mut out = Dispatch {
            sends: Vec::new(),
            granted: false,
            holding: false,
        };
        let mut in_transit = self.reqs.iter().any(|r| r.sent && r.is_write());
        let flush_upto = self.flush_upto;
        let reqs = self.reqs.make_contiguous();
        let n = reqs.len();
        for i in 0..n {
            if reqs[i].sent {
                continue;
            }
            let (earlier, rest) = reqs.split_at_mut(i);
            let req = &mut rest[0];
            if earlier.iter().any(|e| conflicts(e, req)) {
                continue;
            }
            match &mut req.kind {
                Kind::Owned(_) => {
                    req.sent = true;
                    out.granted = true;
                }
                Kind::Cached(c) => {
                    let grows = i + 1 == n
                        && !c.append
                        && c.len < limits.aggregate
                        && req.seq >= flush_upto
                        && (!limits.trickle || in_transit);
                    if grows {
                        out.holding = true;
                        continue;
                    }
                    req.sent = true;
                    in_transit = true;
                    let parts = std::mem::take(&mut c.parts);
                    let data = match parts.as_slice() {
                        [one] => one.clone(),
                        many => Buf::concat(many),
                    };
                    out.sends.push(Send {
                        seq: req.seq,
                        origin: c.origin.clone(),
                        offset: c.offset,
                        data,
                        append: c.append,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        window: 64 << 10,
        aggregate: 16 << 10,
        trickle: false,
    };

    fn buf(len: usize, fill: u8) -> Buf {
        Buf::from_vec(vec![fill; len])
    }

    fn acked(r: Admit) -> Seq {
        match r {
            Admit::Acked(s) => s,
            other => panic!("expected an ack, got {other:?}"),
        }
    }

    fn write(w: &mut Window<u8>, origin: u8, off: u64, len: usize) -> Seq {
        acked(w.admit(&mut None, &L, origin, off, buf(len, origin), false))
    }

    fn sent(d: &Dispatch<u8>) -> Vec<(u64, usize)> {
        d.sends.iter().map(|s| (s.offset, s.data.len())).collect()
    }

    #[test]
    fn contiguous_writes_aggregate_up_to_the_limit() {
        let mut w = Window::new();
        for i in 0..6 {
            write(&mut w, 1, i * 4096, 4096);
        }
        // The first four filled 16 KiB: that request is full and no longer the last one.
        let d = w.dispatch(&L);
        assert_eq!(sent(&d), vec![(0, 16384)]);
        assert_eq!(d.sends[0].data.as_slice(), &[1u8; 16384][..]);
        w.request_flush();
        assert_eq!(sent(&w.dispatch(&L)), vec![(16384, 8192)]);
    }

    #[test]
    fn aggregation_needs_contiguity_and_the_same_origin() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 100);
        assert_eq!(write(&mut w, 1, 100, 100), a, "contiguous: merged");
        let b = write(&mut w, 2, 200, 100);
        assert_ne!(b, a, "another origin: not merged");
        let c = write(&mut w, 2, 400, 100);
        assert_ne!(c, b, "a gap: not merged");
        let d = write(&mut w, 2, 450, 100);
        assert_ne!(d, c, "an overlap: never merged");
        w.request_flush();
        let out = w.dispatch(&L);
        // The overlapping write waits for the one it overlaps.
        assert_eq!(sent(&out), vec![(0, 200), (200, 100), (400, 100)]);
        w.complete(c);
        assert_eq!(sent(&w.dispatch(&L)), vec![(450, 100)]);
    }

    #[test]
    fn a_single_part_is_sent_without_copying() {
        let mut w = Window::new();
        let data = buf(4096, 3);
        w.admit(&mut None, &L, 3, 0, data.clone(), false);
        w.request_flush();
        let out = w.dispatch(&L);
        assert!(out.sends[0].data.shares_storage_with(&data));
    }

    #[test]
    fn trickling_sends_a_lone_write_and_holds_the_next_while_one_is_in_flight() {
        let t = Limits { trickle: true, ..L };
        let mut w = Window::new();
        let a = acked(w.admit(&mut None, &t, 1, 0, buf(10, 1), false));
        assert_eq!(sent(&w.dispatch(&t)), vec![(0, 10)]);
        acked(w.admit(&mut None, &t, 1, 10, buf(10, 1), false));
        acked(w.admit(&mut None, &t, 1, 20, buf(10, 1), false));
        assert!(
            w.dispatch(&t).sends.is_empty(),
            "grows while the first is in flight"
        );
        w.complete(a);
        assert_eq!(sent(&w.dispatch(&t)), vec![(10, 20)]);
    }

    #[test]
    fn overlapping_writes_never_overtake() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 4096);
        w.request_flush();
        assert_eq!(sent(&w.dispatch(&L)), vec![(0, 4096)]);
        let b = write(&mut w, 2, 2048, 4096);
        let c = write(&mut w, 3, 8192, 10);
        w.request_flush();
        assert_eq!(
            sent(&w.dispatch(&L)),
            vec![(8192, 10)],
            "only the disjoint write goes"
        );
        w.complete(a);
        assert_eq!(sent(&w.dispatch(&L)), vec![(2048, 4096)]);
        w.complete(b);
        w.complete(c);
        assert!(w.is_idle());
    }

    #[test]
    fn observers_wait_for_earlier_writes_and_hold_back_later_ones() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 100, 10);
        let r = w.enqueue(Access::Observe, Span::from(0));
        assert!(!w.is_granted(r));
        let d = w.dispatch(&L);
        assert_eq!(sent(&d), vec![(100, 10)], "the read made the write go");
        assert!(!d.granted);
        let b = write(&mut w, 1, 0, 10);
        w.complete(a);
        let d = w.dispatch(&L);
        assert!(d.granted && w.is_granted(r));
        w.request_flush();
        assert!(
            w.dispatch(&L).sends.is_empty(),
            "the later write waits for the read"
        );
        w.complete(r);
        assert_eq!(sent(&w.dispatch(&L)), vec![(0, 10)]);
        w.complete(b);
        assert!(w.is_idle());
    }

    #[test]
    fn reads_depend_on_writes_extending_the_file_past_them() {
        let mut w = Window::new();
        write(&mut w, 1, 0, 10);
        let r = w.enqueue(Access::Observe, Span::from(50));
        w.dispatch(&L);
        assert!(
            w.is_granted(r),
            "a write ending before the read does not change it"
        );
        let mut w = Window::new();
        write(&mut w, 1, 1000, 10);
        let r = w.enqueue(Access::Observe, Span::from(50));
        w.dispatch(&L);
        assert!(
            !w.is_granted(r),
            "a write past the read moves the end of file it sees"
        );
    }

    #[test]
    fn observers_do_not_wait_for_each_other() {
        let mut w = Window::<u8>::new();
        let a = w.enqueue(Access::Observe, Span::ALL);
        let b = w.enqueue(Access::Observe, Span::ALL);
        w.dispatch(&L);
        assert!(w.is_granted(a) && w.is_granted(b));
        let c = w.enqueue(Access::Modify, Span::ALL);
        w.dispatch(&L);
        assert!(!w.is_granted(c));
    }

    #[test]
    fn write_through_waits_for_all_earlier_writes_even_disjoint() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 10);
        let s = w.enqueue(Access::WriteThrough, Span::at(1 << 20, 10));
        let d = w.dispatch(&L);
        assert_eq!(sent(&d), vec![(0, 10)]);
        assert!(!w.is_granted(s));
        // A later disjoint cached write is not held back by it...
        write(&mut w, 1, 5000, 10);
        w.request_flush();
        assert_eq!(sent(&w.dispatch(&L)), vec![(5000, 10)]);
        w.complete(a);
        w.dispatch(&L);
        assert!(w.is_granted(s));
        // ...but an overlapping one is.
        write(&mut w, 1, 1 << 20, 10);
        w.request_flush();
        assert!(w.dispatch(&L).sends.is_empty());
    }

    #[test]
    fn deferred_flush_waits_for_writes_but_holds_nothing_back() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 10);
        let f = w.enqueue(Access::Flush, Span::ALL);
        w.dispatch(&L);
        assert!(!w.is_granted(f));
        write(&mut w, 1, 0, 10);
        w.request_flush();
        w.complete(a);
        let d = w.dispatch(&L);
        assert!(w.is_granted(f));
        assert_eq!(
            sent(&d),
            vec![(0, 10)],
            "the later write goes with the flush pending"
        );
    }

    #[test]
    fn a_lone_append_is_never_held_to_grow() {
        // Without trickling, a lone write waits to grow; an append never grows, so holding it
        // would only keep it from the other clients.
        let mut w = Window::new();
        acked(w.admit(&mut None, &L, 1, 0, buf(10, 1), true));
        let d = w.dispatch(&L);
        assert_eq!(d.sends.len(), 1);
        assert!(d.sends[0].append && !d.holding);
        let mut w = Window::new();
        acked(w.admit(&mut None, &L, 1, 0, buf(10, 1), false));
        let d = w.dispatch(&L);
        assert!(d.sends.is_empty() && d.holding, "a plain write is held");
    }

    #[test]
    fn append_writes_conflict_with_everything_and_never_merge() {
        let mut w = Window::new();
        let a = acked(w.admit(&mut None, &L, 1, 0, buf(10, 1), true));
        let b = acked(w.admit(&mut None, &L, 1, 10, buf(10, 1), false));
        assert_ne!(a, b);
        let c = acked(w.admit(&mut None, &L, 1, 1 << 30, buf(10, 1), true));
        w.request_flush();
        let d = w.dispatch(&L);
        assert_eq!(d.sends.len(), 1);
        assert!(d.sends[0].append);
        w.complete(a);
        assert_eq!(sent(&w.dispatch(&L)), vec![(10, 10)]);
        w.complete(b);
        let d = w.dispatch(&L);
        assert_eq!(d.sends.len(), 1);
        assert_eq!(d.sends[0].seq, c);
    }

    #[test]
    fn full_window_makes_writers_wait_in_order_and_drains() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 60 << 10);
        let mut t1 = None;
        assert_eq!(
            w.admit(&mut t1, &L, 1, 1 << 20, buf(8 << 10, 1), false),
            Admit::Wait
        );
        assert!(t1.is_some());
        // A small write that would fit still queues behind the waiting one.
        let mut t2 = None;
        assert_eq!(
            w.admit(&mut t2, &L, 1, 2 << 20, buf(1, 1), false),
            Admit::Wait
        );
        // Waiting made the cached write go even though it could have grown.
        assert_eq!(sent(&w.dispatch(&L)), vec![(0, 60 << 10)]);
        assert_eq!(
            w.admit(&mut t2, &L, 1, 2 << 20, buf(1, 1), false),
            Admit::Wait
        );
        w.complete(a);
        acked(w.admit(&mut t1, &L, 1, 1 << 20, buf(8 << 10, 1), false));
        acked(w.admit(&mut t2, &L, 1, 2 << 20, buf(1, 1), false));
        assert_eq!(w.stats().cached_bytes, (8 << 10) + 1);
        assert_eq!(w.stats().waiting_writers, 0);
    }

    #[test]
    fn a_write_larger_than_the_window_is_taken_when_empty() {
        let mut w = Window::new();
        let s = acked(w.admit(&mut None, &L, 1, 0, buf(1 << 20, 1), false));
        assert_eq!(
            w.admit(&mut None, &L, 1, 1 << 20, buf(1, 1), false),
            Admit::Wait
        );
        w.complete(s);
    }

    #[test]
    fn cancelled_tickets_do_not_block_others() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 64 << 10);
        let mut t1 = None;
        assert_eq!(w.admit(&mut t1, &L, 1, 0, buf(10, 1), false), Admit::Wait);
        let mut t2 = None;
        assert_eq!(w.admit(&mut t2, &L, 1, 0, buf(10, 1), false), Admit::Wait);
        w.complete(a);
        if let Some(t) = t1 {
            w.cancel_ticket(t);
        }
        acked(w.admit(&mut t2, &L, 1, 0, buf(10, 1), false));
    }

    #[test]
    fn errors_fail_later_writes_until_taken() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 10);
        w.record_error(Errno::ENOSPC);
        w.record_error(Errno::EIO);
        w.complete(a);
        assert!(!w.is_idle());
        assert_eq!(
            w.admit(&mut None, &L, 1, 0, buf(1, 1), false),
            Admit::Failed(Errno::ENOSPC)
        );
        assert_eq!(w.take_error(), Some(Errno::ENOSPC));
        assert!(w.is_idle());
        write(&mut w, 1, 0, 1);
    }

    #[test]
    fn barriers_cover_exactly_the_earlier_requests() {
        let mut w = Window::new();
        let a = write(&mut w, 1, 0, 10);
        let upto = w.barrier();
        let b = write(&mut w, 1, 100, 10);
        assert_ne!(a, b);
        assert!(!w.done_upto(upto));
        let d = w.dispatch(&L);
        assert_eq!(
            sent(&d),
            vec![(0, 10)],
            "the barrier flushes only what came before it"
        );
        w.complete(a);
        assert!(w.done_upto(upto));
    }

    #[test]
    fn completing_unknown_or_cancelled_requests_is_harmless() {
        let mut w = Window::<u8>::new();
        let r = w.enqueue(Access::Modify, Span::ALL);
        w.complete(r);
        w.complete(r);
        w.complete(99);
        assert!(w.is_granted(r));
        assert!(w.is_idle());
    }
}
