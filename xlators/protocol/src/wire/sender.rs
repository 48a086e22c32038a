//! The write side of a connection, shared by the tasks that send on it.
//!
//! A sender that finds the socket idle writes its frame itself, right away: a small call or
//! reply then costs one system call and no task switch (on a 2-core machine each wakeup of a
//! writer task cost about as much as the whole translator stack). When the socket is busy the
//! frame queues for the writer task, which gathers queued frames into vectored writes.
//!
//! Frames go out in the order they were handed over: a direct write happens only when no
//! frame waits in the queue (a cancel or an undo queued by `try_queue` must reach the peer
//! before anything sent after it, or a later call could overtake the cancel of a lock wait).
//!
//! Frames never interleave (one lock guards the socket). A direct write whose future is
//! dropped half-way would leave a partial frame on the stream, so the socket is then shut and
//! everything after fails: the peer sees a truncated frame, never a corrupt one.
//!
//! With a send deadline ([`FrameSender::with_deadline`], the server's `send-timeout`), a write
//! (one frame, or one batch of at most `COALESCE_BYTES`) that has not finished within it is
//! abandoned the same way: the socket is shut, and [`FrameSender::broken`] tells whoever
//! serves the connection, so a peer that stopped reading cannot hold a task, its queue and
//! whatever the connection holds (a brick client's fds and locks) forever.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncWrite;
use tokio::sync::{Mutex, OwnedSemaphorePermit, mpsc, watch};

use super::frame::{OutFrame, PipeSink, write_frames};

/// Frames and bytes the writer task gathers into one vectored write.
const COALESCE_FRAMES: usize = 256;
const COALESCE_BYTES: usize = 4 << 20;

/// What a queued frame keeps until it is written (see [`FrameSender::send_holding`]).
pub type Hold = Option<OwnedSemaphorePermit>;

/// Why a frame was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The sender was closed (connection ending) or an earlier write failed.
    Closed,
    /// Writing this frame failed; the socket is now closed.
    Io(String),
    /// The peer did not take the frame within the send deadline; the socket is now closed.
    TimedOut(std::time::Duration),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Closed => write!(f, "the connection is closed"),
            SendError::Io(e) => write!(f, "{e}"),
            SendError::TimedOut(d) => write!(
                f,
                "the peer took none of the data for {d:?} (it stopped reading)"
            ),
        }
    }
}

/// See the module documentation.
pub struct FrameSender<W> {
    /// `None` once closed or broken (dropping the write half shuts the socket's write side).
    sock: Mutex<Option<W>>,
    queue: mpsc::Sender<(OutFrame, Hold)>,
    /// Frames queued and not written yet (see the module doc on order).
    queued: AtomicUsize,
    /// Set by `close`: a write blocked on a peer that stopped reading gives up.
    closing: watch::Sender<bool>,
    /// The longest one write may take (`None`: no limit).
    deadline: Option<std::time::Duration>,
    /// Why the socket broke (a failed or timed-out write), once it has.
    broken: watch::Sender<Option<SendError>>,
}

impl<W: AsyncWrite + PipeSink + Unpin + Send + 'static> FrameSender<W> {
    /// A sender over `w` and its writer task (spawned on the current runtime; it ends when
    /// the sender is closed or dropped). `queue` bounds the frames waiting for the task;
    /// senders wait when it is full.
    pub fn start(w: W, queue: usize) -> Arc<FrameSender<W>> {
        Self::with_deadline(w, queue, None)
    }

    /// [`start`](Self::start) with a send deadline: a write that does not finish within
    /// `deadline` shuts the socket (see the module documentation).
    pub fn with_deadline(
        w: W,
        queue: usize,
        deadline: Option<std::time::Duration>,
    ) -> Arc<FrameSender<W>> {
        let (tx, rx) = mpsc::channel(queue);
        let sender = Arc::new(FrameSender {
            sock: Mutex::new(Some(w)),
            queue: tx,
            queued: AtomicUsize::new(0),
            closing: watch::channel(false).0,
            deadline,
            broken: watch::channel(None).0,
        });
        tokio::spawn(write_queued(Arc::downgrade(&sender), rx));
        sender
    }

    /// Sends `frame`: written now if the socket is idle, else queued for the writer task.
    pub async fn send(&self, frame: OutFrame) -> Result<(), SendError> {
        self.send_holding(frame, None).await
    }

    /// [`send`](Self::send), keeping `hold` until the frame is written (or dropped with the
    /// connection): the server's reservation of reply bytes (`max-reply-bytes-per-connection`)
    /// lasts while the reply waits in the queue.
    pub async fn send_holding(&self, frame: OutFrame, hold: Hold) -> Result<(), SendError> {
        if let Ok(mut sock) = self.sock.try_lock()
            && self.queued.load(Ordering::Acquire) == 0
        {
            let r = self
                .unless_closing(write_now(
                    &mut sock,
                    std::slice::from_ref(&frame),
                    self.deadline,
                ))
                .await
                .inspect_err(|e| self.broke(e));
            drop(hold);
            return r;
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.queue.send((frame, hold)).await.map_err(|_| {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            SendError::Closed
        })
    }

    /// Runs a write, abandoning it (which shuts the socket) once `close` is called.
    async fn unless_closing(
        &self,
        write: impl Future<Output = Result<(), SendError>>,
    ) -> Result<(), SendError> {
        let mut closing = self.closing.subscribe();
        tokio::select! {
            r = write => r,
            _ = closing.wait_for(|c| *c) => Err(SendError::Closed),
        }
    }

    /// Records why the socket broke (the first failed or timed-out write).
    fn broke(&self, e: &SendError) {
        if matches!(e, SendError::Io(_) | SendError::TimedOut(_)) {
            self.broken.send_if_modified(|b| {
                if b.is_none() {
                    *b = Some(e.clone());
                    true
                } else {
                    false
                }
            });
        }
    }

    /// Resolves when a write has failed or missed the deadline (the socket is shut), with
    /// why; never if that does not happen.
    pub async fn broken(&self) -> SendError {
        let mut rx = self.broken.subscribe();
        let why = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|b| b.clone());
        match why {
            Some(e) => e,
            // The sender itself is gone (it owns the watch): cannot happen while `self` lives.
            None => std::future::pending().await,
        }
    }

    /// Queues `frame` without waiting (for pings: a full queue means traffic is flowing).
    pub fn try_queue(&self, frame: OutFrame) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.queue.try_send((frame, None)).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Closes the socket (a write in progress is abandoned, cutting its frame short: the
    /// peer sees a truncated frame and drops it); later sends fail.
    pub async fn close(&self) {
        self.closing.send_replace(true);
        self.sock.lock().await.take();
    }
}

/// Writes `frames` on the socket in `sock`, closing it on error, if dropped half-way, or if
/// it takes longer than `deadline`.
async fn write_now<W: AsyncWrite + PipeSink + Unpin>(
    sock: &mut Option<W>,
    frames: &[OutFrame],
    deadline: Option<std::time::Duration>,
) -> Result<(), SendError> {
    match deadline {
        None => write_unbounded(sock, frames).await,
        // The timer is only set up if the write does not finish at its first poll.
        Some(d) => match tokio::time::timeout(d, write_unbounded(sock, frames)).await {
            Ok(r) => r,
            // The write was dropped half-way: its guard shut the socket.
            Err(_) => Err(SendError::TimedOut(d)),
        },
    }
}

async fn write_unbounded<W: AsyncWrite + PipeSink + Unpin>(
    sock: &mut Option<W>,
    frames: &[OutFrame],
) -> Result<(), SendError> {
    struct ShutUnlessDone<'a, W> {
        sock: &'a mut Option<W>,
        done: bool,
    }
    impl<W> Drop for ShutUnlessDone<'_, W> {
        fn drop(&mut self) {
            if !self.done {
                self.sock.take();
            }
        }
    }
    let guard = ShutUnlessDone { sock, done: false };
    let mut guard = guard;
    let Some(w) = guard.sock.as_mut() else {
        guard.done = true;
        return Err(SendError::Closed);
    };
    let r = write_frames(w, frames).await;
    guard.done = r.is_ok();
    r.map_err(|e| SendError::Io(e.to_string()))
}

/// The writer task: drains the queue in batches while the sender lives and the socket is up.
async fn write_queued<W: AsyncWrite + PipeSink + Unpin + Send + 'static>(
    sender: std::sync::Weak<FrameSender<W>>,
    mut rx: mpsc::Receiver<(OutFrame, Hold)>,
) {
    let mut batch: Vec<OutFrame> = Vec::new();
    let mut holds: Vec<OwnedSemaphorePermit> = Vec::new();
    while let Some((first, hold)) = rx.recv().await {
        let mut bytes = first.len();
        batch.push(first);
        holds.extend(hold);
        while batch.len() < COALESCE_FRAMES && bytes < COALESCE_BYTES {
            match rx.try_recv() {
                Ok((f, hold)) => {
                    bytes += f.len();
                    batch.push(f);
                    holds.extend(hold);
                }
                Err(_) => break,
            }
        }
        let Some(sender) = sender.upgrade() else {
            return;
        };
        let mut sock = sender.sock.lock().await;
        let r = sender
            .unless_closing(write_now(&mut sock, &batch, sender.deadline))
            .await
            .inspect_err(|e| sender.broke(e));
        // Still under the socket's lock: a direct sender that takes it next sees the count
        // these frames leave.
        sender.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        drop(sock);
        batch.clear();
        holds.clear();
        if r.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A raw frame: length prefix, then `len` bytes of `tag`.
    fn frame(tag: u8, len: usize) -> OutFrame {
        let mut head = u32::try_from(len).expect("small").to_be_bytes().to_vec();
        head.extend(std::iter::repeat_n(tag, len));
        OutFrame {
            head,
            payload: Vec::new(),
        }
    }

    /// A frame queued while the socket was busy goes out before one sent after it, even if
    /// the later sender finds the socket idle first (a lock wait's cancel, queued, must not
    /// be overtaken by the caller's next call).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_frame_is_never_overtaken_by_a_later_send() {
        for _ in 0..50 {
            let (a, mut b) = tokio::io::duplex(1 << 16);
            let sender = FrameSender::start(a, 8);
            {
                // Busy: the writer task will have to wait for the socket.
                let _busy = sender.sock.lock().await;
                sender.try_queue(frame(1, 10));
            }
            sender.send(frame(2, 10)).await.expect("send");
            let mut tags = Vec::new();
            for _ in 0..2 {
                let len = b.read_u32().await.expect("length") as usize;
                let mut body = vec![0; len];
                b.read_exact(&mut body).await.expect("body");
                tags.push(body[0]);
            }
            assert_eq!(tags, [1, 2], "the queued frame first");
        }
    }

    /// Many concurrent senders (direct and queued) never interleave frames.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sends_keep_frames_whole() {
        let (a, mut b) = tokio::io::duplex(4096);
        let sender = FrameSender::start(a, 8);
        let mut tasks = Vec::new();
        for t in 0..16u8 {
            let s = sender.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    s.send(frame(t, 1000 + usize::from(t))).await.expect("send");
                }
            }));
        }
        let reader = tokio::spawn(async move {
            let mut counts = [0usize; 16];
            for _ in 0..16 * 20 {
                let len = b.read_u32().await.expect("length") as usize;
                let mut body = vec![0; len];
                b.read_exact(&mut body).await.expect("body");
                let tag = body[0];
                assert_eq!(len, 1000 + usize::from(tag), "interleaved frame");
                assert!(body.iter().all(|&x| x == tag), "interleaved frame");
                counts[usize::from(tag)] += 1;
            }
            counts
        });
        for t in tasks {
            t.await.expect("sender task");
        }
        assert_eq!(reader.await.expect("reader"), [20; 16]);
    }

    /// A peer that stops reading: the write that cannot finish within the deadline shuts
    /// the socket, later sends fail at once, and `broken` says why.
    #[tokio::test]
    async fn a_write_past_the_deadline_shuts_the_socket() {
        let (a, mut b) = tokio::io::duplex(64);
        let d = std::time::Duration::from_millis(200);
        let sender = FrameSender::with_deadline(a, 8, Some(d));
        let r = sender.send(frame(3, 10_000)).await;
        assert_eq!(r, Err(SendError::TimedOut(d)));
        assert_eq!(
            tokio::time::timeout(std::time::Duration::from_secs(10), sender.broken())
                .await
                .expect("broken"),
            SendError::TimedOut(d)
        );
        assert_eq!(sender.send(frame(4, 10)).await, Err(SendError::Closed));
        let mut all = Vec::new();
        b.read_to_end(&mut all).await.expect("read");
        assert!(all.len() < 10_000, "only the cut frame's start arrived");
    }

    /// A queued frame's write is bounded too: senders waiting behind it are released.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_write_past_the_deadline_breaks_the_sender() {
        let (a, _b) = tokio::io::duplex(64);
        let d = std::time::Duration::from_millis(200);
        let sender = FrameSender::with_deadline(a, 2, Some(d));
        {
            // Busy: these queue for the writer task, which then cannot finish them.
            let _busy = sender.sock.lock().await;
            sender.try_queue(frame(1, 10_000));
        }
        let why = tokio::time::timeout(std::time::Duration::from_secs(10), sender.broken())
            .await
            .expect("broken");
        assert_eq!(why, SendError::TimedOut(d));
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            for _ in 0..10 {
                if sender.send(frame(2, 10)).await.is_err() {
                    return true;
                }
            }
            false
        })
        .await
        .expect("sends do not hang");
        assert!(r, "sends fail once the socket broke");
    }

    /// After close, sends fail and the peer sees the end of the stream.
    #[tokio::test]
    async fn close_ends_the_stream() {
        let (a, mut b) = tokio::io::duplex(4096);
        let sender = FrameSender::start(a, 8);
        sender.send(frame(1, 10)).await.expect("send");
        sender.close().await;
        assert_eq!(sender.send(frame(2, 10)).await, Err(SendError::Closed));
        // Let the writer task see the end too.
        drop(sender);
        let mut all = Vec::new();
        b.read_to_end(&mut all).await.expect("read");
        assert_eq!(all.len(), frame(1, 10).len());
    }

    /// A direct write dropped half-way closes the socket rather than leave a partial frame
    /// followed by other frames.
    #[tokio::test]
    async fn a_write_dropped_half_way_closes_the_socket() {
        let (a, mut b) = tokio::io::duplex(64);
        let sender = FrameSender::start(a, 8);
        // Bigger than the pipe: the write cannot finish until the peer reads.
        let big = frame(3, 10_000);
        let r = tokio::time::timeout(std::time::Duration::from_millis(50), sender.send(big)).await;
        assert!(r.is_err(), "the write should still be pending");
        assert_eq!(sender.send(frame(4, 10)).await, Err(SendError::Closed));
        let mut all = Vec::new();
        b.read_to_end(&mut all).await.expect("read");
        assert!(all.len() < 10_000, "only the cut frame's start arrived");
    }
}
