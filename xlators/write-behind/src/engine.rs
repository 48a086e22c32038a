//! The engine: drives each file's [`Window`](crate::window::Window) — admits cached writes,
//! sends what may go in background tasks, runs the fops that must be ordered against cached
//! writes, and reports background failures.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, PoisonError, RwLock};

use xlator_api::{
    Buf, Ctx, Errno, Fd, FileType, Gfid, HostServices, Iatt, LogLevel, Subvol, WriteReply,
};

use crate::files::{FileRef, Files, Writer};
use crate::flags;
use crate::options::Config;
use crate::window::{Access, Admit, Send, Seq, Span};

const LOG_TARGET: &str = "xlfs::write-behind";

/// Shared by the translator and its background tasks.
pub(crate) struct Engine {
    child: Subvol,
    services: HostServices,
    files: Arc<Files>,
    config: RwLock<Config>,
}

impl Engine {
    pub(crate) fn new(child: Subvol, services: HostServices, config: Config) -> Arc<Engine> {
        Arc::new(Engine {
            child,
            services,
            files: Arc::new(Files::default()),
            config: RwLock::new(config),
        })
    }

    pub(crate) fn child(&self) -> &Subvol {
        &self.child
    }

    pub(crate) fn config(&self) -> Config {
        *self.config.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies new settings, then lets every file send what they now allow.
    pub(crate) fn reconfigure(self: &Arc<Self>, config: Config) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
        for file in self.files.all() {
            file.wake();
            self.pump(&file);
        }
    }

    /// Sends every cached write now (graph switch: finish background work).
    pub(crate) fn flush_everything(self: &Arc<Self>) {
        for file in self.files.all() {
            file.with(|w| w.request_flush());
            self.pump(&file);
        }
    }

    // ---- writes ----

    /// Acknowledges a write once it fits in its file's window (waiting, in arrival order, while
    /// the window is full) and leaves it to be sent in the background.
    /// Whether `gfid` has a cached or write-through write that has not finished.
    pub(crate) fn has_unfinished_writes(&self, gfid: Gfid) -> bool {
        self.files
            .get(gfid)
            .is_some_and(|f| f.with(|w| w.has_writes()))
    }

    pub(crate) async fn write_cached(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<u64, Errno> {
        let len = data.len() as u64;
        let append = flags::is_append(fd.flags, flags);
        let writer = Writer {
            cx: cx.clone(),
            fd,
            flags,
        };
        let file = self.files.get_or_make(fd.gfid);
        let mut ticket = Ticket {
            file: &file,
            id: None,
        };
        loop {
            let mut notified = pin!(file.notified());
            notified.as_mut().enable();
            let limits = self.config().limits;
            let waited = ticket.id.is_some();
            let admitted = file.with(|w| {
                w.admit(
                    &mut ticket.id,
                    &limits,
                    writer.clone(),
                    offset,
                    data.clone(),
                    append,
                )
            });
            // Acked: may go now. Wait: the window is being drained, make it go.
            self.pump(&file);
            match admitted {
                Admit::Acked(_) => {
                    if waited {
                        // The next writer in line may fit now, or must drain this write.
                        file.wake();
                    }
                    return Ok(len);
                }
                Admit::Failed(e) => return Err(e),
                Admit::Wait => notified.await,
            }
        }
    }

    /// Sends a write itself (O_SYNC, O_DSYNC, strict O_DIRECT) after every earlier write of
    /// the file, and returns the child's answer.
    pub(crate) async fn write_through(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        data: Buf,
        flags: i32,
    ) -> Result<WriteReply, Errno> {
        let file = self.files.get_or_make(fd.gfid);
        if let Some(e) = file.with(|w| w.error()) {
            return Err(e);
        }
        let span = if flags::is_append(fd.flags, flags) {
            Span::ALL
        } else {
            Span::at(offset, data.len() as u64)
        };
        self.ordered_on(file, Access::WriteThrough, span, || {
            self.child.writev(cx, fd, offset, data, flags)
        })
        .await
    }

    /// Lets the window of `file` send what may go: cached writes to background tasks, granted
    /// requests to their waiting owners.
    fn pump(self: &Arc<Self>, file: &FileRef) {
        let config = self.config();
        let out = file.with(|w| w.dispatch(&config.limits));
        if out.granted {
            file.wake();
        }
        for send in out.sends {
            self.send_behind(file.clone(), send);
        }
        if out.holding && !config.limits.trickle && file.arm_hold_timer() {
            self.send_held_after(file.clone(), config.aggregate_wait);
        }
    }

    /// Ends, after `wait`, the growth of what `file` holds now (`aggregate-wait`): a partial
    /// aggregate no write followed is sent then. One timer per file at a time.
    fn send_held_after(self: &Arc<Self>, file: FileRef, wait: std::time::Duration) {
        let engine = self.clone();
        let sleep = self.services.sleep(wait);
        self.services.spawn(async move {
            sleep.await;
            file.disarm_hold_timer();
            file.with(|w| w.request_flush());
            engine.pump(&file);
        });
    }

    /// Sends one cached write in a background task; its completion frees window space and
    /// records a failure on the file.
    fn send_behind(self: &Arc<Self>, file: FileRef, send: Send<Writer>) {
        let engine = self.clone();
        self.services.spawn(async move {
            let mut done = Completion {
                engine: &engine,
                file,
                seq: send.seq,
                result: None,
            };
            done.result = Some(write_fully(&engine.child, &send).await);
        });
    }

    // ---- ordering ----

    /// Runs `call` once every earlier conflicting request of `gfid` has finished, holding back
    /// later conflicting ones until it returns (see [`crate::window`] for the rules).
    pub(crate) async fn ordered<R, Fut>(
        self: &Arc<Self>,
        gfid: Gfid,
        access: Access,
        span: Span,
        call: impl FnOnce() -> Fut,
    ) -> Result<R, Errno>
    where
        Fut: Future<Output = Result<R, Errno>>,
    {
        let file = self.files.get_or_make(gfid);
        self.ordered_on(file, access, span, call).await
    }

    async fn ordered_on<R, Fut>(
        self: &Arc<Self>,
        file: FileRef,
        access: Access,
        span: Span,
        call: impl FnOnce() -> Fut,
    ) -> Result<R, Errno>
    where
        Fut: Future<Output = Result<R, Errno>>,
    {
        let seq = file.with(|w| w.enqueue(access, span));
        let owned = Owned {
            engine: self,
            file,
            seq,
        };
        self.pump(&owned.file);
        owned.file.wait_until(|w| w.is_granted(seq)).await;
        let r = call().await;
        drop(owned);
        r
    }

    /// Waits until every request on `gfid` that arrived before now has finished (cached
    /// writes are sent at once). Later requests are not held back.
    pub(crate) async fn barrier(self: &Arc<Self>, gfid: Gfid) {
        if let Some(file) = self.files.get(gfid) {
            self.barrier_on(&file).await;
        }
    }

    async fn barrier_on(self: &Arc<Self>, file: &FileRef) {
        let upto = file.with(|w| w.barrier());
        self.pump(file);
        file.wait_until(|w| w.done_upto(upto)).await;
    }

    /// [`Engine::barrier`] over every file with state: for fops that name a file by parent
    /// and name only (rename, unlink, readdirp, create with O_TRUNC).
    pub(crate) async fn barrier_all(self: &Arc<Self>) {
        let marks: Vec<(FileRef, Seq)> = self
            .files
            .all()
            .into_iter()
            .map(|file| {
                let upto = file.with(|w| w.barrier());
                self.pump(&file);
                (file, upto)
            })
            .collect();
        for (file, upto) in &marks {
            file.wait_until(|w| w.done_upto(*upto)).await;
        }
    }

    // ---- reporting ----

    /// fsync: after every earlier request; a recorded background failure wins over the
    /// child's answer and is cleared by being reported.
    pub(crate) async fn fsync(
        self: &Arc<Self>,
        cx: &Ctx,
        fd: Fd,
        datasync: bool,
    ) -> Result<(), Errno> {
        let Some(file) = self.files.get(fd.gfid) else {
            return self.child.fsync(cx, fd, datasync).await;
        };
        self.barrier_on(&file).await;
        let r = self.child.fsync(cx, fd, datasync).await;
        report(&file, r)
    }

    /// flush (every close). With flush-behind and requests still unfinished, it is queued
    /// after them and answered at once (with a failure already recorded, if any). Otherwise it
    /// waits for them and reports what failed.
    pub(crate) async fn flush(self: &Arc<Self>, cx: &Ctx, fd: Fd) -> Result<(), Errno> {
        let Some(file) = self.files.get(fd.gfid) else {
            return self.child.flush(cx, fd).await;
        };
        if !self.config().flush_behind || !file.with(|w| w.is_busy()) {
            self.barrier_on(&file).await;
            let r = self.child.flush(cx, fd).await;
            return report(&file, r);
        }
        let (seq, error) = file.with(|w| (w.enqueue(Access::Flush, Span::ALL), w.take_error()));
        self.pump(&file);
        let engine = self.clone();
        let cx = cx.clone();
        self.services.spawn(async move {
            let owned = Owned {
                engine: &engine,
                file,
                seq,
            };
            owned.file.wait_until(|w| w.is_granted(seq)).await;
            if let Err(e) = engine.child.flush(&cx, fd).await {
                engine.log_failure("flush", owned.file.gfid(), e);
                owned.file.with(|w| w.record_error(e));
            }
        });
        error.map_or(Ok(()), Err)
    }

    /// Replaces `attr` by a fresh one when its file has writes unfinished (lookup and
    /// readdirp replies must not carry a size or mtime older than acknowledged writes).
    pub(crate) async fn refresh_attr(self: &Arc<Self>, cx: &Ctx, attr: &mut Iatt) {
        if attr.kind != FileType::Regular {
            return;
        }
        let Some(file) = self.files.get(attr.gfid) else {
            return;
        };
        if !file.with(|w| w.has_writes()) {
            return;
        }
        let gfid = attr.gfid;
        let fresh = self
            .ordered_on(file, Access::Observe, Span::ALL, || {
                self.child.stat(cx, gfid)
            })
            .await;
        if let Ok(a) = fresh {
            *attr = a;
        }
    }

    fn log_failure(&self, what: &str, gfid: Gfid, e: Errno) {
        let msg = format!(
            "background {what} of {gfid} failed: {e}; reported on the next fsync, flush or write"
        );
        self.services.log(LogLevel::Warn, LOG_TARGET, &msg);
    }

    /// Per-file state for statedumps: `(gfid, requests, in flight, cached bytes, waiting
    /// writers, error)`.
    pub(crate) fn dump_rows(&self) -> Vec<xlator_api::Dump> {
        self.files
            .stats()
            .into_iter()
            .map(|(gfid, s)| {
                xlator_api::Dump::new()
                    .with("gfid", gfid.to_string())
                    .with("requests", s.requests)
                    .with("in_flight", s.in_flight)
                    .with("cached_bytes", s.cached_bytes)
                    .with("waiting_writers", s.waiting_writers)
                    .with(
                        "error",
                        s.error.map_or_else(|| "-".to_owned(), |e| format!("{e:?}")),
                    )
            })
            .collect()
    }
}

/// The answer of an fsync or flush: a recorded background failure (then cleared), or the
/// child's own answer.
fn report(file: &FileRef, child: Result<(), Errno>) -> Result<(), Errno> {
    match file.with(|w| w.take_error()) {
        Some(e) => Err(e),
        None => child,
    }
}

/// Writes all of a cached write, sending the rest again after a short write.
async fn write_fully(child: &Subvol, send: &Send<Writer>) -> Result<(), Errno> {
    let w = &send.origin;
    let len = send.data.len();
    let mut done = 0;
    while done < len {
        let rest = send.data.slice(done..);
        let n = child
            .writev(&w.cx, w.fd, send.offset + done as u64, rest, w.flags)
            .await?
            .written;
        if n == 0 {
            return Err(Errno::EIO);
        }
        done = done
            .saturating_add(usize::try_from(n).unwrap_or(usize::MAX))
            .min(len);
    }
    Ok(())
}

/// An owned request in a file's queue; dropping it (reply, error or cancelled caller) removes
/// it and lets what waited on it go.
struct Owned<'a> {
    engine: &'a Arc<Engine>,
    file: FileRef,
    seq: Seq,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        self.file.with(|w| w.complete(self.seq));
        self.file.wake();
        self.engine.pump(&self.file);
    }
}

/// The end of a background write. A task dropped before the reply (runtime shut down) counts
/// as failed with EIO: acknowledged data is never forgotten silently.
struct Completion<'a> {
    engine: &'a Arc<Engine>,
    file: FileRef,
    seq: Seq,
    result: Option<Result<(), Errno>>,
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        let error = match self.result {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e),
            None => Some(Errno::EIO),
        };
        if let Some(e) = error {
            self.engine.log_failure("write", self.file.gfid(), e);
        }
        self.file.with(|w| {
            if let Some(e) = error {
                w.record_error(e);
            }
            w.complete(self.seq);
        });
        self.file.wake();
        self.engine.pump(&self.file);
    }
}

/// A writer's place in the window queue, given back if the writer goes away while waiting.
struct Ticket<'a> {
    file: &'a FileRef,
    id: Option<u64>,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.id {
            self.file.with(|w| w.cancel_ticket(t));
            self.file.wake();
        }
    }
}
