//! Where each protocol/server of this process listens, filled when it binds: hosts print the
//! port picked for `listen-port` 0 from here ([`listen_addr`](super::listen_addr)), typed,
//! instead of reading it out of a statedump.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

struct Bound {
    name: String,
    token: u64,
    addr: SocketAddr,
}

static BOUND: Mutex<Vec<Bound>> = Mutex::new(Vec::new());
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Removes its entry when the server stops.
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        BOUND
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|b| b.token != self.0);
    }
}

/// Records that the server instance `name` listens on `addr`.
pub fn register(name: &str, addr: SocketAddr) -> Registration {
    let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    BOUND
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Bound {
            name: name.to_owned(),
            token,
            addr,
        });
    Registration(token)
}

/// The address of the live server instance named `name`; the most recently bound one when
/// several graphs of this process have one of that name (a graph being replaced).
pub fn lookup(name: &str) -> Option<SocketAddr> {
    BOUND
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .rev()
        .find(|b| b.name == name)
        .map(|b| b.addr)
}
