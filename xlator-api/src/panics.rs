//! Panics print one structured log line, never Rust's default three-line message.
//!
//! Every copy of std has its own panic hook: the host's, and one per loaded translator library
//! (each cdylib links its own std). [`install_hook`] replaces the hook of the copy it runs in;
//! the host calls it from its logging setup and the SDK from `install_log_bridge`, which the
//! loader calls on every library it loads. Inside the SDK's guards (a fop, init, notify,
//! reconfigure, dump) the hook only records where the panic happened: the guard logs the one
//! line (translator, fop, message, place) and answers EIO or an error. Anywhere else (a thread
//! or task of the translator's own) the hook logs the line itself.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// How many SDK guards this thread is inside.
    static GUARDS: Cell<u32> = const { Cell::new(0) };
    /// `file:line:col` of the last panic caught inside a guard on this thread.
    static LAST: Cell<Option<String>> = const { Cell::new(None) };
}

/// async-ffi's re-panic on the calling side of a future that panicked in a library: that
/// library's hook has already logged the real panic.
const FFI_REPANIC: &str = "FFI future panicked";

/// Replaces this std's panic hook (see the module). Idempotent enough: installing twice just
/// replaces the hook with the same one.
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "an unknown place".into());
        if GUARDS.get() > 0 {
            LAST.set(Some(place));
            return;
        }
        let msg = payload_text(info.payload());
        if msg == FFI_REPANIC {
            tracing::debug!(target: "xlfs::panic", "a translator's future panicked (logged by it)");
            return;
        }
        let thread = std::thread::current();
        tracing::error!(
            target: "xlfs::panic",
            "thread {} panicked at {place}: {msg}",
            thread.name().unwrap_or("<unnamed>")
        );
    }));
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Where the last panic caught under a guard on this thread happened (taken).
pub fn take_place() -> Option<String> {
    LAST.take()
}

struct Depth;

impl Depth {
    fn enter() -> Depth {
        GUARDS.set(GUARDS.get() + 1);
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        GUARDS.set(GUARDS.get().saturating_sub(1));
    }
}

/// `catch_unwind(f)` with the hook told that the panic is handled here.
pub fn guarded<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let _depth = Depth::enter();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

/// A future polled with the hook told that panics in it are handled by the caller (the
/// future must catch them itself: `catch_unwind` inside).
pub struct Guarded<F>(pub F);

impl<F: Future> Future for Guarded<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _depth = Depth::enter();
        // SAFETY: structural pinning of the only field; it is never moved out.
        unsafe { self.map_unchecked_mut(|g| &mut g.0) }.poll(cx)
    }
}
