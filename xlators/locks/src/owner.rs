//! Who holds or waits for a lock: the client connection and the lock owner it named.
//!
//! Lock owners are chosen by clients (root's is often 0, a kernel's are pointer values), so
//! the same owner value from two clients names two different holders; and an fd id is a
//! per-connection number, so an fd is only meaningful together with its client too.

use xlator_api::{ClientId, Ctx, LkOwner};

/// A lock holder: `client` is the connection the request came on (`None`: a caller in this
/// process, which has no [`ClientId`] in its context), `lk` the lock owner it named.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Owner {
    pub client: Client,
    pub lk: LkOwner,
}

/// The connection a request came on (`None`: a local caller).
pub type Client = Option<ClientId>;

/// The client a request came on.
pub fn client_of(cx: &Ctx) -> Client {
    cx.ext::<ClientId>()
}

impl Owner {
    /// Lock owner `lk` as named by the caller of `cx`.
    pub fn new(cx: &Ctx, lk: LkOwner) -> Owner {
        Owner {
            client: client_of(cx),
            lk,
        }
    }
}
