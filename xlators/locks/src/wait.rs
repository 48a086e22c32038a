//! A waiting lock request as a future: ready when the table grants or fails it. Dropping it
//! before then (the server cancels a request its client abandoned, or the client is gone)
//! withdraws the request; if the grant raced with the drop and is already in the channel,
//! the lock is given back. Never blocks a thread.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::channel::oneshot;
use xlator_api::{Errno, Gfid};

use crate::owner::Owner;
use crate::range::Held;
use crate::table::{LockTable, Space, wake_entries, wake_range};

/// What granting a waiter installed, to undo when nobody takes it.
pub enum Undo {
    /// A range lock in a space.
    Range(Space, Held),
    /// One count of an entry lock.
    Entry {
        domain: String,
        name: Option<String>,
        owner: Owner,
    },
}

/// The wait for request `id` on inode `g`.
pub struct Wait<'a> {
    table: &'a LockTable,
    g: Gfid,
    id: u64,
    undo: Undo,
    rx: oneshot::Receiver<Result<(), Errno>>,
    /// The outcome was delivered to the caller: nothing to withdraw.
    done: bool,
}

impl<'a> Wait<'a> {
    pub fn new(
        table: &'a LockTable,
        g: Gfid,
        id: u64,
        undo: Undo,
        rx: oneshot::Receiver<Result<(), Errno>>,
    ) -> Self {
        Wait {
            table,
            g,
            id,
            undo,
            rx,
            done: false,
        }
    }
}

impl Future for Wait<'_> {
    type Output = Result<(), Errno>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = match Pin::new(&mut self.rx).poll(cx) {
            Poll::Pending => return Poll::Pending,
            // The sender went away unanswered (not done by the table today).
            Poll::Ready(r) => r.unwrap_or(Err(Errno::EINTR)),
        };
        self.done = true;
        Poll::Ready(r)
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (id, rx) = (self.id, &mut self.rx);
        // Under the table mutex: either the request is still queued (withdraw it), or the
        // table already decided and the decision is in `rx` (sends happen under the mutex).
        self.table.with(self.g, |il| match &self.undo {
            Undo::Range(s, req) => {
                let rl = il.space(s);
                if rl.remove_waiter(id).is_none() && granted(rx) && rl.unlock(req.owner, req.range)
                {
                    wake_range(rl);
                }
            }
            Undo::Entry {
                domain,
                name,
                owner,
            } => {
                let el = il.entries(domain);
                if el.remove_waiter(id).is_none()
                    && granted(rx)
                    && el.unlock(name.as_deref(), *owner).is_ok()
                {
                    wake_entries(el);
                }
            }
        })
    }
}

/// Whether the table granted the request (rather than failing it: EBADF on release,
/// ENOTCONN on forget_client, where there is nothing to give back).
fn granted(rx: &mut oneshot::Receiver<Result<(), Errno>>) -> bool {
    matches!(rx.try_recv(), Ok(Some(Ok(()))))
}
